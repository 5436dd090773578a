/* unicode_tables.h - the generated character data (prims/unicode_classes.c
 * and prims/unicode_nfc.c, written by tools/gen_unicode_tables.py); only
 * prims/unicode.c reads it. */
#ifndef RL_PRIMS_UNICODE_TABLES_H
#define RL_PRIMS_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

#define RL_UNI_BLOCK 128
#define RL_UNI_CCC_MASK 0xffu
#define RL_UNI_LETTER (1u << 8)
#define RL_UNI_NUMBER (1u << 9)
#define RL_UNI_SPACE (1u << 10)
#define RL_UNI_NFC_MAYBE (1u << 11) /* NFC_QC is No or Maybe */

typedef struct {
    uint32_t cp;
    uint16_t off, len; /* into rl_uni_decomp_pool */
} rl_uni_decomp;

typedef struct {
    uint32_t first, second, composite;
} rl_uni_comp;

extern const char rl_uni_version[];
extern const uint16_t rl_uni_index[0x110000 / RL_UNI_BLOCK];
extern const uint16_t rl_uni_data[];
extern const size_t rl_uni_n_decomp;
extern const rl_uni_decomp rl_uni_decomps[];
extern const uint32_t rl_uni_decomp_pool[];
extern const size_t rl_uni_n_comp;
extern const rl_uni_comp rl_uni_comps[];

#endif
