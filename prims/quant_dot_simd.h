/* quant_dot_simd.h - the SIMD row products of quant_dot.c, one copy per
 * path: quant_dot.c includes this file once for each, with
 *   RL_DOT_TARGET  the path's target attribute (kernel.h's RL_TARGET_*),
 *   RL_DOT_FN(f)   f's name on that path (f_avx2, f_vnni),
 *   RL_DOT_VNNI    1 where the path has AVX-512 VNNI on 256-bit vectors.
 * The paths differ only in the two integer primitives rl_dot_us8 (four
 * u8 * s8 products into an int32 lane: maddubs + madd, or dpbusd) and
 * rl_dot_madd (int16 pair products added into int32 lanes: madd + add, or
 * dpwssd).  Both give the same int32 lanes wherever maddubs cannot
 * saturate, which never happens for these types (doc/products.md §5, the
 * SIMD paths' integer sums); the float arithmetic is the same code, so
 * every path answers the same bits.
 * No include guard: included once per path.
 */

/* A binary16 widened by F16C: the same value as rl_h2f (NaN payloads
 * apart, which only a corrupt scale has). */
__attribute__((target(RL_DOT_TARGET))) static inline float RL_DOT_FN(rl_dot_h2f)(uint16_t h) {
    return _cvtsh_ss(h);
}

__attribute__((target(RL_DOT_TARGET))) static inline float RL_DOT_FN(rl_dot_hsum8)(__m256 a) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* The 32 nibbles of qs in value order, each in [0, 15]. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256i
RL_DOT_FN(rl_dot_nibbles)(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)qs);
    return _mm256_and_si256(_mm256_set1_epi8(15), _mm256_set_m128i(_mm_srli_epi16(t, 4), t));
}

/* Byte j = 0xff where bit j of the little-endian u32 at qh is set. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256i
RL_DOT_FN(rl_dot_bits)(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* VAL in the bytes of V that have every bit of BIT set, else 0. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256i
RL_DOT_FN(rl_dot_where)(__m256i v, __m256i bit, __m256i val) {
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), val);
}

/* The eight lane sums of unsigned levels u times signed quants q, as f32.
 * Exact: a pair is at most 2 * 127 * 127 in magnitude (IQ4_NL's moved
 * signs; 2 * 31 * 128 for Q5_1), within int16. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256 RL_DOT_FN(rl_dot_us8)(__m256i u,
                                                                                  __m256i q) {
#if RL_DOT_VNNI
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, q));
#else
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(u, q)));
#endif
}

/* Signed levels v: |v| times q with v's sign. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256 RL_DOT_FN(rl_dot_s8)(__m256i v,
                                                                                 __m256i q) {
    return RL_DOT_FN(rl_dot_us8)(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
}

/* SUMI plus the int32 pair sums of the int16 products A * B. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256i
RL_DOT_FN(rl_dot_madd)(__m256i sumi, __m256i a, __m256i b) {
#if RL_DOT_VNNI
    return _mm256_dpwssd_epi32(sumi, a, b);
#else
    return _mm256_add_epi32(sumi, _mm256_madd_epi16(a, b));
#endif
}

#ifndef RL_LOADQ
#define RL_LOADQ(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#endif

/* The legacy product of doc/products.md §4; inlined into each type's
 * function with its shape a constant. */
__attribute__((target(RL_DOT_TARGET), always_inline)) static inline float
RL_DOT_FN(rl_dot_legacy)(rl_legacy_shape sh, const void *w, const void *x, size_t nb) {
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *wb;
        float db;
        const int8_t *xq =
            rl_dot_legacy_block(sh, w, x, b, &wb, &db, &summs, RL_DOT_FN(rl_dot_h2f));
        const __m256 d = _mm256_set1_ps(db);
        __m256i v = RL_DOT_FN(rl_dot_nibbles)(wb + sh.qs_at);
        if (sh.qh_at >= 0) /* Q5_0: the nibble with 0xf0 where the bit is clear (level - 16) */
            v = _mm256_or_si256(v, sh.off
                                       ? _mm256_andnot_si256(RL_DOT_FN(rl_dot_bits)(wb + sh.qh_at),
                                                             _mm256_set1_epi8((char)0xf0))
                                       : _mm256_and_si256(RL_DOT_FN(rl_dot_bits)(wb + sh.qh_at),
                                                          _mm256_set1_epi8(0x10)));
        else if (sh.off)
            v = _mm256_sub_epi8(v, _mm256_set1_epi8((char)sh.off));
        const __m256i q = RL_LOADQ(xq);
        acc = _mm256_fmadd_ps(d, sh.off ? RL_DOT_FN(rl_dot_s8)(v, q) : RL_DOT_FN(rl_dot_us8)(v, q),
                              acc);
    }
    return sh.m_at >= 0 ? RL_DOT_FN(rl_dot_hsum8)(acc) + summs : RL_DOT_FN(rl_dot_hsum8)(acc);
}

/* IQ4_NL's levels of one block: a table lookup of the nibbles. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256i
RL_DOT_FN(rl_dot_iq4)(const uint8_t *qs, __m128i levels) {
    const __m128i t = _mm_loadu_si128((const __m128i *)(const void *)qs), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_shuffle_epi8(levels, _mm_and_si128(_mm_srli_epi16(t, 4), m)),
                            _mm_shuffle_epi8(levels, _mm_and_si128(t, m)));
}

__attribute__((target(RL_DOT_TARGET))) float
RL_DOT_FN(rl_vec_dot_iq4_nl)(const void *w, const void *x, size_t nb) {
    const rl_block_iq4_nl *wb = w;
    const rl_block_q8_0 *xb = x;
    const __m128i levels = _mm_loadu_si128((const __m128i *)(const void *)rl_iq4_levels);
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const __m256 q1 =
            RL_DOT_FN(rl_dot_s8)(RL_DOT_FN(rl_dot_iq4)(wb[b].qs, levels), RL_LOADQ(xb[b].qs));
        const __m256 q2 = RL_DOT_FN(rl_dot_s8)(RL_DOT_FN(rl_dot_iq4)(wb[b + 1].qs, levels),
                                               RL_LOADQ(xb[b + 1].qs));
        const float d1 = RL_DOT_FN(rl_dot_h2f)(xb[b].d) * RL_DOT_FN(rl_dot_h2f)(wb[b].d);
        const float d2 = RL_DOT_FN(rl_dot_h2f)(xb[b + 1].d) * RL_DOT_FN(rl_dot_h2f)(wb[b + 1].d);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d1), q1, acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(d2), q2, acc2);
    }
    const float sumf = RL_DOT_FN(rl_dot_hsum8)(_mm256_add_ps(acc1, acc2));
    return b < nb ? rl_dot_iq4_tail(sumf, wb + b, xb + b) : sumf;
}

__attribute__((target(RL_DOT_TARGET), always_inline)) static inline float
RL_DOT_FN(rl_dot_k45)(const void *w, const void *x, size_t nb, int q5) {
    const rl_block_q8_K *xb = x;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    float summs = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        float d, dmin;
        uint32_t u[4];
        const uint8_t *qs, *qh;
        rl_dot_k45_block(w, xb, b, q5, &d, &dmin, u, &qs, &qh, RL_DOT_FN(rl_dot_h2f));
        /* int16 scales 0..7 in the low half, mins 0..7 in the high */
        const __m256i ms =
            _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
        const __m256i scl = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        /* mins times the sums of the 32-value runs, as pairs */
        const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)xb[b].bsums);
        const __m128i bs1 = _mm_loadu_si128((const __m128i *)(const void *)(xb[b].bsums + 8));
        const __m128i prod =
            _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), _mm_hadd_epi16(bs0, bs1));
        if (q5) {
            const __m128i p2 = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
            const int32_t mins = _mm_cvtsi128_si32(_mm_add_epi32(p2, _mm_srli_epi64(p2, 32)));
            summs = fmaf(dmin, (float)mins, summs);
        } else {
            accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), accm);
        }
        const __m256i hb =
            q5 ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
        __m256i sumi = _mm256_setzero_si256(), sumh = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int c = 0; c < 4; c++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(bits, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (q5) { /* 16 where bit 2c (2c + 1) of the qh byte is set */
                const __m256i b0 = _mm256_set1_epi8((char)(1 << 2 * c));
                const __m256i b1 = _mm256_set1_epi8((char)(2 << 2 * c));
                const __m256i sixteen = _mm256_set1_epi8(16);
                lo = _mm256_or_si256(lo, RL_DOT_FN(rl_dot_where)(hb, b0, sixteen));
                hi = _mm256_or_si256(hi, RL_DOT_FN(rl_dot_where)(hb, b1, sixteen));
            }
            const __m256i pl = _mm256_maddubs_epi16(lo, RL_LOADQ(xb[b].qs + 64 * c));
            const __m256i ph = _mm256_maddubs_epi16(hi, RL_LOADQ(xb[b].qs + 64 * c + 32));
            /* scale 2c (2c + 1) in every int16 lane: its two bytes picked */
            const short i0 = (short)(0x0100 * (4 * c + 1) + 4 * c), i1 = (short)(i0 + 0x0202);
            const __m256i s0 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i0));
            const __m256i s1 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i1));
            sumi = RL_DOT_FN(rl_dot_madd)(sumi, s0, pl);
            sumh = RL_DOT_FN(rl_dot_madd)(sumh, s1, ph);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(sumi, sumh)),
                              acc);
    }
    if (q5)
        return RL_DOT_FN(rl_dot_hsum8)(acc) + summs;
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return RL_DOT_FN(rl_dot_hsum8)(acc) + _mm_cvtss_f32(accm);
}

/* rl_dot_k45 for two activation rows X0 and X1 against one weight
 * row: each row's arithmetic exactly as there (so each result has its
 * bits), the weight's levels and scales unpacked once for both. */
__attribute__((target(RL_DOT_TARGET), always_inline)) static inline void
RL_DOT_FN(rl_dot2_k45)(const void *w, const void *x0, const void *x1, size_t nb, int q5,
                       float s[2]) {
    const rl_block_q8_K *xs[2] = {x0, x1};
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 accm[2] = {_mm_setzero_ps(), _mm_setzero_ps()};
    float summs[2] = {0.0f, 0.0f};
    for (size_t b = 0; b < nb; b++) {
        float d[2], dmin[2];
        uint32_t u[4];
        const uint8_t *qs, *qh;
        rl_dot_k45_block(w, xs[1], b, q5, &d[1], &dmin[1], u, &qs, &qh, RL_DOT_FN(rl_dot_h2f));
        rl_dot_k45_block(w, xs[0], b, q5, &d[0], &dmin[0], u, &qs, &qh, RL_DOT_FN(rl_dot_h2f));
        const __m256i ms =
            _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
        const __m256i scl = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        for (int k = 0; k < 2; k++) {
            const __m128i bs0 = _mm_loadu_si128((const __m128i *)(const void *)xs[k][b].bsums);
            const __m128i bs1 =
                _mm_loadu_si128((const __m128i *)(const void *)(xs[k][b].bsums + 8));
            const __m128i prod =
                _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), _mm_hadd_epi16(bs0, bs1));
            if (q5) {
                const __m128i p2 = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
                const int32_t mins = _mm_cvtsi128_si32(_mm_add_epi32(p2, _mm_srli_epi64(p2, 32)));
                summs[k] = fmaf(dmin[k], (float)mins, summs[k]);
            } else {
                accm[k] = _mm_fmadd_ps(_mm_set1_ps(dmin[k]), _mm_cvtepi32_ps(prod), accm[k]);
            }
        }
        const __m256i hb =
            q5 ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()},
                sumh[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int c = 0; c < 4; c++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(bits, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (q5) {
                const __m256i b0 = _mm256_set1_epi8((char)(1 << 2 * c));
                const __m256i b1 = _mm256_set1_epi8((char)(2 << 2 * c));
                const __m256i sixteen = _mm256_set1_epi8(16);
                lo = _mm256_or_si256(lo, RL_DOT_FN(rl_dot_where)(hb, b0, sixteen));
                hi = _mm256_or_si256(hi, RL_DOT_FN(rl_dot_where)(hb, b1, sixteen));
            }
            const short i0 = (short)(0x0100 * (4 * c + 1) + 4 * c), i1 = (short)(i0 + 0x0202);
            const __m256i s0 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i0));
            const __m256i s1 = _mm256_shuffle_epi8(scl, _mm256_set1_epi16(i1));
            for (int k = 0; k < 2; k++) {
                const __m256i pl = _mm256_maddubs_epi16(lo, RL_LOADQ(xs[k][b].qs + 64 * c));
                const __m256i ph = _mm256_maddubs_epi16(hi, RL_LOADQ(xs[k][b].qs + 64 * c + 32));
                sumi[k] = RL_DOT_FN(rl_dot_madd)(sumi[k], s0, pl);
                sumh[k] = RL_DOT_FN(rl_dot_madd)(sumh[k], s1, ph);
            }
        }
        for (int k = 0; k < 2; k++)
            acc[k] =
                _mm256_fmadd_ps(_mm256_set1_ps(d[k]),
                                _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[k], sumh[k])), acc[k]);
    }
    for (int k = 0; k < 2; k++) {
        if (q5) {
            s[k] = RL_DOT_FN(rl_dot_hsum8)(acc[k]) + summs[k];
            continue;
        }
        __m128 m = _mm_add_ps(accm[k], _mm_movehl_ps(accm[k], accm[k]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[k] = RL_DOT_FN(rl_dot_hsum8)(acc[k]) + _mm_cvtss_f32(m);
    }
}

/* Run g's pair products P (int16 pairs) into sumi: lanes 0..3 times the
 * scale of sub-block 2g, lanes 4..7 times that of 2g + 1, SC8 the 16
 * scales as signed bytes. */
__attribute__((target(RL_DOT_TARGET))) static inline __m256i
RL_DOT_FN(rl_dot_run2)(__m256i sumi, __m256i p, __m128i sc8, int g) {
    const long long lo = 0x0101010101010101LL * (2 * g), hi = 0x0101010101010101LL * (2 * g + 1);
    const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_set_epi64x(hi, lo)));
    return RL_DOT_FN(rl_dot_madd)(sumi, s, p);
}

/* The 6-bit levels of half H of the Q6_K block W (128 values) as four
 * registers of 32: the low nibbles of ql with bit pair r of qh moved to
 * bits 4..5, as ggml lays them out. */
__attribute__((target(RL_DOT_TARGET), always_inline)) static inline void
RL_DOT_FN(rl_q6_levels)(const rl_block_q6_K *w, int h, __m256i m15, __m256i m3, __m256i v[4]) {
    const uint8_t *ql = w->ql + 64 * h;
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
    const __m256i b2 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
    const __m256i bh = RL_LOADQ(w->qh + 32 * h);
#define RL_Q6_HI(r) _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2 * (r)), m3), 4)
    v[0] = _mm256_or_si256(_mm256_and_si256(b1, m15), RL_Q6_HI(0));
    v[1] = _mm256_or_si256(_mm256_and_si256(b2, m15), RL_Q6_HI(1));
    v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), RL_Q6_HI(2));
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15), RL_Q6_HI(3));
#undef RL_Q6_HI
}

__attribute__((target(RL_DOT_TARGET))) float RL_DOT_FN(rl_vec_dot_q6_K)(const void *w,
                                                                        const void *x, size_t nb) {
    const rl_block_q6_K *wb = w;
    const rl_block_q8_K *xb = x;
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const float d = xb[b].d * RL_DOT_FN(rl_dot_h2f)(wb[b].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)wb[b].scales);
        const __m256i off = _mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)xb[b].bsums),
                              _mm256_cvtepi8_epi16(sc8)),
            5);
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* even and odd runs */
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            __m256i v[4];
            RL_DOT_FN(rl_q6_levels)(&wb[b], h, m15, m3, v);
#pragma GCC unroll 8
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r; /* the 32-value run: sub-blocks 2g, 2g + 1 */
                sumi[g & 1] = RL_DOT_FN(rl_dot_run2)(
                    sumi[g & 1], _mm256_maddubs_epi16(v[r], RL_LOADQ(xb[b].qs + 32 * g)), sc8, g);
            }
        }
        const __m256i s = _mm256_sub_epi32(_mm256_add_epi32(sumi[0], sumi[1]), off);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), acc);
    }
    return RL_DOT_FN(rl_dot_hsum8)(acc);
}

/* rl_vec_dot_q6_K for two activation rows (X, and XSTRIDE bytes on):
 * each row's arithmetic exactly as there, the weight's levels built once
 * for both. */
__attribute__((target(RL_DOT_TARGET))) static void
RL_DOT_FN(rl_vec_dot2_q6_K)(const void *w, const void *x, size_t xstride, size_t nb, float s[2]) {
    const rl_block_q6_K *wb = w;
    const rl_block_q8_K *xs[2] = {x, (const void *)((const uint8_t *)x + xstride)};
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        const float dw = RL_DOT_FN(rl_dot_h2f)(wb[b].d);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)wb[b].scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        __m256i sumi[2][2] = {{_mm256_setzero_si256(), _mm256_setzero_si256()},
                              {_mm256_setzero_si256(), _mm256_setzero_si256()}};
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            __m256i v[4];
            RL_DOT_FN(rl_q6_levels)(&wb[b], h, m15, m3, v);
#pragma GCC unroll 8
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r;
                for (int k = 0; k < 2; k++)
                    sumi[k][g & 1] = RL_DOT_FN(rl_dot_run2)(
                        sumi[k][g & 1], _mm256_maddubs_epi16(v[r], RL_LOADQ(xs[k][b].qs + 32 * g)),
                        sc8, g);
            }
        }
        for (int k = 0; k < 2; k++) {
            const __m256i off = _mm256_slli_epi32(
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)xs[k][b].bsums),
                                  sc16),
                5);
            const float d = xs[k][b].d * dw;
            acc[k] = _mm256_fmadd_ps(
                _mm256_set1_ps(d),
                _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_add_epi32(sumi[k][0], sumi[k][1]), off)),
                acc[k]);
        }
    }
    s[0] = RL_DOT_FN(rl_dot_hsum8)(acc[0]);
    s[1] = RL_DOT_FN(rl_dot_hsum8)(acc[1]);
}

__attribute__((target(RL_DOT_TARGET))) float
RL_DOT_FN(rl_vec_dot_iq4_xs)(const void *w, const void *x, size_t nb) {
    const rl_block_iq4_xs *wb = w;
    const rl_block_q8_K *xb = x;
    const __m128i levels = _mm_loadu_si128((const __m128i *)(const void *)rl_iq4_levels);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        int16_t ls[8];
        rl_dot_iq4xs_block(wb + b, ls, NULL);
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m256i v = RL_DOT_FN(rl_dot_iq4)(wb[b].qs + 16 * g, levels);
            const __m256i q = RL_LOADQ(xb[b].qs + 32 * g);
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
            sumi[g & 1] = RL_DOT_FN(rl_dot_madd)(sumi[g & 1], p, _mm256_set1_epi16(ls[g]));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(RL_DOT_FN(rl_dot_h2f)(wb[b].d) * xb[b].d),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[0], sumi[1])), acc);
    }
    return RL_DOT_FN(rl_dot_hsum8)(acc);
}

/* Q2_K and Q3_K: the two low bits of each level, run r of the 128 at BITS;
 * Q3_K less 4 where bit 4h + r of HM is clear. */
__attribute__((target(RL_DOT_TARGET), always_inline)) static inline float
RL_DOT_FN(rl_dot_k23)(const void *w, const void *x, size_t nb, int q3) {
    const rl_block_q8_K *xb = x;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const rl_block_q2_K *w2 = (const rl_block_q2_K *)w + b;
        const rl_block_q3_K *w3 = (const rl_block_q3_K *)w + b;
        const float d = xb[b].d * RL_DOT_FN(rl_dot_h2f)(q3 ? w3->d : w2->d);
        __m128i sc8;
        if (q3) {
            uint32_t o[4];
            rl_q3k_scale_words(w3->scales, o);
            sc8 = _mm_sub_epi8(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]),
                               _mm_set1_epi8(32));
        } else {
            const __m128i sm = _mm_loadu_si128((const __m128i *)(const void *)w2->scales);
            const __m128i m15 = _mm_set1_epi8(15);
            sc8 = _mm_and_si128(sm, m15);
            const float dmin = -xb[b].d * RL_DOT_FN(rl_dot_h2f)(w2->dmin);
            const __m256i prod =
                _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15)),
                                  _mm256_loadu_si256((const __m256i *)(const void *)xb[b].bsums));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
        }
        const uint8_t *qs = q3 ? w3->qs : w2->qs;
        const __m256i hm = q3 ? _mm256_loadu_si256((const __m256i *)(const void *)w3->hmask)
                              : _mm256_setzero_si256();
        __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h));
#pragma GCC unroll 8
            for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r;
                __m256i lv = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * r)), m3);
                const __m256i q = RL_LOADQ(xb[b].qs + 32 * g);
                __m256i p;
                if (q3) {
                    const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + r)));
                    const __m256i clear =
                        _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), _mm256_setzero_si256());
                    lv = _mm256_sub_epi8(lv, _mm256_and_si256(clear, _mm256_set1_epi8(4)));
                    p = _mm256_maddubs_epi16(_mm256_sign_epi8(lv, lv), _mm256_sign_epi8(q, lv));
                } else {
                    p = _mm256_maddubs_epi16(lv, q);
                }
                sumi[g & 1] = RL_DOT_FN(rl_dot_run2)(sumi[g & 1], p, sc8, g);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi[0], sumi[1])), acc);
    }
    return RL_DOT_FN(rl_dot_hsum8)(acc);
}

/* ---- the entries --------------------------------------------------- */

#define RL_DOT_ENTRY(q, call)                                                                      \
    __attribute__((target(RL_DOT_TARGET))) float RL_DOT_FN(rl_vec_dot_##q)(                        \
        const void *w, const void *x, size_t nb) {                                                 \
        return call;                                                                               \
    }
RL_DOT_ENTRY(q4_0, RL_DOT_FN(rl_dot_legacy)(RL_SHAPE_Q4_0, w, x, nb))
RL_DOT_ENTRY(q4_1, RL_DOT_FN(rl_dot_legacy)(RL_SHAPE_Q4_1, w, x, nb))
RL_DOT_ENTRY(q5_0, RL_DOT_FN(rl_dot_legacy)(RL_SHAPE_Q5_0, w, x, nb))
RL_DOT_ENTRY(q5_1, RL_DOT_FN(rl_dot_legacy)(RL_SHAPE_Q5_1, w, x, nb))
RL_DOT_ENTRY(q2_K, RL_DOT_FN(rl_dot_k23)(w, x, nb, 0))
RL_DOT_ENTRY(q3_K, RL_DOT_FN(rl_dot_k23)(w, x, nb, 1))
RL_DOT_ENTRY(q4_K, RL_DOT_FN(rl_dot_k45)(w, x, nb, 0))
RL_DOT_ENTRY(q5_K, RL_DOT_FN(rl_dot_k45)(w, x, nb, 1))
#undef RL_DOT_ENTRY

#define RL_DOT2_ENTRY(q, Q5)                                                                       \
    __attribute__((target(RL_DOT_TARGET))) static void RL_DOT_FN(rl_vec_dot2_##q)(                 \
        const void *w, const void *x, size_t xstride, size_t nb, float s[2]) {                     \
        RL_DOT_FN(rl_dot2_k45)(w, x, (const uint8_t *)x + xstride, nb, Q5, s);                     \
    }
RL_DOT2_ENTRY(q4_K, 0)
RL_DOT2_ENTRY(q5_K, 1)
#undef RL_DOT2_ENTRY

#undef RL_DOT_TARGET
#undef RL_DOT_FN
#undef RL_DOT_VNNI
