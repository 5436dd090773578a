/* numtext.c - numbers as text (see numtext.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "prims/numtext.h"

size_t rl_int_text(int64_t n, char *out) {
    char digits[24];
    size_t k = 0, len = 0;
    uint64_t u = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (n < 0)
        out[len++] = '-';
    while (k)
        out[len++] = digits[--k];
    return len;
}

/* True when the decimal D (P digits, no sign) times 10^(E-P+1) lies
 * strictly within half an ulp of X (positive, normal) on either side, the
 * ulp being the gap above X: the interval the Lisp printer searches.  It
 * reads back as X, except below a power of two, where the printer's
 * interval is wider than the gap down to the float below (so "7.922816e28"
 * for 2^96) and digits on a midpoint are never taken. */
static int reads_back(const char *d, int p, int e, float x) {
    char buf[RL_NUMTEXT_MAX];
    int ex;
    frexpf(x, &ex);
    double half = ldexp(1.0, ex - 25); /* x in [2^(ex-1), 2^ex): ulp 2^(ex-24) */
    int k = e - p + 1;
    double v;
    if (k >= -22 && k <= 22) {
        /* D and 10^|K| are exact doubles, so one multiplication or division
         * rounds the candidate once, as strtod would */
        static const double tens[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                        1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                        1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        double dv = 0;
        for (int i = 0; i < p; i++)
            dv = dv * 10 + (d[i] - '0');
        v = k >= 0 ? dv * tens[k] : dv / tens[-k];
    } else {
        snprintf(buf, sizeof buf, "%.*se%d", p, d, k);
        v = strtod(buf, NULL);
    }
    return fabs(v - (double)x) < half;
}

/* The digits of D plus one in its last of P places: answers 1 when it
 * carried into a new leading digit (D is then "1" and zeros, one longer
 * in value: the caller adds one to the exponent). */
static int increment(char *d, int p) {
    for (int i = p - 1; i >= 0; i--) {
        if (d[i] != '9') {
            d[i]++;
            return 0;
        }
        d[i] = '0';
    }
    d[0] = '1';
    return 1;
}

/* The candidate of P digits for the digits ALL (of exponent E) of |x| A:
 * into D and *DE, answering 1, or 0 when neither the truncated digits nor
 * one more in the last place reads back.  Of two that read back the nearer
 * is taken, the larger on a tie (as the Lisp printer does). */
static int candidate(const char *all, int n, int e, float a, int p, char *d, int *de) {
    char lo[16], hi[16];
    int lo_ok, hi_ok, hi_e = e, cmp = 0;
    memcpy(lo, all, (size_t)p);
    lo[p] = 0;
    memcpy(hi, all, (size_t)p);
    hi[p] = 0;
    if (increment(hi, p))
        hi_e = e + 1;
    lo_ok = reads_back(lo, p, e, a);
    hi_ok = reads_back(hi, p, hi_e, a);
    if (!lo_ok && !hi_ok)
        return 0;
    if (lo_ok && hi_ok) {
        /* the rest of the digits against 5000... */
        cmp = all[p] > '5' ? 1 : all[p] < '5' ? -1 : 0;
        for (int i = p + 1; cmp == 0 && i < n; i++)
            if (all[i] != '0')
                cmp = 1;
    }
    if (hi_ok && (!lo_ok || cmp >= 0)) {
        memcpy(d, hi, (size_t)p + 1);
        *de = hi_e;
    } else {
        memcpy(d, lo, (size_t)p + 1);
        *de = e;
    }
    return 1;
}

/* The decimal digits of A (positive, normal) exactly, in 128-bit integer
 * arithmetic: at least 12 of them into ALL (then one "1" more when digits
 * that are not all zero follow), *N their count and *E the exponent of the
 * first.  Answers 0 for an A too small or too large for it (below about
 * 1e-19, from 2^128 on), which the caller reads from printf. */
static int exact_digits(float a, char *all, int *n, int *e) {
    int ex, q, j, k = 0, len = 0;
    char rev[48];
    unsigned __int128 m, N, R = 0;
    float f = frexpf(a, &ex);
    m = (unsigned __int128)(uint32_t)ldexpf(f, 24);
    q = ex - 24; /* a = m 2^q */
    if (q >= 0) {
        if (q > 103)
            return 0;
        N = m << q;
        j = 0;
    } else {
        int e10 = (int)floor(log10((double)a));
        j = 11 - e10;
        if (j < 0 || j > 30 || -q > 127)
            return 0;
        N = m;
        for (int i = 0; i < j; i++)
            N *= 10;
        R = N & ((((unsigned __int128)1) << -q) - 1);
        N >>= -q;
    }
    do {
        rev[k++] = (char)('0' + (int)(N % 10));
        N /= 10;
    } while (N);
    while (k)
        all[len++] = rev[--k];
    *e = len - 1 - j;
    while (len < 41)
        all[len++] = '0';
    if (R)
        all[len++] = '1';
    all[len] = 0;
    *n = len;
    return 1;
}

size_t rl_float_text(float x, char *out) {
    /* The digits of |x|: exactly, or else the first 41 from printf
     * ("d.ddd...e+E"; a float widens exactly to a double, and its digits to
     * the 9th are never rounded there). */
    char exact[64], all[64], digits[16];
    int e, n = 0, ndig = 9, de = 0;
    size_t len = 0;
    float a = fabsf(x);
    if (isnan(x) || isinf(x) || (a != 0.0f && a < 1.17549435e-38f))
        return 0;
    if (signbit(x))
        out[len++] = '-';
    if (a == 0.0f) {
        memcpy(out + len, "0.0", 3);
        return len + 3;
    }
    if (!exact_digits(a, all, &n, &e)) {
        snprintf(exact, sizeof exact, "%.40e", (double)a);
        n = 0;
        for (char *c = exact; *c != 'e'; c++)
            if (*c != '.')
                all[n++] = *c;
        all[n] = 0;
        e = atoi(strchr(exact, 'e') + 1);
    }
    /* The shortest P that has a candidate: a longer P always has one too,
     * and most floats take 8 or 9 digits, so look from 8 down. */
    if (!candidate(all, n, e, a, 8, digits, &de)) {
        candidate(all, n, e, a, 9, digits, &de); /* 9 digits always read back */
    } else {
        ndig = 8;
        while (ndig > 1 && candidate(all, n, e, a, ndig - 1, digits, &de))
            ndig--;
    }
    while (ndig > 1 && digits[ndig - 1] == '0')
        ndig--;
    if (de >= -3 && de < 7) {
        if (de >= 0) {
            for (int i = 0; i <= de; i++)
                out[len++] = i < ndig ? digits[i] : '0';
            out[len++] = '.';
            if (ndig > de + 1)
                for (int i = de + 1; i < ndig; i++)
                    out[len++] = digits[i];
            else
                out[len++] = '0';
        } else {
            out[len++] = '0';
            out[len++] = '.';
            for (int i = 0; i < -de - 1; i++)
                out[len++] = '0';
            for (int i = 0; i < ndig; i++)
                out[len++] = digits[i];
        }
    } else {
        out[len++] = digits[0];
        out[len++] = '.';
        if (ndig > 1)
            for (int i = 1; i < ndig; i++)
                out[len++] = digits[i];
        else
            out[len++] = '0';
        out[len++] = 'e';
        len += rl_int_text(de, out + len);
    }
    return len;
}
