/* regex.c - regular expression search for the options that take a pattern
 * (`quantize --tensor-type PATTERN=TYPE'), with libc's POSIX extended
 * regular expressions.  llama.cpp matches the same options with
 * std::regex_search (ECMAScript); the two agree on the patterns people
 * write for tensor names (literals, ".", "|", groups, classes, "*", "+",
 * "?", anchors), and the ECMAScript escapes \d and \D, which POSIX lacks,
 * are rewritten as [0-9] and [^0-9] (outside bracket expressions). */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "prims/ecl/glue.h"

/* PATTERN (N bytes) with \d and \D rewritten, NUL-terminated, malloc'd. */
static char *posix_pattern(const uint8_t *p, size_t n) {
    char *out = malloc(5 * n + 1), *o = out;
    int bracket = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!bracket && p[i] == '\\' && i + 1 < n && (p[i + 1] == 'd' || p[i + 1] == 'D')) {
            const char *cls = p[i + 1] == 'd' ? "[0-9]" : "[^0-9]";
            memcpy(o, cls, strlen(cls));
            o += strlen(cls);
            i++;
            continue;
        }
        if (!bracket && p[i] == '\\' && i + 1 < n) {
            *o++ = (char)p[i++];
            *o++ = (char)p[i];
            continue;
        }
        if (!bracket && p[i] == '[') {
            bracket = 1;
            *o++ = '[';
            /* a leading ^ and ] belong to the expression */
            if (i + 1 < n && p[i + 1] == '^')
                *o++ = (char)p[++i];
            if (i + 1 < n && p[i + 1] == ']')
                *o++ = (char)p[++i];
            continue;
        }
        if (bracket && p[i] == ']')
            bracket = 0;
        *o++ = (char)p[i];
    }
    *o = 0;
    return out;
}

/* (%regex-search pattern-octets text-octets) -> T or NIL when PATTERN
 * occurs in TEXT, or (values :bad-pattern message) when PATTERN is not a
 * regular expression. */
static cl_object rl_prim_regex_search(cl_object pattern, cl_object text) {
    const cl_env_ptr env = ecl_process_env();
    cl_index pn = 0, tn = 0;
    const uint8_t *p = rl_octets("%REGEX-SEARCH", 1, pattern, &pn);
    const uint8_t *t = rl_octets("%REGEX-SEARCH", 2, text, &tn);
    char msg[256];
    regex_t re;
    int rc, found;
    if (memchr(p, 0, pn) || memchr(t, 0, tn))
        ecl_return2(env, rl_keyword("bad-pattern"),
                    ecl_make_simple_base_string("a NUL byte in the pattern or the text", -1));
    char *ps = posix_pattern(p, pn), *ts = malloc(tn + 1);
    if (!ps || !ts) {
        free(ps);
        free(ts);
        rl_signal(RL_C_ERROR, "%%REGEX-SEARCH: out of memory");
    }
    memcpy(ts, t, tn);
    ts[tn] = 0;
    rc = regcomp(&re, ps, REG_EXTENDED | REG_NOSUB);
    free(ps);
    if (rc != 0) {
        regerror(rc, &re, msg, sizeof msg);
        free(ts);
        ecl_return2(env, rl_keyword("bad-pattern"), ecl_make_simple_base_string(msg, -1));
    }
    found = regexec(&re, ts, 0, NULL, 0) == 0;
    regfree(&re);
    free(ts);
    ecl_return1(env, found ? ECL_T : ECL_NIL);
}

static const rl_prim_def rl_defs[] = {
    RL_PRIM("%REGEX-SEARCH", rl_prim_regex_search, 2),
};
RL_PRIM_TABLE(rl_regex_prims, "RONTOLISP", rl_defs);
