/* tokenizer_decode.c - token ids back to text (rl_tok_decode, the contract
 * in prims/tokenizer.h and doc/tokenizer.md): each id's piece through the
 * byte-to-unicode table back to bytes, special tokens as their text, and
 * bytes that do not form UTF-8 replaced as Hugging Face's decoder does. */
#include "prims/tokenizer_internal.h"

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

rl_tok_status rl_tok_decode_bytes(const rl_tok *t, const int32_t *ids, size_t n, uint8_t **bytes,
                                  size_t *len, char *msg, size_t msgsz) {
    uint8_t *raw = NULL;
    size_t rl = 0, rc = 0;
    *bytes = NULL;
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
    if (!raw && !(raw = malloc(1)))
        goto nomem;
    *bytes = raw;
    *len = rl;
    return RL_TOK_OK;
nomem:
    free(raw);
    return fail(RL_TOK_NOMEM, msg, msgsz, "out of memory decoding token ids");
}

rl_tok_status rl_tok_decode(const rl_tok *t, const int32_t *ids, size_t n, char **text,
                            size_t *len, char *msg, size_t msgsz) {
    uint8_t *raw = NULL, *outb = NULL;
    size_t rl = 0, ol = 0, oc = 0;
    *text = NULL;
    *len = 0;
    rl_tok_status st = rl_tok_decode_bytes(t, ids, n, &raw, &rl, msg, msgsz);
    if (st != RL_TOK_OK)
        return st;
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
