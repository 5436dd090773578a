/* utf8.h - the one UTF-8 codec of rontolisp: command-line arguments, GGUF
 * keys, strings and tensor names, JSON text and paths all go through it.
 *
 * Those are bytes that are usually UTF-8, and whatever is read must be
 * written back unchanged, so decoding never fails and never loses a byte:
 * each byte that is not part of a valid sequence (a stray continuation
 * byte, a bad continuation, an overlong form, an encoded surrogate, a value
 * above U+10FFFF, a sequence cut by the end, 0xC0, 0xC1, 0xF5..0xFF) reads
 * as the character U+DC00 + byte, U+DC80..U+DCFF, as Python's
 * surrogateescape does, and consumes that one byte.  Encoding turns those
 * characters back into their bytes, so decode then encode is the identity
 * on every byte string.  A valid sequence never decodes to U+DC80..U+DCFF
 * (surrogates are not UTF-8), so the two cannot be confused.  Encoding
 * writes any other surrogate or a value above U+10FFFF as U+FFFD.  Plain C,
 * no ECL, no allocation. */
#ifndef RL_PRIMS_UTF8_H
#define RL_PRIMS_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define RL_UTF8_REPLACEMENT 0xfffdu
/* The character an undecodable byte B becomes: RL_UTF8_ESCAPE_BASE + B. */
#define RL_UTF8_ESCAPE_BASE 0xdc00u

/* The code point at s[*i] (*i < n), advancing *i past it; an undecodable
 * byte answers RL_UTF8_ESCAPE_BASE + that byte and advances by one. */
uint32_t rl_utf8_next(const uint8_t *s, size_t n, size_t *i);

/* Nonzero when every byte of s is below 0x80. */
int rl_utf8_ascii_p(const uint8_t *s, size_t n);

/* Nonzero when c stands for an undecodable byte (U+DC80..U+DCFF). */
int rl_utf8_escaped_byte_p(uint32_t c);

/* Bytes of c's encoding: 1 for an escaped byte, else 1 to 4 (after the
 * U+FFFD substitution). */
size_t rl_utf8_length(uint32_t c);

/* The characters of the valid UTF-8 s[0..n): its bytes that are not
 * continuation bytes. */
size_t rl_utf8_chars(const uint8_t *s, size_t n);

/* Encode c into y (room for 4 bytes); answers the byte count. */
size_t rl_utf8_encode(uint32_t c, uint8_t *y);

#endif
