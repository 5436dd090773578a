/* utf8.h - the UTF-8 codec the Lisp strings of GGUF keys, tensor names and
 * JSON text go through.  Decoding never fails: each invalid sequence (a
 * stray byte, a bad continuation, an overlong form, a surrogate, a value
 * above U+10FFFF, a sequence cut by the end) reads as U+FFFD and consumes
 * one byte, as WHATWG's decoder does.  Encoding turns what is not a Unicode
 * scalar value into U+FFFD.  Plain C, no ECL, no allocation. */
#ifndef RL_PRIMS_UTF8_H
#define RL_PRIMS_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define RL_UTF8_REPLACEMENT 0xfffdu

/* The code point at s[*i] (*i < n), advancing *i past it. */
uint32_t rl_utf8_next(const uint8_t *s, size_t n, size_t *i);

/* Nonzero when every byte of s is below 0x80. */
int rl_utf8_ascii_p(const uint8_t *s, size_t n);

/* Bytes of c's encoding (1 to 4), after the U+FFFD substitution. */
size_t rl_utf8_length(uint32_t c);

/* Encode c into y (room for 4 bytes); answers the byte count. */
size_t rl_utf8_encode(uint32_t c, uint8_t *y);

#endif
