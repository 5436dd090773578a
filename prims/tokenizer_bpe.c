/* tokenizer_bpe.c - byte-level BPE of one piece: the merge-rank hash
 * lookup, the byte-to-unicode mapped vocab lookup, BPE by a heap of merge
 * ranks, and the shared cache of pieces in front of it (tok_encode_piece).
 * Shared declarations: prims/tokenizer_internal.h. */
#include "prims/tokenizer_internal.h"

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
rl_tok_status tok_encode_piece(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
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
