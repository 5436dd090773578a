/* tokenizer_internal.h - what the tokenizer's files share (not a public
 * interface; that is prims/tokenizer.h): the tokenizer's struct, the cache
 * slot, the merge slot, the encoder's id vector and message context, the
 * small helpers (fail, hashing, vocab lookup, push) and the character
 * classes of the GPT-2 split.  prims/tokenizer.c builds the tokenizer,
 * matches added tokens and drives encode/decode; prims/tokenizer_split.c
 * is the GPT-2 pre-tokenization; prims/tokenizer_bpe.c is the merge-rank
 * lookup, BPE and the cache of pieces. */
#ifndef RL_PRIMS_TOKENIZER_INTERNAL_H
#define RL_PRIMS_TOKENIZER_INTERNAL_H

#include "prims/tokenizer.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/unicode.h"
#include "prims/utf8.h"

/* ---- the cache of pieces ----
 * Direct-mapped: a piece (its bytes, up to CACHE_KEY) hashes to one slot,
 * which holds the piece and its ids (up to CACHE_IDS).  Each slot is a
 * sequence lock: a reader copies the slot and keeps the copy only when the
 * sequence number was even and unchanged around the copy; a writer takes
 * the slot by moving the number from even to odd (or gives up: it is only a
 * cache), writes, and makes it even again.  Every word is accessed
 * atomically (acquire loads, release stores: plain moves on x86-64), so
 * readers never wait and there is no data race.  A miss computes the ids and overwrites
 * the slot.  Pieces that do not fit are never cached. */
enum { CACHE_SLOTS = 1 << 16, CACHE_KEY = 32, CACHE_IDS = 8 };
enum { KEY_WORDS = CACHE_KEY / 8, ID_WORDS = CACHE_IDS / 2 };

typedef struct {
    _Atomic uint64_t seq;
    _Atomic uint64_t meta; /* key length | id count << 8 */
    _Atomic uint64_t key[KEY_WORDS];
    _Atomic uint64_t ids[ID_WORDS];
} cache_slot;

typedef struct {
    uint64_t key; /* (left << 32 | right) + 1; 0 marks an empty slot */
    int32_t rank, id;
} merge_slot;

struct rl_tok {
    size_t n;
    char *pool;        /* every token's text, each NUL-terminated */
    size_t *off, *len; /* per id, into pool */
    uint8_t *type;     /* per id: RL_TOK_TYPE_* */
    uint8_t *strip;    /* per id: bit 0 lstrip, bit 1 rstrip */
    int32_t *vslot;    /* vocab hash: ids, -1 empty */
    size_t vmask;
    merge_slot *mslot;
    size_t mmask;
    int32_t byte_id[256];   /* id of byte b's one-character token, -1 none */
    uint8_t bu[256][2];     /* byte b as its byte-to-unicode character's UTF-8 */
    uint8_t bulen[256];
    int16_t ubyte[0x144];   /* byte-to-unicode character -> byte, -1 none */
    /* Added tokens: control ones (class 0, matched in the raw text) and
     * user-defined ones (class 1, matched in the normalized spans between),
     * each class a trie over the tokens' bytes.  The nodes are numbered
     * breadth first, so the children of node k are the nodes tr_kid[k] ..
     * tr_kid[k + 1] (tr_kid has tr_n + 1 entries), in increasing order of
     * their byte, tr_lab; tr_id is the token that ends at a node, or -1.
     * Nodes 0 and 1 are the roots of classes 0 and 1 (no byte, no token);
     * sp_root[c][b] is the child of class c's root for byte b, or 0 (a root
     * is nobody's child). */
    uint32_t *tr_kid;
    uint8_t *tr_lab;
    int32_t *tr_id;
    uint32_t tr_n;
    uint32_t sp_root[2][256];
    uint32_t sp_count[2]; /* tokens per class */
    int32_t unk_id, bos_id, eos_id;
    int add_bos, add_eos, nfc, ignore_merges;
    cache_slot *cache;
};

static inline rl_tok_status fail(rl_tok_status st, char *msg, size_t msgsz, const char *fmt, ...) {
    if (msgsz > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msgsz, fmt, ap);
        va_end(ap);
    }
    return st;
}

static inline uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* An added token (control or user-defined) with text: what encoding
 * matches in the raw text and decoding writes as its text. */
static inline int special_p(const rl_tok *t, int32_t id) {
    return (t->type[id] == RL_TOK_TYPE_CONTROL || t->type[id] == RL_TOK_TYPE_USER_DEFINED) &&
           t->len[id] > 0;
}

/* The id of the token whose text is s[0..n), or -1. */
static inline int32_t vocab_find(const rl_tok *t, const void *sv, size_t n) {
    const uint8_t *s = sv;
    size_t h = hash_bytes(s, n) & t->vmask;
    for (;;) {
        int32_t id = t->vslot[h];
        if (id < 0)
            return -1;
        if (t->len[id] == n && memcmp(t->pool + t->off[id], s, n) == 0)
            return id;
        h = (h + 1) & t->vmask;
    }
}

static inline size_t merge_hash(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
}

/* ---- encoding ---- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} idvec;

static inline int push(idvec *o, int32_t id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 64;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v)
            return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return 0;
}

/* Per id, its start and end byte (two entries an id), when asked for. */
typedef struct {
    size_t *v;
    size_t cap;
} offvec;

typedef struct {
    char *msg;
    size_t msgsz;
    size_t base; /* byte offset of the span in the caller's text (messages, offsets) */
    offvec *off; /* NULL unless the caller wants offsets */
} ctx;

enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

/* tokenizer_split.c: the ASCII classes (filled once by tok_ascii_init). */
extern uint8_t tok_ascii_class[128];
extern pthread_once_t tok_ascii_once;
void tok_ascii_init(void);

/* The class of the character at s[i]; *nx the offset after it. */
static inline int char_class(const uint8_t *s, size_t n, size_t i, size_t *nx) {
    if (s[i] < 0x80) {
        *nx = i + 1;
        return tok_ascii_class[s[i]];
    }
    size_t j = i;
    unsigned w = rl_uni_word(rl_utf8_next(s, n, &j));
    *nx = j;
    return (w & RL_UNI_LETTER)   ? C_LETTER
           : (w & RL_UNI_NUMBER) ? C_NUMBER
           : (w & RL_UNI_SPACE)  ? C_SPACE
                                 : C_OTHER;
}

/* tokenizer_split.c: the end of the GPT-2 expression's match at s[i]. */
size_t tok_split_next(const uint8_t *s, size_t n, size_t i);

/* tokenizer_bpe.c: a piece's ids through the cache. */
rl_tok_status tok_encode_piece(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                               const ctx *cx, size_t piece_at);

#endif
