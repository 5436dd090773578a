/* tokenizer.c - byte-level BPE (prims/tokenizer.h; the contract is
 * doc/tokenizer.md): control tokens matched in the raw text, NFC,
 * user-defined tokens matched in the normalized text,
 * the GPT-2 split written out by hand (no regular expression engine), the
 * byte-to-unicode table, BPE by a heap of merge ranks, a shared cache of
 * pieces, and decoding. */
#define _GNU_SOURCE /* qsort_r */
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
    uint8_t *type;     /* per id: RL_TOK_TYPE_* (0 when out of range) */
    uint8_t *strip;    /* per id: bit 0 lstrip, bit 1 rstrip */
    int32_t *vslot;    /* vocab hash: ids, -1 empty */
    size_t vmask;
    merge_slot *mslot;
    size_t mmask;
    int32_t byte_id[256];   /* id of byte b's one-character token, -1 none */
    uint8_t bu[256][2];     /* byte b as its byte-to-unicode character's UTF-8 */
    uint8_t bulen[256];
    int16_t ubyte[0x144];   /* byte-to-unicode character -> byte, -1 none */
    /* Added tokens, control ones (class 0, matched in the raw text) then
     * user-defined ones (class 1, matched in the normalized spans between),
     * each class by first byte, longest first:
     * sp_ids[sp_first[c][b] .. sp_first[c][b + 1]). */
    int32_t *sp_ids;
    uint32_t sp_first[2][257];
    int32_t unk_id, bos_id, eos_id;
    int add_bos, add_eos, nfc, ignore_merges;
    cache_slot *cache;
};

const char *rl_tok_status_name(rl_tok_status st) {
    switch (st) {
    case RL_TOK_OK: return "ok";
    case RL_TOK_BAD_UTF8: return "bad-utf-8";
    case RL_TOK_BAD_SPEC: return "bad-spec";
    case RL_TOK_UNKNOWN: return "unknown-symbol";
    case RL_TOK_BAD_ID: return "bad-id";
    case RL_TOK_NOMEM: return "out-of-memory";
    }
    return "unknown-status";
}

static rl_tok_status fail(rl_tok_status st, char *msg, size_t msgsz, const char *fmt, ...) {
    if (msgsz > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msgsz, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Offset of the first byte of s[0..n) that is not part of valid UTF-8, or n. */
static size_t utf8_invalid_at(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t at = i;
        if (rl_utf8_escaped_byte_p(rl_utf8_next(s, n, &i)))
            return at;
    }
    return n;
}

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* The id of the token whose text is s[0..n), or -1. */
static int32_t vocab_find(const rl_tok *t, const void *sv, size_t n) {
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

/* The merge of the pair (a, b): its rank (and *id the merged token), or -1. */
static inline int32_t merge_find(const rl_tok *t, int32_t a, int32_t b, int32_t *id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; /* +1: 0 marks empty */
    size_t h = merge_hash(key, t->mmask);
    for (;;) {
        const merge_slot *m = &t->mslot[h];
        if (m->key == key) {
            *id = m->id;
            return m->rank;
        }
        if (m->key == 0)
            return -1;
        h = (h + 1) & t->mmask;
    }
}

static void byte_table(rl_tok *t) {
    int k = 0;
    for (int i = 0; i < 0x144; i++)
        t->ubyte[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t c;
        if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
            c = (uint32_t)b;
        else
            c = 256 + (uint32_t)k++;
        t->bulen[b] = (uint8_t)rl_utf8_encode(c, t->bu[b]);
        t->ubyte[c] = (int16_t)b;
    }
}

void rl_tok_free(rl_tok *t) {
    if (!t)
        return;
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->type);
    free(t->strip);
    free(t->vslot);
    free(t->mslot);
    free(t->sp_ids);
    free(t->cache);
    free(t);
}

size_t rl_tok_vocab_size(const rl_tok *t) { return t->n; }

const char *rl_tok_piece(const rl_tok *t, int32_t id, size_t *len) {
    if (id < 0 || (size_t)id >= t->n)
        return NULL;
    if (len)
        *len = t->len[id];
    return t->pool + t->off[id];
}

static int special_p(const rl_tok *t, int32_t id) {
    return (t->type[id] == RL_TOK_TYPE_CONTROL || t->type[id] == RL_TOK_TYPE_USER_DEFINED) &&
           t->len[id] > 0;
}

/* 0 for a control token, 1 for a user-defined one. */
static int special_class(const rl_tok *t, int32_t id) {
    return t->type[id] == RL_TOK_TYPE_USER_DEFINED;
}

static int cmp_special(const void *a, const void *b, void *arg) {
    const rl_tok *sort_tok = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int cx = special_class(sort_tok, x), cy = special_class(sort_tok, y);
    if (cx != cy)
        return cx - cy;
    uint8_t fx = (uint8_t)sort_tok->pool[sort_tok->off[x]],
            fy = (uint8_t)sort_tok->pool[sort_tok->off[y]];
    if (fx != fy)
        return fx < fy ? -1 : 1;
    if (sort_tok->len[x] != sort_tok->len[y])
        return sort_tok->len[x] > sort_tok->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static rl_tok_status check_id(int32_t id, size_t n, const char *what, char *msg, size_t msgsz) {
    if (id < -1 || (id >= 0 && (size_t)id >= n))
        return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                    "expected the %s to be -1 or a token id below %zu, found %ld", what, n,
                    (long)id);
    return RL_TOK_OK;
}

rl_tok_status rl_tok_new(const rl_tok_spec *spec, rl_tok **out, char *msg, size_t msgsz) {
    rl_tok_status st;
    *out = NULL;
    if (msgsz > 0)
        msg[0] = 0;
    if (spec->n_tokens == 0 || spec->n_tokens > INT32_MAX)
        return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                    "expected between 1 and %ld tokens, found %zu", (long)INT32_MAX,
                    spec->n_tokens);
    if ((st = check_id(spec->unk_id, spec->n_tokens, "unknown token id", msg, msgsz)) ||
        (st = check_id(spec->bos_id, spec->n_tokens, "bos token id", msg, msgsz)) ||
        (st = check_id(spec->eos_id, spec->n_tokens, "eos token id", msg, msgsz)))
        return st;
    rl_tok *t = calloc(1, sizeof *t);
    if (!t)
        return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory building the tokenizer");
    size_t n = spec->n_tokens, total = 0;
    t->n = n;
    t->unk_id = spec->unk_id;
    t->bos_id = spec->bos_id;
    t->eos_id = spec->eos_id;
    t->add_bos = spec->add_bos && spec->bos_id >= 0;
    t->add_eos = spec->add_eos && spec->eos_id >= 0;
    t->nfc = spec->nfc;
    t->ignore_merges = spec->ignore_merges;
    for (size_t i = 0; i < n; i++)
        total += spec->token_lens[i] + 1;
    t->pool = malloc(total);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->type = malloc(n);
    t->strip = calloc(n, 1);
    t->vmask = pow2_at_least(2 * n) - 1;
    t->vslot = malloc((t->vmask + 1) * sizeof *t->vslot);
    t->mmask = pow2_at_least(2 * spec->n_merges + 2) - 1;
    t->mslot = calloc(t->mmask + 1, sizeof *t->mslot);
    t->cache = calloc(CACHE_SLOTS, sizeof *t->cache);
    if (!t->pool || !t->off || !t->len || !t->type || !t->strip || !t->vslot || !t->mslot ||
        !t->cache) {
        free(t->cache);
        t->cache = NULL;
        rl_tok_free(t);
        return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory building the tokenizer");
    }
    memset(t->vslot, 0xff, (t->vmask + 1) * sizeof *t->vslot);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *s = (const uint8_t *)spec->tokens[i];
        size_t len = spec->token_lens[i], bad = utf8_invalid_at(s, len);
        int32_t ty = spec->token_types ? spec->token_types[i] : RL_TOK_TYPE_NORMAL;
        if (bad < len) {
            rl_tok_free(t);
            return fail(RL_TOK_BAD_UTF8, msg, msgsz,
                        "expected UTF-8 text for token %zu, found byte 0x%02x at offset %zu",
                        i, s[bad], bad);
        }
        memcpy(t->pool + at, s, len);
        t->pool[at + len] = 0;
        t->off[i] = at;
        t->len[i] = len;
        t->type[i] = (uint8_t)(ty >= 0 && ty < 256 ? ty : 0);
        at += len + 1;
        if (vocab_find(t, s, len) >= 0) {
            int32_t first = vocab_find(t, s, len);
            rl_tok_free(t);
            return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                        "expected distinct tokens, found token %zu equal to token %ld (\"%.*s\")",
                        i, (long)first, (int)(len > 60 ? 60 : len), (const char *)s);
        }
        size_t h = hash_bytes(s, len) & t->vmask;
        while (t->vslot[h] >= 0)
            h = (h + 1) & t->vmask;
        t->vslot[h] = (int32_t)i;
    }
    byte_table(t);
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = vocab_find(t, t->bu[b], t->bulen[b]);
    for (size_t m = 0; m < spec->n_merges; m++) {
        const uint8_t *s = (const uint8_t *)spec->merges[m];
        size_t len = spec->merge_lens[m], bad = utf8_invalid_at(s, len);
        int32_t a = -1, b = -1;
        if (bad < len) {
            rl_tok_free(t);
            return fail(RL_TOK_BAD_UTF8, msg, msgsz,
                        "expected UTF-8 text for merge %zu, found byte 0x%02x at offset %zu", m,
                        s[bad], bad);
        }
        int spaces = 0;
        for (size_t k = 0; k < len && (a < 0 || b < 0); k++)
            if (s[k] == ' ') {
                spaces++;
                a = vocab_find(t, s, k);
                b = vocab_find(t, s + k + 1, len - k - 1);
            }
        if (a < 0 || b < 0) {
            rl_tok_free(t);
            if (!spaces)
                return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                            "expected merge %zu to be two tokens separated by a space, found "
                            "\"%.*s\"", m, (int)(len > 60 ? 60 : len), (const char *)s);
            return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                        "expected merge %zu to name two tokens of the vocabulary, found \"%.*s\"",
                        m, (int)(len > 60 ? 60 : len), (const char *)s);
        }
        uint8_t stackbuf[256];
        size_t la = t->len[a], lb = t->len[b];
        uint8_t *cat = la + lb <= sizeof stackbuf ? stackbuf : malloc(la + lb);
        int32_t id = -1;
        if (cat) {
            memcpy(cat, t->pool + t->off[a], la);
            memcpy(cat + la, t->pool + t->off[b], lb);
            id = vocab_find(t, cat, la + lb);
            if (cat != stackbuf)
                free(cat);
        }
        if (id < 0) {
            rl_tok_free(t);
            return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                        "expected the result of merge %zu (\"%.*s\") to be a token, found none",
                        m, (int)(len > 60 ? 60 : len), (const char *)s);
        }
        uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
        size_t h = merge_hash(key, t->mmask);
        while (t->mslot[h].key != 0 && t->mslot[h].key != key)
            h = (h + 1) & t->mmask;
        /* A repeated pair takes its last rank, as Hugging Face's map does. */
        t->mslot[h].key = key;
        t->mslot[h].rank = (int32_t)m;
        t->mslot[h].id = id;
    }
    for (size_t k = 0; k < spec->n_lstrip + spec->n_rstrip; k++) {
        int lst = k < spec->n_lstrip;
        int32_t id = lst ? spec->lstrip_ids[k] : spec->rstrip_ids[k - spec->n_lstrip];
        if (id < 0 || (size_t)id >= n) {
            rl_tok_free(t);
            return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                        "expected the %s ids to be token ids below %zu, found %ld",
                        lst ? "lstrip" : "rstrip", n, (long)id);
        }
        t->strip[id] |= lst ? 1 : 2;
    }
    size_t nsp = 0;
    for (size_t i = 0; i < n; i++)
        nsp += special_p(t, (int32_t)i);
    t->sp_ids = malloc((nsp + 1) * sizeof *t->sp_ids);
    if (!t->sp_ids) {
        rl_tok_free(t);
        return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory building the tokenizer");
    }
    nsp = 0;
    for (size_t i = 0; i < n; i++)
        if (special_p(t, (int32_t)i))
            t->sp_ids[nsp++] = (int32_t)i;
    qsort_r(t->sp_ids, nsp, sizeof *t->sp_ids, cmp_special, t);
    {
        size_t k = 0;
        for (int c = 0; c < 2; c++) {
            for (int b = 0; b < 256; b++) {
                while (k < nsp && special_class(t, t->sp_ids[k]) == c &&
                       (uint8_t)t->pool[t->off[t->sp_ids[k]]] < b)
                    k++;
                t->sp_first[c][b] = (uint32_t)k;
            }
            while (k < nsp && special_class(t, t->sp_ids[k]) == c)
                k++;
            t->sp_first[c][256] = (uint32_t)k;
        }
    }
    *out = t;
    return RL_TOK_OK;
}

/* ---- encoding ---- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} idvec;

static int push(idvec *o, int32_t id) {
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

typedef struct {
    char *msg;
    size_t msgsz;
    size_t base; /* byte offset of the span in the caller's text (for messages) */
} ctx;

/* The id of the token that is bytes s[0..n) through the byte-to-unicode
 * table, -1 none, -2 out of memory. */
static int32_t vocab_find_mapped(const rl_tok *t, const uint8_t *s, size_t n) {
    uint8_t buf[256], *m = 2 * n <= sizeof buf ? buf : malloc(2 * n + 1);
    size_t k = 0;
    if (!m)
        return -2;
    m[0] = 0; /* (n >= 1; this quiets gcc's uninitialized-read guess) */
    for (size_t i = 0; i < n; i++) {
        m[k] = t->bu[s[i]][0];
        m[k + 1] = t->bu[s[i]][1];
        k += t->bulen[s[i]];
    }
    int32_t id = vocab_find(t, m, k);
    if (m != buf)
        free(m);
    return id;
}

typedef struct {
    int32_t rank, pos;
} heap_ent;

static inline int heap_less(heap_ent a, heap_ent b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(e, h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], e = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap_less(h[c + 1], h[c]))
            c++;
        if (!heap_less(h[c], e))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = e;
    return top;
}

/* BPE of one piece s[0..n) (raw bytes, n >= 1) into o. */
static rl_tok_status bpe_piece(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                               const ctx *cx, size_t piece_at) {
    enum { STACK = 128 };
    int32_t sym_s[STACK], next_s[STACK], prev_s[STACK];
    heap_ent heap_s[3 * STACK];
    int32_t *sym = sym_s, *next = next_s, *prev = prev_s;
    heap_ent *heap = heap_s;
    rl_tok_status st = RL_TOK_OK;

    if (t->ignore_merges) {
        int32_t id = vocab_find_mapped(t, s, n);
        if (id == -2)
            return fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
        if (id >= 0)
            return push(o, id) ? fail(RL_TOK_NOMEM, cx->msg, cx->msgsz,
                                      "out of memory encoding a text")
                               : RL_TOK_OK;
    }
    if (n > STACK) {
        sym = malloc(n * sizeof *sym);
        next = malloc(n * sizeof *next);
        prev = malloc(n * sizeof *prev);
        heap = malloc(3 * n * sizeof *heap);
        if (!sym || !next || !prev || !heap) {
            st = fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[s[i]];
        if (id < 0) {
            if (t->unk_id < 0) {
                st = fail(RL_TOK_UNKNOWN, cx->msg, cx->msgsz,
                          "expected the symbol \"%.*s\" (byte 0x%02x at offset %zu) to be a "
                          "token, found no such token and no unknown token",
                          (int)t->bulen[s[i]], (const char *)t->bu[s[i]], s[i],
                          cx->base + piece_at + i);
                goto done;
            }
            id = t->unk_id;
        }
        sym[i] = id;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t id, r = merge_find(t, sym[i], sym[i + 1], &id);
        if (r >= 0)
            heap_push(heap, &hn, (heap_ent){r, (int32_t)i});
    }
    while (hn > 0) {
        heap_ent e = heap_pop(heap, &hn);
        int32_t p = e.pos, q = next[p], id = -1;
        if (sym[p] < 0 || q < 0 || merge_find(t, sym[p], sym[q], &id) != e.rank)
            continue; /* stale: a neighbour has merged since */
        sym[p] = id;
        sym[q] = -1;
        next[p] = next[q];
        if (next[q] >= 0)
            prev[next[q]] = p;
        int32_t r, nid;
        if (prev[p] >= 0 && (r = merge_find(t, sym[prev[p]], sym[p], &nid)) >= 0)
            heap_push(heap, &hn, (heap_ent){r, prev[p]});
        if (next[p] >= 0 && (r = merge_find(t, sym[p], sym[next[p]], &nid)) >= 0)
            heap_push(heap, &hn, (heap_ent){r, p});
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (push(o, sym[i])) {
            st = fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
            break;
        }
done:
    if (sym != sym_s) {
        free(sym);
        free(next);
        free(prev);
        free(heap);
    }
    return st;
}

/* A piece through the cache. */
static rl_tok_status encode_piece(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                                  const ctx *cx, size_t piece_at) {
    if (n == 1 && t->byte_id[s[0]] >= 0)
        return push(o, t->byte_id[s[0]])
                   ? fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text")
                   : RL_TOK_OK;
    if (n > CACHE_KEY)
        return bpe_piece(t, s, n, o, cx, piece_at);
    uint64_t key[KEY_WORDS] = {0}, h = n;
    memcpy(key, s, n);
    for (int k = 0; k < KEY_WORDS; k++)
        h = (h ^ key[k]) * 0x9e3779b97f4a7c15ull;
    cache_slot *c = &t->cache[(h >> 40) & (CACHE_SLOTS - 1)];
    uint64_t s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
    if (!(s1 & 1)) {
        /* Acquire loads: the second load of seq cannot come before them,
         * and a word written by a writer shows that writer's odd seq. */
        uint64_t meta = atomic_load_explicit(&c->meta, memory_order_acquire), w[ID_WORDS];
        int same = (meta & 0xff) == n;
        for (int k = 0; k < KEY_WORDS; k++)
            same &= atomic_load_explicit(&c->key[k], memory_order_acquire) == key[k];
        for (int k = 0; k < ID_WORDS; k++)
            w[k] = atomic_load_explicit(&c->ids[k], memory_order_acquire);
        if (same && atomic_load_explicit(&c->seq, memory_order_relaxed) == s1) {
            int32_t ids[CACHE_IDS];
            size_t k = (size_t)(meta >> 8);
            memcpy(ids, w, sizeof ids);
            for (size_t i = 0; i < k; i++)
                if (push(o, ids[i]))
                    return fail(RL_TOK_NOMEM, cx->msg, cx->msgsz,
                                "out of memory encoding a text");
            return RL_TOK_OK;
        }
    }
    size_t before = o->n;
    rl_tok_status st = bpe_piece(t, s, n, o, cx, piece_at);
    if (st != RL_TOK_OK || o->n - before > CACHE_IDS)
        return st;
    uint64_t cur = atomic_load_explicit(&c->seq, memory_order_relaxed);
    if ((cur & 1) || !atomic_compare_exchange_strong_explicit(&c->seq, &cur, cur + 1,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed))
        return RL_TOK_OK; /* another thread is writing the slot */
    int32_t ids[CACHE_IDS] = {0};
    uint64_t w[ID_WORDS];
    memcpy(ids, o->v + before, (o->n - before) * sizeof *ids);
    memcpy(w, ids, sizeof w);
    /* Release stores: none is visible before the odd seq. */
    atomic_store_explicit(&c->meta, n | (uint64_t)(o->n - before) << 8, memory_order_release);
    for (int k = 0; k < KEY_WORDS; k++)
        atomic_store_explicit(&c->key[k], key[k], memory_order_release);
    for (int k = 0; k < ID_WORDS; k++)
        atomic_store_explicit(&c->ids[k], w[k], memory_order_release);
    atomic_store_explicit(&c->seq, cur + 2, memory_order_release);
    return RL_TOK_OK;
}

enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

static uint8_t ascii_class[128];
static pthread_once_t ascii_once = PTHREAD_ONCE_INIT;
static void ascii_init(void) {
    for (uint32_t c = 0; c < 128; c++)
        ascii_class[c] = rl_uni_letter_p(c)   ? C_LETTER
                         : rl_uni_number_p(c) ? C_NUMBER
                         : rl_uni_space_p(c)  ? C_SPACE
                                              : C_OTHER;
}

/* The class of the character at s[i]; *nx the offset after it. */
static inline int char_class(const uint8_t *s, size_t n, size_t i, size_t *nx) {
    if (s[i] < 0x80) {
        *nx = i + 1;
        return ascii_class[s[i]];
    }
    size_t j = i;
    unsigned w = rl_uni_word(rl_utf8_next(s, n, &j));
    *nx = j;
    return (w & RL_UNI_LETTER)   ? C_LETTER
           : (w & RL_UNI_NUMBER) ? C_NUMBER
           : (w & RL_UNI_SPACE)  ? C_SPACE
                                 : C_OTHER;
}

/* The end of the GPT-2 expression's match at s[i] (i < n):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * tried in that order at i, as a backtracking engine does. */
static size_t split_next(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t b = s[i + 1];
        if (b == 's' || b == 't' || b == 'm' || b == 'd')
            return i + 2;
        if (i + 2 < n && ((b == 'r' && s[i + 2] == 'e') || (b == 'v' && s[i + 2] == 'e') ||
                          (b == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    size_t nx, j;
    int c = char_class(s, n, i, &nx);
    if (s[i] == ' ' && nx < n) {
        size_t nx2;
        int c2 = char_class(s, n, nx, &nx2);
        if (c2 != C_SPACE) {
            c = c2;
            nx = nx2;
        }
    }
    if (c != C_SPACE) {
        j = nx;
        while (j < n) {
            size_t k;
            if (char_class(s, n, j, &k) != c)
                break;
            j = k;
        }
        return j;
    }
    /* \s+(?!\S) takes the run of white space but its last character when
     * something follows it; \s+ takes a run of one. */
    size_t last = i;
    j = nx;
    while (j < n) {
        size_t k;
        if (char_class(s, n, j, &k) != C_SPACE)
            break;
        last = j;
        j = k;
    }
    if (j == n || last == i)
        return j;
    return last;
}

size_t rl_tok_split_next(const char *text, size_t len, size_t at) {
    pthread_once(&ascii_once, ascii_init);
    return split_next((const uint8_t *)text, len, at);
}

/* The added token of class C at s[i] (the longest), or -1; *e its end. */
static int32_t special_at(const rl_tok *t, int c, const uint8_t *s, size_t n, size_t i,
                          size_t *e) {
    for (uint32_t k = t->sp_first[c][s[i]]; k < t->sp_first[c][s[i] + 1]; k++) {
        int32_t id = t->sp_ids[k];
        size_t len = t->len[id];
        if (len <= n - i && memcmp(t->pool + t->off[id], s + i, len) == 0) {
            *e = i + len;
            return id;
        }
    }
    return -1;
}

/* Start of the white space run that ends at s[e] (not before lo). */
static size_t space_before(const uint8_t *s, size_t lo, size_t e) {
    while (e > lo) {
        size_t b = e - 1;
        while (b > lo && (s[b] & 0xc0) == 0x80)
            b--;
        size_t nx;
        if (char_class(s, e, b, &nx) != C_SPACE)
            break;
        e = b;
    }
    return e;
}

static size_t space_after(const uint8_t *s, size_t n, size_t i) {
    while (i < n) {
        size_t nx;
        if (char_class(s, n, i, &nx) != C_SPACE)
            break;
        i = nx;
    }
    return i;
}


/* Split + BPE of a span without added tokens. */
static rl_tok_status encode_plain(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                                  const ctx *cx) {
    rl_tok_status st = RL_TOK_OK;
    for (size_t i = 0; i < n && st == RL_TOK_OK;) {
        size_t e = split_next(s, n, i);
        st = encode_piece(t, s + i, e - i, o, cx, i);
        i = e;
    }
    return st;
}

static rl_tok_status encode_span(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                                 const ctx *cx, int parse);

/* The added tokens of class C in s[0..n) and, between them, INNER (class
 * 0: encode_span; class 1: encode_plain).  The matches are leftmost-longest
 * and never overlap.  lstrip takes the white space before a match (not past
 * the previous one), rstrip the white space after it; a strip never hides
 * the next match, even when the white space it takes reaches into it (that
 * token is still emitted, as Hugging Face's AddedVocabulary does). */
static rl_tok_status split_added(const rl_tok *t, int c, const uint8_t *s, size_t n, idvec *o,
                                 const ctx *cx0, int parse) {
    ctx cx = *cx0;
    rl_tok_status st = RL_TOK_OK;
    size_t from = 0, i = 0;
    while (i < n && st == RL_TOK_OK) {
        size_t e;
        int32_t id = t->sp_first[c][s[i]] < t->sp_first[c][s[i] + 1]
                         ? special_at(t, c, s, n, i, &e)
                         : -1;
        if (id < 0) {
            i++;
            continue;
        }
        size_t start = (t->strip[id] & 1) ? space_before(s, from, i) : i;
        size_t stop = (t->strip[id] & 2) ? space_after(s, n, e) : e;
        if (from < start) {
            cx.base = cx0->base + from;
            st = c == 0 ? encode_span(t, s + from, start - from, o, &cx, parse)
                        : encode_plain(t, s + from, start - from, o, &cx);
        }
        if (st == RL_TOK_OK && push(o, id))
            return fail(RL_TOK_NOMEM, cx.msg, cx.msgsz, "out of memory encoding a text");
        from = stop;
        i = e;
    }
    cx.base = cx0->base + from;
    if (st == RL_TOK_OK && from < n)
        st = c == 0 ? encode_span(t, s + from, n - from, o, &cx, parse)
                    : encode_plain(t, s + from, n - from, o, &cx);
    return st;
}

/* A span between control tokens: NFC, then the user-defined tokens (when
 * parsed), split, BPE. */
static rl_tok_status encode_span(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                                 const ctx *cx, int parse) {
    uint8_t *norm = NULL;
    if (n == 0)
        return RL_TOK_OK;
    if (t->nfc && rl_uni_nfc_quick(s, n) < n) {
        size_t nn;
        if (rl_uni_nfc(s, n, &norm, &nn))
            return fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
        s = norm;
        n = nn;
    }
    rl_tok_status st = parse && t->sp_first[1][256] > t->sp_first[1][0]
                           ? split_added(t, 1, s, n, o, cx, parse)
                           : encode_plain(t, s, n, o, cx);
    free(norm);
    return st;
}

rl_tok_status rl_tok_encode(const rl_tok *t, const char *text, size_t len, int add_special,
                            int parse_special, int32_t **ids, size_t *n, char *msg,
                            size_t msgsz) {
    const uint8_t *s = (const uint8_t *)text;
    idvec o = {0};
    rl_tok_status st = RL_TOK_OK;
    ctx cx = {msg, msgsz, 0};
    *ids = NULL;
    *n = 0;
    if (msgsz > 0)
        msg[0] = 0;
    pthread_once(&ascii_once, ascii_init);
    size_t bad = utf8_invalid_at(s, len);
    if (bad < len)
        return fail(RL_TOK_BAD_UTF8, msg, msgsz,
                    "expected UTF-8 text, found byte 0x%02x at offset %zu", s[bad], bad);
    if (add_special && t->add_bos && push(&o, t->bos_id))
        goto nomem;
    if (parse_special && t->sp_first[0][256] > 0)
        st = split_added(t, 0, s, len, &o, &cx, parse_special);
    else
        st = encode_span(t, s, len, &o, &cx, parse_special);
    if (st != RL_TOK_OK) {
        free(o.v);
        return st;
    }
    if (add_special && t->add_eos && push(&o, t->eos_id))
        goto nomem;
    if (!o.v && !(o.v = malloc(sizeof *o.v)))
        goto nomem;
    *ids = o.v;
    *n = o.n;
    return RL_TOK_OK;
nomem:
    free(o.v);
    return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory encoding a text");
}

/* ---- decoding ---- */

/* Append s[0..n) to (*buf, *len, *cap). */
static int append(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1)
            c *= 2;
        uint8_t *b = realloc(*buf, c);
        if (!b)
            return -1;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    return 0;
}

/* Length of the longest prefix of s[0..n) (n >= 1, s[0] not a valid start
 * of a complete sequence) that is a prefix of some valid sequence, at
 * least 1: the "maximal subpart" one U+FFFD replaces. */
static size_t bad_subpart(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf)
        need = 2;
    else if (b >= 0xe0 && b <= 0xef) {
        need = 3;
        if (b == 0xe0)
            lo = 0xa0;
        if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 4;
        if (b == 0xf0)
            lo = 0x90;
        if (b == 0xf4)
            hi = 0x8f;
    } else
        return 1;
    size_t k = 1;
    if (k < n && s[k] >= lo && s[k] <= hi) {
        k++;
        while (k < need && k < n && (s[k] & 0xc0) == 0x80)
            k++;
    }
    return k;
}

rl_tok_status rl_tok_decode(const rl_tok *t, const int32_t *ids, size_t n, char **text,
                            size_t *len, char *msg, size_t msgsz) {
    uint8_t *raw = NULL, *outb = NULL;
    size_t rl = 0, rc = 0, ol = 0, oc = 0;
    *text = NULL;
    *len = 0;
    if (msgsz > 0)
        msg[0] = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t id = ids[k];
        if (id < 0 || (size_t)id >= t->n) {
            free(raw);
            return fail(RL_TOK_BAD_ID, msg, msgsz,
                        "expected token ids below %zu, found %ld at position %zu", t->n,
                        (long)id, k);
        }
        const uint8_t *p = (const uint8_t *)t->pool + t->off[id];
        size_t pl = t->len[id], before = rl;
        int asis = special_p(t, id);
        for (size_t i = 0; i < pl && !asis;) {
            uint32_t c = rl_utf8_next(p, pl, &i);
            int b = c < 0x144 ? t->ubyte[c] : -1;
            uint8_t y = (uint8_t)b;
            if (b < 0) {
                asis = 1; /* a character outside the table: the token's text as it is */
                rl = before;
            } else if (append(&raw, &rl, &rc, &y, 1))
                goto nomem;
        }
        if (asis && append(&raw, &rl, &rc, p, pl))
            goto nomem;
    }
    /* The bytes as UTF-8, each maximal invalid subpart as U+FFFD. */
    for (size_t i = 0; i < rl;) {
        size_t j = i;
        uint32_t c = raw[i] < 0x80 ? raw[j++] : rl_utf8_next(raw, rl, &j);
        if (!rl_utf8_escaped_byte_p(c)) {
            if (append(&outb, &ol, &oc, raw + i, j - i))
                goto nomem;
            i = j;
        } else {
            static const uint8_t repl[3] = {0xef, 0xbf, 0xbd};
            if (append(&outb, &ol, &oc, repl, 3))
                goto nomem;
            i += bad_subpart(raw + i, rl - i);
        }
    }
    if (!outb && !(outb = malloc(1)))
        goto nomem;
    outb[ol] = 0;
    free(raw);
    *text = (char *)outb;
    *len = ol;
    return RL_TOK_OK;
nomem:
    free(raw);
    free(outb);
    return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory decoding token ids");
}
