#!/usr/bin/python3
"""Golden renders of the template subset (doc/template.md) by Jinja2 itself.

Run with Debian's python3-jinja2 installed (from any directory):

    /usr/bin/python3 tools/gen_template_goldens.py

It renders every case of CASES below with jinja2.Environment() defaults
(no autoescape, trim_blocks, lstrip_blocks and keep_trailing_newline off)
and writes tests/golden/templates.json, which is committed: the Lisp suite
TEMPLATE (tests/lisp/test-template.lisp) renders the same cases and
compares.  Per case the file holds the template, the bindings (JSON), what
Jinja2 did ({"output": text} or {"raises": exception class, "message"}),
and what rontolisp must do ("expect"):
  "output"   the same text as Jinja2,
  "error"    a TEMPLATE-ERROR, because Jinja2 raised too,
  "refused"  a TEMPLATE-ERROR whose message names "construct" and
             "template offset N" ("offset"): valid Jinja2 (mostly) that is
             outside the subset.
The output is deterministic (fixed seed for the random floats), so a rerun
with the same Jinja2 gives the same file.
"""

import json
import os
import random
import re
import struct
import sys

import jinja2

SYSTEMONE = ("[CLS]{{ type }} question: {{ instructions }}[SEP]"
             "{% for o in options %}[MASK]{{ o.text if o.text is defined else o }}{% endfor %}"
             "[SEP]{{ state }}[SEP]")

CASES = []


def case(name, template, bindings=None, refused=None):
    """REFUSED: (construct, needle): the message names CONSTRUCT, and the
    offset is where NEEDLE first occurs in TEMPLATE (needle may be an int)."""
    CASES.append((name, template, bindings or {}, refused))


def random_floats(seed, count):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        kind = rng.randrange(4)
        if kind == 0:
            out.append(rng.uniform(-1000, 1000))
        elif kind == 1:
            out.append(rng.random() * 10.0 ** rng.randrange(-30, 30))
        elif kind == 2:
            out.append(round(rng.uniform(-100, 100), rng.randrange(0, 6)))
        else:
            bits = rng.getrandbits(64)
            x = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
            if x == x and abs(x) != float("inf"):
                out.append(x)
            else:
                out.append(1.5)
    return out


# The converter's template, with every shape of option.
Q = {"type": "choice", "instructions": "Pick one.", "state": "turn 3"}
case("systemone-strings", SYSTEMONE, dict(Q, options=["north", "south", "east"]))
case("systemone-text-objects", SYSTEMONE, dict(Q, options=[{"text": "go"}, {"text": "stay"}]))
case("systemone-mixed", SYSTEMONE, dict(Q, options=["a", {"text": "b"}]))
case("systemone-option-without-text", SYSTEMONE, dict(Q, options=["a", {"other": 1}]),
     ("a mapping", "o.text"))
case("systemone-no-options", SYSTEMONE, dict(Q, options=[]))
case("systemone-unicode", SYSTEMONE,
     {"type": "wahl", "instructions": "Wähle — 選べ 🙂", "state": "état",
      "options": ["naïve", {"text": "日本語"}, "a\u00a0b"]})
case("systemone-missing-state", SYSTEMONE, dict(type="t", instructions="i", options=["x"]))
case("systemone-text-null", SYSTEMONE, dict(Q, options=[{"text": None}, {"text": 0}]))
case("systemone-options-undefined", SYSTEMONE, {"type": "t"})

# Text, comments, newlines.
case("plain-text", "hello, world")
case("empty-template", "")
case("trailing-newline-dropped", "line\n")
case("only-one-trailing-newline-dropped", "line\n\n")
case("crlf-normalized", "a\r\nb{{ x }}\rc\r\n", {"x": "X"})
case("lone-braces", "{ } }} %} #} {x} {", {})
case("comment", "a{# a comment {{ x }} {% if %} #}b")
case("comment-strip", "a  {#- c -#}  b")
case("comment-dash-inside", "a {#-#} b")
case("unclosed-comment", "a {# b")

# Whitespace control.
case("strip-before-variable", "a \n\t {{- x }} b", {"x": 1})
case("strip-after-variable", "a {{ x -}} \n\t b", {"x": 1})
case("strip-both-block", "a  \n {%- if true -%} \n b \n {%- endif -%}  \n c")
case("strip-unicode-space", "a\u3000\u00a0{{- x -}}\u2003b", {"x": "|"})
case("strip-keeps-other-text", "x.{{- 'y' -}}.z")
case("plus-modifier", "a  {%+ if true +%}  b  {%+ endif %}")
case("plus-on-variable", "a {{+ x }} b", {"x": 1})
case("no-trim-blocks", "{% if true %}\nyes\n{% endif %}\n")
case("strip-in-loop", "{% for x in xs -%}\n  {{ x }}\n{%- endfor %}", {"xs": [1, 2, 3]})

# Output of values.
case("print-int", "{{ n }} {{ m }} {{ big }}", {"n": 42, "m": -7, "big": 9223372036854775807})
case("print-bool-none", "{{ t }} {{ f }} {{ z }} {{ true }} {{ False }} {{ none }} {{ None }}",
     {"t": True, "f": False, "z": None})
case("print-floats", "{% for x in xs %}{{ x }} {% endfor %}",
     {"xs": [1.0, 0.1, 1e-05, 0.0001, 1e16, 1e15, 123456789.123, 5e-324,
             1.7976931348623157e308, -0.0, 0.0, 0.30000000000000004, 1e22, 2.5,
             12345678901234567.0, 2.2250738585072014e-308, 1.5e-310, -1.5e-07]})
case("print-random-floats", "{% for x in xs %}{{ x }},{% endfor %}",
     {"xs": random_floats(2026, 400)})
case("print-undefined", "[{{ nothing }}]")
case("print-integer-literals", "{{ 0 }} {{ 10 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 00 }}")
case("print-list-refused", "{{ xs }}", {"xs": [1, 2]}, ("a list", "xs"))
case("print-dict-refused", "{{ d }}", {"d": {"a": 1}}, ("a mapping", "d"))

# String literals.
case("string-literals", "{{ 'single' }} {{ \"double\" }} {{ 'it\\'s' }} {{ \"q\\\"q\" }}")
case("string-escapes", "{{ 'a\\tb\\nc\\\\d\\x41\\u00e9\\U0001F600\\101\\z' }}")
case("string-adjacent", "{{ 'a' \"b\" 'c' }}")
case("string-unicode", "{{ 'héllo 🙂' }}|{{ 'é'|length }}")
case("string-backslash-nonascii", "{{ '\\é' }}")
case("string-bad-hex-escape", "{{ 'a\\x4' }}")
case("string-unterminated", "{{ 'abc }}")
case("string-named-escape", "{{ '\\N{BULLET}' }}", None, ("\\N{...}", "'"))
case("string-line-continuation", "{{ 'a\\\nb' }}")

# Names, attributes and subscripts.
case("attribute-of-dict", "{{ d.a }} {{ d['a'] }} {{ d[\"b\"] }} {{ d.missing }}|",
     {"d": {"a": 1, "b": "two"}})
case("attribute-nested", "{{ d.a.b.c }}", {"d": {"a": {"b": {"c": "deep"}}}})
case("subscript-list", "{{ xs[0] }} {{ xs[2] }} {{ xs.1 }} {{ xs[9] }}|{{ xs[i] }}",
     {"xs": ["a", "b", "c"], "i": -1})
case("subscript-string", "{{ s[0] }}{{ s[1] }}|{{ s[7] }}|{{ s.x }}|", {"s": "héllo"})
case("subscript-bool-index", "{{ xs[true] }}{{ xs[false] }}", {"xs": ["a", "b"]})
case("subscript-by-variable", "{{ d[k] }} {{ xs[n] }}", {"d": {"k": "v"}, "k": "k", "xs": [5, 6], "n": 1})
case("subscript-missing-key", "[{{ d[1] }}{{ d['zz'] }}{{ n.x }}{{ n[0] }}]", {"d": {"a": 1}, "n": 5})
case("attribute-of-string-undefined", "{{ o.text is defined }}", {"o": "plain"})
case("attribute-of-undefined-raises", "{{ u.x }}")
case("subscript-of-undefined-raises", "{{ u[0] }}")
case("defined-of-undefined-attribute-raises", "{{ u.x is defined }}")
case("attribute-of-none-is-undefined", "[{{ z.x }}]", {"z": None})
case("dict-method-refused", "{{ d.items }}", {"d": {"a": 1}}, ("items", "."))
case("string-method-refused", "{{ s.upper }}", {"s": "a"}, ("upper", "."))
case("dunder-refused", "{{ s.__class__ }}", {"s": "a"}, ("__class__", "."))
case("dunder-of-undefined-refused", "{{ u.__class__ }}", None, ("__class__", "."))
case("names-that-are-keywords", "[{{ in }}{{ if }}]")
case("global-range-refused", "{{ range is defined }}", None, ("the Jinja2 global \"range\"", "range"))
case("global-dict-refused", "{{ dict }}", None, ("the Jinja2 global \"dict\"", "dict"))
case("global-hidden-by-binding", "{{ range }} {{ lipsum.x }}|", {"range": "r", "lipsum": {"x": 1}})
case("global-hidden-by-loop-variable", "{% for namespace in xs %}{{ namespace }}{% endfor %}",
     {"xs": [1, 2]})
case("self-refused", "{{ self is defined }}", None, ("\"self\"", "self"))

# Tests.
case("is-defined", "{{ a is defined }} {{ b is defined }} {{ a is not defined }} {{ b is not defined }}",
     {"a": 0})
case("defined-null", "{{ z is defined }}", {"z": None})
case("defined-precedence", "{{ 'x' ~ a is defined }}", {"a": 1})
case("not-defined-precedence", "{{ not a is defined }}", {})
case("test-chain-error", "{{ a is defined is defined }}")
case("test-none-refused", "{{ a is none }}", {"a": None}, ("the test \"none\"", "none"))

# Boolean operators and comparisons.
case("and-or-values", "{{ 'a' and 'b' }}|{{ '' and 'b' }}|{{ 0 or 'x' }}|{{ 'y' or u }}|{{ u or '' }}|")
case("and-or-precedence", "{{ a or b and c }} {{ (a or b) and c }}", {"a": 1, "b": 0, "c": 0})
case("not", "{{ not 0 }} {{ not 1 }} {{ not '' }} {{ not u }} {{ not not 'x' }} {{ not xs }}",
     {"xs": []})
case("equality", "{{ 1 == 1 }} {{ 1 == 2 }} {{ 'a' == 'a' }} {{ 'a' != 'b' }} {{ 1 == '1' }}")
case("equality-numbers", "{{ i == f }} {{ t == 1 }} {{ f2 == 0 }} {{ t == 2 }} {{ z == none }}",
     {"i": 1, "f": 1.0, "t": True, "f2": False, "z": None})
case("equality-structures", "{{ xs == ys }} {{ xs == zs }} {{ d == e }} {{ d == f }} {{ xs == d }}",
     {"xs": [1, "a", [True]], "ys": [1.0, "a", [1]], "zs": [1], "d": {"a": 1, "b": [2]},
      "e": {"b": [2], "a": 1}, "f": {"a": 1}})
case("equality-undefined", "{{ u == v }} {{ u == none }} {{ u != '' }} {{ u == '' }}")
case("equality-chained", "{{ 1 == 1 == 1 }} {{ 1 == 1 != 2 }} {{ 1 == 2 == u.x }}")
case("comparison-less-refused", "{{ 1 < 2 }}", None, ("the operator \"<\"", "<"))
case("in-refused", "{{ 'a' in 'abc' }}", None, ("the operator \"in\"", "in 'abc'"))
case("not-in-refused", "{{ 'a' not in 'abc' }}", None, ("\"not in\"", "not"))

# Concatenation.
case("concat", "{{ 'a' ~ 1 ~ true ~ none ~ u ~ f }}", {"f": 2.5})
case("concat-precedence", "{{ 'a' ~ 'b' == 'ab' }}")
case("concat-list-refused", "{{ 'a' ~ xs }}", {"xs": [1]}, ("a list", "xs"))

# Inline if.
case("inline-if", "{{ 'y' if c else 'n' }} {{ 'y' if not c else 'n' }} [{{ 'y' if not c }}]",
     {"c": True})
case("inline-if-nested", "{{ 'a' if x == 1 else 'b' if x == 2 else 'c' }}", {"x": 2})
case("inline-if-no-else-undefined", "{{ ('y' if false) is defined }}")
case("inline-if-chained", "{{ 'a' if true if false }}|")
case("if-tag-no-inline-if", "{% if 1 if 2 else 3 %}x{% endif %}")
case("if-tag-parenthesized-inline-if", "{% if (0 if 1 else 2) %}x{% else %}y{% endif %}")

# Filters.
case("trim", "[{{ '  a b \n'|trim }}][{{ s|trim }}][{{ 5|trim }}][{{ u|trim }}][{{ none|trim }}]",
     {"s": "\u3000\u00a0x\u2028"})
case("trim-empty-parens", "[{{ ' a '|trim() }}]")
case("length", "{{ s|length }} {{ xs|length }} {{ d|length }} {{ u|length }} {{ ''|length }}",
     {"s": "héllo🙂", "xs": [1, 2, 3], "d": {"a": 1, "b": 2}})
case("length-of-int-raises", "{{ n|length }}", {"n": 5})
case("length-of-none-raises", "{{ z|length }}", {"z": None})
case("filter-chain", "{{ ' ab '|trim|length }}")
case("filter-binds-tighter", "{{ 'a' ~ ' b '|trim }}")
case("filter-upper-refused", "{{ x|upper }}", {"x": "a"}, ("the filter \"upper\"", "upper"))
case("filter-unknown-refused", "{{ x|nosuchfilter }}", {"x": "a"}, ("nosuchfilter", "nosuchfilter"))
case("filter-argument-refused", "{{ x|trim('x') }}", {"x": "xax"}, ("arguments", "trim"))

# If.
case("if-elif-else", "{% for n in ns %}{% if n == 1 %}one{% elif n == 2 %}two{% elif n == 3 %}three"
     "{% else %}many{% endif %},{% endfor %}", {"ns": [1, 2, 3, 4]})
case("if-truthiness", "{% for v in vs %}{% if v %}T{% else %}F{% endif %}{% endfor %}",
     {"vs": [0, 1, "", "a", [], [0], {}, {"a": 1}, None, True, False, 0.0, 0.5]})
case("if-undefined", "{% if u %}yes{% else %}no{% endif %}")
case("if-unclosed", "{% if true %}x")
case("if-else-twice", "{% if true %}a{% else %}b{% else %}c{% endif %}")
case("endif-alone", "x{% endif %}")
case("elif-after-else", "{% if x %}a{% else %}b{% elif y %}c{% endif %}")
case("if-colon-refused", "{% if true: %}x{% endif %}", None, ("\":\"", ":"))

# For.
case("for-loop-variables", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.first }}/"
     "{{ loop.last }}:{{ x }} {% endfor %}", {"xs": ["a", "b", "c"]})
case("for-single", "{% for x in xs %}{{ loop.first }}{{ loop.last }}{% endfor %}", {"xs": [0]})
case("for-nested", "{% for r in rows %}{% for c in r %}{{ loop.index }}{{ c }}{% endfor %}"
     "({{ loop.index }});{% endfor %}", {"rows": [["a", "b"], [], ["c"]]})
case("for-scope", "{{ x }}{% for x in xs %}{{ x }}{% endfor %}{{ x }}", {"x": "o", "xs": [1, 2]})
case("for-string", "{% for c in s %}[{{ c }}]{% endfor %}", {"s": "hé🙂"})
case("for-undefined", "a{% for x in u %}{{ x }}{% endfor %}b")
case("for-over-int-raises", "{% for x in n %}{% endfor %}", {"n": 3})
case("for-over-false-raises", "{% for x in f %}{% endfor %}", {"f": False})
case("for-over-dict-refused", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"a": 1}},
     ("mapping", "d %}"))
case("for-else-refused", "{% for x in xs %}{{ x }}{% else %}none{% endfor %}", {"xs": []},
     ("else", "else"))
case("for-filter-refused", "{% for x in xs if x %}{{ x }}{% endfor %}", {"xs": [0, 1]},
     ("if", "if"))
case("for-unpack-refused", "{% for a, b in xs %}{% endfor %}", {"xs": []}, ("\",\"", ","))
case("for-unclosed", "{% for x in xs %}{{ x }}", {"xs": [1]})
case("endfor-alone", "{% endfor %}")
case("loop-length-refused", "{% for x in xs %}{{ loop.length }}{% endfor %}", {"xs": [1]},
     ("loop.index", "loop"))
case("loop-outside-for", "[{{ loop }}]")
case("for-loop-in-condition", "{% for x in xs %}{% if loop.last %}.{% else %}{{ x }},{% endif %}"
     "{% endfor %}", {"xs": [1, 2, 3]})
case("for-target-constant", "{% for true in xs %}{% endfor %}", {"xs": [1]})

# Syntax errors (Jinja2 raises TemplateSyntaxError).
case("unclosed-variable", "a {{ x")
case("unclosed-block", "a {% if x")
case("empty-expression", "{{ }}")
case("unknown-tag", "{% frobnicate %}")
case("bad-character", "{{ x $ y }}")
case("missing-paren", "{{ (a }}")
case("dot-without-name", "{{ a. }}")

# Valid Jinja2 outside the subset.
case("set-refused", "a{% set x = 1 %}{{ x }}", None, ("the tag \"set\"", "set"))
case("macro-refused", "{% macro m() %}x{% endmacro %}", None, ("the tag \"macro\"", "macro"))
case("raw-refused", "{% raw %}{{ x }}{% endraw %}", None, ("the tag \"raw\"", "raw"))
case("include-refused", "{% include 'x' %}", None, ("the tag \"include\"", "include"))
case("plus-refused", "{{ 1 + 2 }}", None, ("the operator \"+\"", "+"))
case("minus-refused", "{{ xs[-1] }}", {"xs": [1]}, ("the operator \"-\"", "-"))
case("multiply-refused", "{{ 2 * 3 }}", None, ("the operator \"*\"", "*"))
case("float-literal-refused", "{{ 1.5 }}", None, ("float literal", "1.5"))
case("list-literal-refused", "{{ [1, 2]|length }}", None, ("list literal", "["))
case("dict-literal-refused", "{{ {'a': 1}|length }}", None, ("dict literal", "{'"))
case("call-refused", "{{ s.strip() }}", {"s": " a "}, ("call", "("))
case("tuple-refused", "{{ (1, 2)|length }}", None, ("\",\"", ","))
case("non-ascii-name-refused", "{{ café }}", {"café": 1}, ("non-ASCII", "é"))

NESTING = 300
case("deep-parentheses", "{{ " + "(" * NESTING + "1" + ")" * NESTING + " }}", None,
     ("nested", 3 + 200))
case("deep-ifs", "{% if true %}" * NESTING + "x" + "{% endif %}" * NESTING, None,
     ("nested", len("{% if true %}") * 200 + 3))


def main():
    cases = []
    names = set()
    for name, template, bindings, refused in CASES:
        assert name not in names, name
        names.add(name)
        # The bindings go through JSON exactly as the Lisp side reads them.
        bindings = json.loads(json.dumps(bindings))
        entry = {"name": name, "template": template, "bindings": bindings}
        try:
            out = jinja2.Environment().from_string(template).render(bindings)
            # Object addresses (a method's repr) differ run to run.
            entry["jinja2"] = {"output": re.sub(r" at 0x[0-9a-f]+", " at 0x...", out)}
        except Exception as e:  # noqa: BLE001 - any raise is what we record
            entry["jinja2"] = {"raises": type(e).__name__, "message": str(e)}
        if refused:
            construct, needle = refused
            offset = needle if isinstance(needle, int) else template.index(needle)
            entry.update(expect="refused", construct=construct, offset=offset)
        else:
            entry["expect"] = "error" if "raises" in entry["jinja2"] else "output"
        cases.append(entry)
    doc = {
        "about": "Jinja2's renders of the template subset; made by tools/gen_template_goldens.py",
        "jinja2": jinja2.__version__,
        "python": sys.version.split()[0],
        "cases": cases,
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden",
                       "templates.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    counts = {}
    for c in cases:
        counts[c["expect"]] = counts.get(c["expect"], 0) + 1
    print(f"{len(cases)} cases: {counts}")


if __name__ == "__main__":
    main()
