/* unicode.h - character classes and NFC for the tokenizer (doc/tokenizer.md):
 * letters (general category L*), numbers (N*), white space (the Unicode
 * property White_Space, which is what \s means to the regular expression
 * engines the reference tokenizers use), and canonical composition (NFC),
 * all from the generated tables of prims/unicode_classes.c and
 * prims/unicode_nfc.c (Unicode version rl_uni_version).  Code points go
 * through prims/utf8.h.  Plain C, no ECL. */
#ifndef RL_PRIMS_UNICODE_H
#define RL_PRIMS_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "prims/unicode_tables.h"

/* The table word of c (see prims/unicode_tables.h); 0 above U+10FFFF. */
static inline unsigned rl_uni_word(uint32_t c) {
    if (c >= 0x110000)
        return 0;
    return rl_uni_data[(size_t)rl_uni_index[c / RL_UNI_BLOCK] * RL_UNI_BLOCK + c % RL_UNI_BLOCK];
}

static inline int rl_uni_letter_p(uint32_t c) { return (rl_uni_word(c) & RL_UNI_LETTER) != 0; }
static inline int rl_uni_number_p(uint32_t c) { return (rl_uni_word(c) & RL_UNI_NUMBER) != 0; }
static inline int rl_uni_space_p(uint32_t c) { return (rl_uni_word(c) & RL_UNI_SPACE) != 0; }
/* Canonical combining class. */
static inline unsigned rl_uni_ccc(uint32_t c) { return rl_uni_word(c) & RL_UNI_CCC_MASK; }

/* Length of the longest prefix of s[0..n) (valid UTF-8) that is NFC for
 * sure by the quick check: every character NFC_QC=Yes and combining
 * classes in order.  n when all of s is. */
size_t rl_uni_nfc_quick(const uint8_t *s, size_t n);

/* The NFC of s[0..n) (valid UTF-8) into a malloc'd buffer *out of *outn
 * bytes (NUL-terminated).  Answers 0, or -1 when out of memory. */
int rl_uni_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *outn);

#endif
