/* unicode.c - NFC (canonical decomposition, canonical ordering, canonical
 * composition, Hangul done by arithmetic) over the generated tables; the
 * character classes are inline in prims/unicode.h. */
#include "prims/unicode.h"

#include <stdlib.h>
#include <string.h>

#include "prims/utf8.h"

enum { SBASE = 0xac00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11a7,
       LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT,
       SCOUNT = LCOUNT * NCOUNT };

size_t rl_uni_nfc_quick(const uint8_t *s, size_t n) {
    size_t i = 0, safe = 0;
    unsigned last = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            last = 0;
            safe = ++i;
            continue;
        }
        size_t at = i;
        uint32_t c = rl_utf8_next(s, n, &i);
        unsigned w = rl_uni_word(c), cc = w & RL_UNI_CCC_MASK;
        if ((w & RL_UNI_NFC_MAYBE) || (cc != 0 && cc < last))
            return safe;
        if (cc == 0)
            safe = at;
        last = cc;
    }
    return n;
}

static const rl_uni_decomp *find_decomp(uint32_t c) {
    size_t lo = 0, hi = rl_uni_n_decomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rl_uni_decomps[mid].cp < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < rl_uni_n_decomp && rl_uni_decomps[lo].cp == c ? &rl_uni_decomps[lo] : NULL;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = rl_uni_n_comp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const rl_uni_comp *p = &rl_uni_comps[mid];
        if (p->first < a || (p->first == a && p->second < b))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < rl_uni_n_comp && rl_uni_comps[lo].first == a && rl_uni_comps[lo].second == b)
        return rl_uni_comps[lo].composite;
    return 0;
}

int rl_uni_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *outn) {
    /* A character decomposes into at most 4 (checked by the generator's
     * data: the longest full canonical decomposition is 4), and Hangul
     * into 3, so 4 code points per input byte is plenty. */
    size_t cap = 4 * n + 4, k = 0, i = 0;
    uint32_t *cp = malloc(cap * sizeof *cp);
    if (!cp)
        return -1;
    while (i < n) {
        uint32_t c = rl_utf8_next(s, n, &i);
        if (c >= SBASE && c < SBASE + SCOUNT) {
            uint32_t si = c - SBASE;
            cp[k++] = LBASE + si / NCOUNT;
            cp[k++] = VBASE + (si % NCOUNT) / TCOUNT;
            if (si % TCOUNT)
                cp[k++] = TBASE + si % TCOUNT;
            continue;
        }
        const rl_uni_decomp *d = c >= 0xc0 ? find_decomp(c) : NULL;
        if (!d) {
            cp[k++] = c;
            continue;
        }
        for (unsigned j = 0; j < d->len && k < cap; j++)
            cp[k++] = rl_uni_decomp_pool[d->off + j];
    }
    /* Canonical ordering: a stable insertion sort of each run of
     * non-starters by combining class. */
    for (size_t a = 1; a < k; a++) {
        unsigned ca = rl_uni_ccc(cp[a]);
        if (ca == 0)
            continue;
        size_t b = a;
        uint32_t c = cp[a];
        while (b > 0) {
            unsigned cb = rl_uni_ccc(cp[b - 1]);
            if (cb == 0 || cb <= ca)
                break;
            cp[b] = cp[b - 1];
            b--;
        }
        cp[b] = c;
    }
    /* Canonical composition. */
    if (k > 0) {
        size_t starter = 0, w = 1;
        unsigned last = rl_uni_ccc(cp[0]) ? 256 : 0;
        for (size_t r = 1; r < k; r++) {
            uint32_t c = cp[r];
            unsigned cc = rl_uni_ccc(c);
            uint32_t comp = (last < cc || last == 0) ? compose(cp[starter], c) : 0;
            if (comp && rl_uni_ccc(cp[starter]) == 0) {
                cp[starter] = comp;
                continue;
            }
            if (cc == 0)
                starter = w;
            last = cc;
            cp[w++] = c;
        }
        k = w;
    }
    size_t bytes = 0;
    for (size_t a = 0; a < k; a++)
        bytes += rl_utf8_length(cp[a]);
    uint8_t *o = malloc(bytes + 1);
    if (!o) {
        free(cp);
        return -1;
    }
    size_t at = 0;
    for (size_t a = 0; a < k; a++)
        at += rl_utf8_encode(cp[a], o + at);
    o[at] = 0;
    free(cp);
    *out = o;
    *outn = at;
    return 0;
}
