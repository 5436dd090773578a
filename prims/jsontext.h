/* jsontext.h - JSON strings from C, escaped as the Lisp writer escapes
 * them (lisp/text/json.lisp, WRITE-ESCAPED with JSON true), for output
 * built in one buffer (tokenize --json).
 *
 * The input is bytes, decoded as prims/utf8.h decodes (each byte that is
 * not UTF-8 is the character U+DC80..U+DCFF).  Written as \uXXXX (lower
 * case hex): C0 controls but tab, newline and return (\t, \n, \r), DEL,
 * C1 controls, the bidirectional controls (U+061C, U+200E, U+200F,
 * U+202A-U+202E, U+2066-U+2069) and surrogates, so a byte that was not
 * UTF-8 is \udcHH; the double quote and backslash as \" and \\; every
 * other character as its bytes, unchanged.  Plain C, no ECL.
 */
#ifndef RL_PRIMS_JSONTEXT_H
#define RL_PRIMS_JSONTEXT_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes rl_json_escape writes for N bytes of input (a byte that
 * is not UTF-8 becomes the six of \udcHH). */
#define RL_JSON_ESCAPED_MAX(n) (6 * (size_t)(n))

/* Nonzero when the character C is written as \uXXXX (or \t, \n, \r). */
int rl_json_escaped_char_p(uint32_t c);

/* Write S[0..N) escaped, without the quotes, at OUT (room for
 * RL_JSON_ESCAPED_MAX(N) bytes); answers the count of bytes written. */
size_t rl_json_escape(const uint8_t *s, size_t n, char *out);

#endif
