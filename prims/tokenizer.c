/* tokenizer.c - byte-level BPE (prims/tokenizer.h; the contract is
 * doc/tokenizer.md): building a tokenizer from its spec (vocab hash, merges,
 * the byte-to-unicode table, added tokens), control tokens matched in the
 * raw text, NFC, user-defined tokens matched in the normalized text, the
 * encode driver with each id's byte offsets when asked, and decoding.  The GPT-2 split is prims/tokenizer_split.c,
 * BPE and the cache of pieces prims/tokenizer_bpe.c, what they share
 * prims/tokenizer_internal.h. */
#define _GNU_SOURCE /* qsort_r */
#include "prims/tokenizer_internal.h"

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

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
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
    free(t->tr_kid);
    free(t->tr_lab);
    free(t->tr_id);
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

/* 0 for a control token, 1 for a user-defined one. */
static int special_class(const rl_tok *t, int32_t id) {
    return t->type[id] == RL_TOK_TYPE_USER_DEFINED;
}

/* The order of the added tokens in their tries: by class, then by their
 * bytes, a token before the longer ones it begins. */
static int cmp_special(const void *a, const void *b, void *arg) {
    const rl_tok *sort_tok = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int cx = special_class(sort_tok, x), cy = special_class(sort_tok, y);
    if (cx != cy)
        return cx - cy;
    size_t lx = sort_tok->len[x], ly = sort_tok->len[y];
    int c = memcmp(sort_tok->pool + sort_tok->off[x], sort_tok->pool + sort_tok->off[y],
                   lx < ly ? lx : ly);
    if (c != 0)
        return c;
    return lx < ly ? -1 : lx > ly;
}

/* The tries of the added tokens (struct rl_tok says how they are laid
 * out), built breadth first over the tokens in cmp_special's order: node k
 * stands for the first depth[k] bytes, which the tokens ids[lo[k] ..
 * hi[k]) share; its token is the first of them when it is that long, its
 * children the runs of the rest by their next byte.  Time and memory are
 * linear in the tokens' bytes (9 bytes a node, at most one node a byte). */
static rl_tok_status build_tries(rl_tok *t, char *msg, size_t msgsz) {
    size_t nsp = 0, cap = 2;
    for (size_t i = 0; i < t->n; i++)
        if (special_p(t, (int32_t)i)) {
            nsp++;
            cap += t->len[i];
        }
    if (cap >= UINT32_MAX)
        return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                    "expected the added tokens to hold fewer than %lu bytes, found %zu",
                    (unsigned long)UINT32_MAX - 2, cap - 2);
    rl_tok_status st = RL_TOK_OK;
    int32_t *ids = malloc((nsp + 1) * sizeof *ids);
    uint32_t *lo = malloc(cap * sizeof *lo), *hi = malloc(cap * sizeof *hi),
             *depth = malloc(cap * sizeof *depth);
    t->tr_kid = malloc((cap + 1) * sizeof *t->tr_kid);
    t->tr_lab = malloc(cap);
    t->tr_id = malloc(cap * sizeof *t->tr_id);
    if (!ids || !lo || !hi || !depth || !t->tr_kid || !t->tr_lab || !t->tr_id) {
        st = fail(RL_TOK_NOMEM, msg, msgsz, "out of memory building the tokenizer");
        goto done;
    }
    nsp = 0;
    for (size_t i = 0; i < t->n; i++)
        if (special_p(t, (int32_t)i))
            ids[nsp++] = (int32_t)i;
    qsort_r(ids, nsp, sizeof *ids, cmp_special, t);
    uint32_t split = 0;
    while (split < nsp && special_class(t, ids[split]) == 0)
        split++;
    t->sp_count[0] = split;
    t->sp_count[1] = (uint32_t)nsp - split;
    lo[0] = 0, hi[0] = split, lo[1] = split, hi[1] = (uint32_t)nsp;
    depth[0] = depth[1] = 0;
    t->tr_lab[0] = t->tr_lab[1] = 0;
    uint32_t next = 2;
    for (uint32_t k = 0; k < next; k++) {
        uint32_t a = lo[k], b = hi[k], d = depth[k];
        t->tr_id[k] = -1;
        if (a < b && t->len[ids[a]] == d)
            t->tr_id[k] = ids[a++];
        t->tr_kid[k] = next;
        while (a < b) {
            uint8_t c = (uint8_t)t->pool[t->off[ids[a]] + d];
            uint32_t e = a + 1;
            while (e < b && (uint8_t)t->pool[t->off[ids[e]] + d] == c)
                e++;
            t->tr_lab[next] = c;
            lo[next] = a, hi[next] = e, depth[next] = d + 1;
            next++;
            a = e;
        }
    }
    t->tr_kid[next] = next;
    t->tr_n = next;
    for (int c = 0; c < 2; c++)
        for (uint32_t k = t->tr_kid[c]; k < t->tr_kid[c + 1]; k++)
            t->sp_root[c][t->tr_lab[k]] = k;
    /* Give back what shared prefixes left unused. */
    uint32_t *kid = realloc(t->tr_kid, (next + 1) * sizeof *kid);
    uint8_t *lab = realloc(t->tr_lab, next);
    int32_t *tid = realloc(t->tr_id, next * sizeof *tid);
    t->tr_kid = kid ? kid : t->tr_kid;
    t->tr_lab = lab ? lab : t->tr_lab;
    t->tr_id = tid ? tid : t->tr_id;
done:
    free(ids);
    free(lo);
    free(hi);
    free(depth);
    return st;
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
        if (ty < RL_TOK_TYPE_NORMAL || ty > RL_TOK_TYPE_BYTE) {
            rl_tok_free(t);
            return fail(RL_TOK_BAD_SPEC, msg, msgsz,
                        "expected the type of token %zu to be from 1 to 6 (normal, unknown, "
                        "control, user-defined, unused, byte), found %ld", i, (long)ty);
        }
        memcpy(t->pool + at, s, len);
        t->pool[at + len] = 0;
        t->off[i] = at;
        t->len[i] = len;
        t->type[i] = (uint8_t)ty;
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
    if ((st = build_tries(t, msg, msgsz))) {
        rl_tok_free(t);
        return st;
    }
    *out = t;
    return RL_TOK_OK;
}

/* ---- encoding ---- */

/* The child of trie node K for byte B, or 0. */
static uint32_t trie_child(const rl_tok *t, uint32_t k, uint8_t b) {
    uint32_t lo = t->tr_kid[k], end = t->tr_kid[k + 1], hi = end;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->tr_lab[mid] < b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end && t->tr_lab[lo] == b ? lo : 0;
}

/* The added token of class C at s[i] (the longest), or -1; *e its end: a
 * walk down C's trie along s[i..n), as deep as the longest token there
 * can reach. */
static int32_t special_at(const rl_tok *t, int c, const uint8_t *s, size_t n, size_t i,
                          size_t *e) {
    int32_t id = -1;
    uint32_t k = t->sp_root[c][s[i]];
    for (size_t j = i + 1; k != 0; j++) {
        if (t->tr_id[k] >= 0) {
            id = t->tr_id[k];
            *e = j;
        }
        if (j == n)
            break;
        k = trie_child(t, k, s[j]);
    }
    return id;
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

/* ---- offsets: per id the bytes of the caller's text it stands for ---- */

/* Room for the offsets of o's ids (and one more). */
static int off_room(const ctx *cx, const idvec *o) {
    offvec *f = cx->off;
    if (2 * o->n + 2 <= f->cap)
        return 0;
    size_t cap = f->cap ? f->cap : 128;
    while (cap < 2 * o->n + 2)
        cap *= 2;
    size_t *v = realloc(f->v, cap * sizeof *v);
    if (!v)
        return -1;
    f->v = v;
    f->cap = cap;
    return 0;
}

/* Id K of o stands for span bytes [a, b). */
static int note_one(const ctx *cx, const idvec *o, size_t k, size_t a, size_t b) {
    if (!cx->off)
        return 0;
    if (off_room(cx, o))
        return -1;
    cx->off->v[2 * k] = cx->base + a;
    cx->off->v[2 * k + 1] = cx->base + b;
    return 0;
}

/* Ids K.. of o are the BPE of span bytes [a, b): one after the other,
 * each as many bytes as its text has characters (one byte each in the
 * byte-to-unicode form), the last one ending at b. */
static int note_piece(const rl_tok *t, const ctx *cx, const idvec *o, size_t k, size_t a,
                      size_t b) {
    if (!cx->off)
        return 0;
    for (; k < o->n; k++) {
        size_t chars = rl_utf8_chars((const uint8_t *)t->pool + t->off[o->v[k]], t->len[o->v[k]]);
        size_t e = k + 1 == o->n || a + chars > b ? b : a + chars;
        if (note_one(cx, o, k, a, e))
            return -1;
        a = e;
    }
    return 0;
}

/* The offsets of ids K.. of o, bytes of the NFC form of s[0..n) (after
 * cx->base), made offsets into s, as Hugging Face tokenizers aligns an NFC
 * form with its text.  The text is cut in stretches, each from a character
 * nothing composes with to the next one, whose NFC forms follow one
 * another.  In a stretch, each character of the text has as many slots as
 * its own NFC has characters; the NFC form's first character takes the
 * first slot and, when the NFC form is shorter than the slots (something
 * was composed), the slots it is short by; the others take the remaining
 * slots in order.  A character stands for the text's character of its
 * slot. */
static int nfc_offsets(const ctx *cx, const idvec *o, size_t k, const uint8_t *s, size_t n,
                       size_t nn) {
    size_t *from = malloc((2 * nn + 2) * sizeof *from), *starts = NULL, *owner = NULL;
    size_t at = 0, cap = 0;
    int bad = !from;
    for (size_t i = 0; i < n && !bad;) {
        size_t j = i, m = 0, slots = 0;
        /* the stretch's characters: starts[0..m], slots owner[0..slots) */
        for (int first = 1; j < n; first = 0) {
            size_t nx = j;
            uint32_t c = rl_utf8_next(s, n, &nx);
            unsigned w = rl_uni_word(c);
            if (!first && (w & RL_UNI_CCC_MASK) == 0 && !(w & RL_UNI_NFC_MAYBE))
                break;
            uint8_t *one = NULL;
            size_t ol = 0, chars;
            if (rl_uni_nfc(s + j, nx - j, &one, &ol)) {
                bad = 1;
                break;
            }
            chars = rl_utf8_chars(one, ol);
            free(one);
            if (slots + chars + 2 > cap || m + 2 > cap) {
                size_t c2 = 2 * (cap + chars + 8);
                size_t *s2 = realloc(starts, c2 * sizeof *s2), *o2;
                if (s2)
                    starts = s2;
                o2 = s2 ? realloc(owner, c2 * sizeof *o2) : NULL;
                if (!o2) {
                    bad = 1;
                    break;
                }
                owner = o2;
                cap = c2;
            }
            for (size_t q = 0; q < chars; q++)
                owner[slots++] = m;
            starts[m++] = j;
            j = nx;
        }
        if (bad)
            break;
        starts[m] = j;
        uint8_t *norm = NULL;
        size_t nl = 0, chars;
        if (rl_uni_nfc(s + i, j - i, &norm, &nl)) {
            bad = 1;
            break;
        }
        chars = rl_utf8_chars(norm, nl);
        size_t skip = slots > chars ? slots - chars : 0;
        for (size_t q = 0, ch = 0; q < nl && at < nn; ch++) {
            size_t q2 = q;
            rl_utf8_next(norm, nl, &q2);
            size_t slot = ch == 0 ? 0 : ch + skip;
            size_t c = slots == 0 ? 0 : owner[slot < slots ? slot : slots - 1];
            for (; q < q2 && at < nn; q++, at++) {
                from[2 * at] = starts[c];
                from[2 * at + 1] = starts[c + 1];
            }
        }
        free(norm);
        i = j;
    }
    if (!bad)
        for (; k < o->n; k++) {
            size_t a = cx->off->v[2 * k] - cx->base, b = cx->off->v[2 * k + 1] - cx->base;
            if (a >= nn || b <= a)
                continue;
            size_t a2 = from[2 * a], b2 = from[2 * (b - 1) + 1];
            cx->off->v[2 * k] = cx->base + a2;
            cx->off->v[2 * k + 1] = cx->base + (b2 > a2 ? b2 : a2);
        }
    free(from);
    free(starts);
    free(owner);
    return bad ? -1 : 0;
}

/* Split + BPE of a span without added tokens. */
static rl_tok_status encode_plain(const rl_tok *t, const uint8_t *s, size_t n, idvec *o,
                                  const ctx *cx) {
    rl_tok_status st = RL_TOK_OK;
    for (size_t i = 0; i < n && st == RL_TOK_OK;) {
        size_t e = tok_split_next(s, n, i), before = o->n;
        st = tok_encode_piece(t, s + i, e - i, o, cx, i);
        if (st == RL_TOK_OK && note_piece(t, cx, o, before, i, e))
            return fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
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
        int32_t id = special_at(t, c, s, n, i, &e);
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
        if (st == RL_TOK_OK && (push(o, id) || note_one(cx0, o, o->n - 1, start, stop)))
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
    const uint8_t *raw = s;
    size_t rawn = n, before = o->n;
    if (n == 0)
        return RL_TOK_OK;
    if (t->nfc && rl_uni_nfc_quick(s, n) < n) {
        size_t nn;
        if (rl_uni_nfc(s, n, &norm, &nn))
            return fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
        s = norm;
        n = nn;
    }
    rl_tok_status st = parse && t->sp_count[1] > 0
                           ? split_added(t, 1, s, n, o, cx, parse)
                           : encode_plain(t, s, n, o, cx);
    if (st == RL_TOK_OK && norm && cx->off && nfc_offsets(cx, o, before, raw, rawn, n))
        st = fail(RL_TOK_NOMEM, cx->msg, cx->msgsz, "out of memory encoding a text");
    free(norm);
    return st;
}

rl_tok_status rl_tok_encode_offsets(const rl_tok *t, const char *text, size_t len,
                                    int add_special, int parse_special, int32_t **ids,
                                    size_t **offsets, size_t *n, char *msg, size_t msgsz) {
    const uint8_t *s = (const uint8_t *)text;
    idvec o = {0};
    offvec off = {0};
    rl_tok_status st = RL_TOK_OK;
    ctx cx = {msg, msgsz, 0, offsets ? &off : NULL};
    *ids = NULL;
    if (offsets)
        *offsets = NULL;
    *n = 0;
    if (msgsz > 0)
        msg[0] = 0;
    pthread_once(&tok_ascii_once, tok_ascii_init);
    size_t bad = utf8_invalid_at(s, len);
    if (bad < len)
        return fail(RL_TOK_BAD_UTF8, msg, msgsz,
                    "expected UTF-8 text, found byte 0x%02x at offset %zu", s[bad], bad);
    if (add_special && t->add_bos && (push(&o, t->bos_id) || note_one(&cx, &o, 0, 0, 0)))
        goto nomem;
    if (parse_special && t->sp_count[0] > 0)
        st = split_added(t, 0, s, len, &o, &cx, parse_special);
    else
        st = encode_span(t, s, len, &o, &cx, parse_special);
    if (st != RL_TOK_OK) {
        free(o.v);
        free(off.v);
        return st;
    }
    if (add_special && t->add_eos && (push(&o, t->eos_id) || note_one(&cx, &o, o.n - 1, 0, 0)))
        goto nomem;
    if (!o.v && !(o.v = malloc(sizeof *o.v)))
        goto nomem;
    if (offsets) {
        if (off_room(&cx, &o))
            goto nomem;
        /* A token of some of a character's bytes stands for all of it. */
        for (size_t k = 0; k < 2 * o.n; k += 2) {
            size_t a = off.v[k], b = off.v[k + 1];
            while (a > 0 && a < len && (s[a] & 0xc0) == 0x80)
                a--;
            while (b > a && b < len && (s[b] & 0xc0) == 0x80)
                b++;
            off.v[k] = a;
            off.v[k + 1] = b;
        }
        *offsets = off.v;
    }
    *ids = o.v;
    *n = o.n;
    return RL_TOK_OK;
nomem:
    free(o.v);
    free(off.v);
    return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory encoding a text");
}

rl_tok_status rl_tok_encode(const rl_tok *t, const char *text, size_t len, int add_special,
                            int parse_special, int32_t **ids, size_t *n, char *msg,
                            size_t msgsz) {
    return rl_tok_encode_offsets(t, text, len, add_special, parse_special, ids, NULL, n, msg,
                                 msgsz);
}
