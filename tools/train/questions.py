"""Questions with an answer, in doc/decision.md's form, and a tokenizer fitted to them.

Three question types, each with 2 to 6 options, whose right option depends on the text:
- `pick`:  the instructions name one of the options ("Open lamp."); the state mentions another.
- `count`: the state lists 1 to 6 items; the options are numbers; the right one is the count.
- `most`:  the options are distinct numbers 0-9; the instructions ask for the largest or the
  smallest; the right option is that number.
generate(seed, n) is deterministic: the same seed gives the same questions, each a dict with
"type", "instructions", "options", "state" and "answer" (the right option's index).

bpe_tokenizer(texts, base) fits byte-level BPE merges to the texts (a deterministic trainer:
the most frequent adjacent pair merges first, ties to the smaller pair) and answers a
tokenizer.json like base (the one `convert --random` writes: the same special tokens,
normalizer, pre-tokenizer and decoder), with the 256 byte symbols and the merges.
"""
import random
import re

WORDS = ["lamp", "door", "apple", "river", "stone", "cloud", "table", "chair", "piano", "tiger",
         "mango", "pearl", "bread", "cable", "disk", "shell", "path", "file", "note", "key",
         "book", "coin", "leaf", "star", "moon", "ring", "bell", "rope", "salt", "wolf",
         "frog", "kite", "nail", "ship", "tent", "vase", "wind", "yarn", "zinc", "oak"]

PICK = ["Open {w}.", "Choose {w}.", "Run {w} now.", "Delete the file {w}.", "Show me {w}.",
        "Use {w} next.", "Go to {w}."]
PICK_STATE = ["last used: {x}", "{x} is open", "cwd ~/{x}", "ready", "{x} and {y} are open"]
COUNT = ["How many items are in the state?", "Count the items.", "How many files are listed?",
         "Count the entries."]
COUNT_STATE = ["items: {l}", "files: {l}", "{l}", "ls: {l}"]
MOST = {"largest": ["Which value is the largest?", "Pick the biggest.", "Choose the highest score."],
        "smallest": ["Which value is the smallest?", "Pick the lowest.", "Choose the lowest score."]}
MOST_STATE = ["scores of {w}", "sizes in MB", "{w} results", "ready"]

TYPES = ["pick", "count", "most"]


def question(r):
    qtype = r.choice(TYPES)
    k = r.randint(2, 6)
    if qtype == "pick":
        options = r.sample(WORDS, k)
        answer = r.randrange(k)
        others = ([o for i, o in enumerate(options) if i != answer]
                  + [w for w in r.sample(WORDS, 3) if w != options[answer]])
        instructions = r.choice(PICK).format(w=options[answer])
        state = r.choice(PICK_STATE).format(x=others[0], y=r.choice(others[1:]))
    elif qtype == "count":
        n = r.randint(1, 6)
        numbers = [str(n)] + r.sample([str(i) for i in range(1, 7) if i != n], k - 1)
        r.shuffle(numbers)
        options, answer = numbers, numbers.index(str(n))
        instructions = r.choice(COUNT)
        state = r.choice(COUNT_STATE).format(l=" ".join(r.choice(WORDS) for _ in range(n)))
    else:
        values = r.sample(range(10), k)
        which = r.choice(sorted(MOST))
        best = max(values) if which == "largest" else min(values)
        options, answer = [str(v) for v in values], values.index(best)
        instructions = r.choice(MOST[which])
        state = r.choice(MOST_STATE).format(w=r.choice(WORDS))
    options = [{"text": o} if r.random() < 0.25 else o for o in options]
    return {"type": qtype, "instructions": instructions, "options": options, "state": state,
            "answer": answer}


def key(q):
    """What makes two questions the same question."""
    opts = [o["text"] if isinstance(o, dict) else o for o in q["options"]]
    return (q["type"], q["instructions"], tuple(opts), q["state"])


def generate(seed, n, exclude=()):
    """n distinct questions from seed, none whose key is in exclude."""
    r, seen, out = random.Random(seed), set(exclude), []
    while len(out) < n:
        q = question(r)
        if key(q) not in seen:
            seen.add(key(q))
            out.append(q)
    return out


# ------------------------------------------------------------------------------------------
# a byte-level BPE tokenizer fitted to the questions
# ------------------------------------------------------------------------------------------

def byte_to_unicode():
    """GPT-2's byte-to-character table."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, extra = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# GPT-2's split for ASCII text (\p{L} and \p{N} restricted to ASCII: the texts are ASCII)
SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
SPECIAL = re.compile(r"\[(?:PAD|UNK|CLS|SEP|MASK)\]")


def pieces(text):
    assert all(ord(c) < 128 for c in text), "the fitted tokenizer's texts are ASCII"
    table = byte_to_unicode()
    for span in SPECIAL.split(text):
        for p in SPLIT.findall(span):
            yield "".join(table[b] for b in p.encode("utf-8"))


def fit_merges(texts, count):
    words = {}
    for t in texts:
        for p in pieces(t):
            words[p] = words.get(p, 0) + 1
    seqs = {w: list(w) for w in words}
    merges = []
    while len(merges) < count:
        pairs = {}
        for w, f in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + f
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        merges.append(best)
        for w in seqs:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


def bpe_tokenizer(texts, base, vocab_size):
    """A tokenizer.json (a dict) like base with merges fitted to texts, at most vocab_size tokens."""
    specials = [a["content"] for a in sorted(base["added_tokens"], key=lambda a: a["id"])]
    vocab = {s: i for i, s in enumerate(specials)}
    table = byte_to_unicode()
    for b in range(256):
        vocab[table[b]] = len(vocab)
    merges = []
    for a, b in fit_merges(texts, vocab_size - len(vocab)):
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append("%s %s" % (a, b))
    tok = dict(base)
    tok["model"] = dict(base["model"], vocab=vocab, merges=merges)
    return tok
