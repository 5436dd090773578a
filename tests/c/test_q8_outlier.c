/* test_q8_outlier.c - the outlier-aware scale search (prims/q8_outlier.c)
 * against a brute force written here from doc/outliers.md alone: every candidate
 * listed, scored and ranked by (error, tie order), over random blocks with
 * planted outliers, plus the corners (zero block, f32- and f16-subnormal
 * scales, an all-outlier block, a scale beyond binary16) and the matrix
 * entry point's error contract. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/numfmt.h"
#include "prims/q8.h"
#include "prims/q8_outlier.h"
#include "tests/c/check.h"
#include "tests/c/testutil.h"

/* ---- the brute force ---------------------------------------------------- */

typedef struct {
    uint16_t d;        /* binary16 bits */
    int8_t q[32];
    double err;
    int rank0, rank1, rank2; /* tie order: smaller wins */
} cand;

static int round_half_away(float v) {
    double a = fabs((double)v);
    double r = floor(a + 0.5); /* exact in double for |v| < 2^29 */
    return (int)(v < 0 ? -r : r);
}

static double weighted_error(const float *x, const uint8_t *m, uint16_t dbits, const int8_t *q) {
    double d = rl_gguf_f16_to_f32(dbits), e = 0;
    for (int j = 0; j < 32; j++) {
        double t = (double)x[j] - d * q[j];
        e += (m[j] ? 1e4 : 1.0) * t * t;
    }
    return e;
}

static int better(const cand *a, const cand *b) {
    if (a->err != b->err)
        return a->err < b->err;
    if (a->rank0 != b->rank0)
        return a->rank0 < b->rank0;
    if (a->rank1 != b->rank1)
        return a->rank1 < b->rank1;
    return a->rank2 < b->rank2;
}

/* The block doc/outliers.md asks for, found by listing every candidate. */
static void brute_force(const float *x, const uint8_t *m, rl_block_q8_0 *out) {
    cand best, c;
    rl_block_q8_0 std;
    rl_q8_quantize_f32_ref(x, 32, &std, NULL);
    best.d = std.d;
    memcpy(best.q, std.qs, 32);
    best.err = weighted_error(x, m, std.d, std.qs);
    best.rank0 = 0, best.rank1 = 0, best.rank2 = 0;
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    for (int col = 0; col < 32; col++) {
        if (!m[col])
            continue;
        for (int k = 1; k <= 127; k++) {
            float dk32 = fabsf(x[col]) / (float)k;
            c.d = rl_gguf_f32_to_f16(dk32);
            float dk = rl_gguf_f16_to_f32(c.d);
            if (dk == 0 || isinf(dk) || (double)dk * 127 < (double)amax)
                continue;
            float inv = 1.0f / dk;
            for (int j = 0; j < 32; j++) {
                int v = round_half_away(x[j] * inv);
                c.q[j] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
            }
            c.err = weighted_error(x, m, c.d, c.q);
            c.rank0 = 1, c.rank1 = 127 - k, c.rank2 = col;
            if (better(&c, &best))
                best = c;
        }
    }
    out->d = best.d;
    memcpy(out->qs, best.q, 32);
}

/* ---- random blocks ------------------------------------------------------ */

static void random_block(float *x, uint8_t *m) {
    float scale = (float)ldexp(1.0, rnd_int(-12, 6));
    for (int j = 0; j < 32; j++) {
        x[j] = rnd_gauss() * scale;
        m[j] = 0;
    }
    int n = rnd_int(0, 4);
    for (int i = 0; i < n; i++) {
        int j = rnd_int(0, 31);
        m[j] = 1;
        /* most planted outliers are massive (about 20x); some calibration
         * outliers carry an ordinary weight in this row */
        if (rnd_int(0, 3))
            x[j] *= (float)(3 + 40 * rnd_unit());
    }
    if (rnd_int(0, 9) == 0) /* a duplicated magnitude: the earlier column wins */
        for (int j = 0; j < 32; j++)
            if (m[j]) {
                for (int i = j + 1; i < 32; i++)
                    if (m[i])
                        x[i] = -x[j];
                break;
            }
}

static void test_random_blocks(void) {
    int changed = 0;
    const int N = 20000;
    for (int t = 0; t < N; t++) {
        float x[32];
        uint8_t m[32];
        random_block(x, m);
        rl_block_q8_0 got, want, std;
        int ovf = rl_q8_outlier_block_ref(x, m, &got);
        brute_force(x, m, &want);
        rl_q8_quantize_f32_ref(x, 32, &std, NULL);
        CHECK_EACH(!ovf && memcmp(&got, &want, sizeof got) == 0,
                   "random block %d: d %04x (overflow %d), brute force d %04x", t, got.d, ovf,
                   want.d);
        CHECK_EACH(weighted_error(x, m, got.d, got.qs) <= weighted_error(x, m, std.d, std.qs),
                   "random block %d: d %04x has a larger weighted error than the standard %04x",
                   t, got.d, std.d);
        int any = 0;
        for (int j = 0; j < 32; j++)
            any |= m[j];
        CHECK_EACH(any || memcmp(&got, &std, sizeof got) == 0,
                   "random block %d, no outlier: d %04x, the standard bytes' %04x", t, got.d,
                   std.d);
        changed += memcmp(&got, &std, sizeof got) != 0;
    }
    /* the search must actually move scales, or the test above proves nothing */
    CHECK_MSG(changed > N / 4, "only %d of %d blocks left the standard scale", changed, N);
}

/* ---- corners ------------------------------------------------------------ */

static void test_corners(void) {
    float x[32];
    uint8_t all[32], one[32] = {0};
    rl_block_q8_0 got, want, std;
    memset(all, 1, sizeof all);

    /* zero block: every candidate scale is 0, the standard block stays */
    memset(x, 0, sizeof x);
    CHECK(rl_q8_outlier_block_ref(x, all, &got) == 0);
    rl_q8_quantize_f32_ref(x, 32, &std, NULL);
    CHECK(memcmp(&got, &std, sizeof got) == 0);

    /* f32-subnormal standard scale (quants 0, d 0) and every d_k rounds to
     * binary16 zero: no candidate, the standard bytes */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16) * 1e-39f;
    one[3] = 1;
    rl_q8_outlier_block_ref(x, one, &got);
    rl_q8_quantize_f32_ref(x, 32, &std, NULL);
    CHECK(memcmp(&got, &std, sizeof got) == 0);

    /* binary16-subnormal scales: the search runs among them */
    int subnormal = 0;
    for (int t = 0; t < 500; t++) {
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * 2e-7f;
        x[5] = 3e-5f * (float)(1 + rnd_unit());
        rl_q8_outlier_block_ref(x, (uint8_t[32]){[5] = 1}, &got);
        brute_force(x, (uint8_t[32]){[5] = 1}, &want);
        CHECK_EACH(memcmp(&got, &want, sizeof got) == 0,
                   "binary16-subnormal block %d: d %04x, brute force d %04x", t, got.d, want.d);
        subnormal += got.d != 0 && (got.d & 0x7c00) == 0;
    }
    CHECK_MSG(subnormal == 500, "only %d of 500 scales were binary16 subnormals", subnormal);

    /* all-outlier block: every column a candidate source */
    int changed = 0;
    for (int t = 0; t < 500; t++) {
        for (int j = 0; j < 32; j++)
            x[j] = rnd_gauss() * (rnd_int(0, 7) ? 1.0f : 25.0f);
        rl_q8_outlier_block_ref(x, all, &got);
        brute_force(x, all, &want);
        rl_q8_quantize_f32_ref(x, 32, &std, NULL);
        CHECK_EACH(memcmp(&got, &want, sizeof got) == 0,
                   "all-outlier block %d: d %04x, brute force d %04x", t, got.d, want.d);
        changed += memcmp(&got, &std, sizeof got) != 0;
    }
    CHECK_MSG(changed > 0, "no all-outlier block left the standard scale");

    /* an outlier whose |w|/1 is beyond binary16 (d_1 = inf) while the
     * block's own scale is fine: inf is no candidate */
    for (int j = 0; j < 32; j++)
        x[j] = (float)j;
    x[7] = 1e5f;
    memset(one, 0, sizeof one);
    one[7] = 1;
    CHECK(rl_q8_outlier_block_ref(x, one, &got) == 0);
    brute_force(x, one, &want);
    CHECK(memcmp(&got, &want, sizeof got) == 0);
    CHECK(!isinf(rl_gguf_f16_to_f32(got.d)));

    /* the planted case the rule exists for: outlier reproduced exactly */
    for (int j = 0; j < 32; j++)
        x[j] = 0.01f * (float)(j % 7 - 3);
    x[9] = 0.7317f;
    memset(one, 0, sizeof one);
    one[9] = 1;
    rl_q8_outlier_block_ref(x, one, &got);
    rl_q8_quantize_f32_ref(x, 32, &std, NULL);
    double e_got = fabs(got.qs[9] * (double)rl_gguf_f16_to_f32(got.d) - x[9]);
    double e_std = fabs(std.qs[9] * (double)rl_gguf_f16_to_f32(std.d) - x[9]);
    CHECK_MSG(e_got < e_std, "outlier error %g, standard %g", e_got, e_std);
}

/* ---- the matrix entry point --------------------------------------------- */

static void test_matrix(void) {
    enum { R = 5, C = 96 };
    float x[R * C];
    uint16_t h[R * C];
    uint8_t mask[C] = {0};
    for (int i = 0; i < R * C; i++) {
        x[i] = rnd_gauss();
        h[i] = rl_gguf_f32_to_f16(x[i]);
    }
    mask[2] = mask[40] = mask[41] = 1;
    for (int r = 0; r < R; r++)
        x[r * C + 40] *= 20;
    rl_block_q8_0 got[R * C / 32], want, plain[R * C / 32];
    size_t w = 0;
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, x, R, C, mask, got, &w) == RL_OK);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < C / 32; b++) {
            rl_q8_outlier_block_ref(x + r * C + b * 32, mask + b * 32, &want);
            CHECK_EACH(memcmp(&got[r * (C / 32) + b], &want, sizeof want) == 0,
                       "matrix row %d block %d: d %04x, the block search's %04x", r, b,
                       got[r * (C / 32) + b].d, want.d);
        }
    /* block 2 of each row has no outlier column: the bytes of doc/formats.md §2 */
    rl_q8_quantize_f32_ref(x, R * C, plain, NULL);
    for (int r = 0; r < R; r++)
        CHECK(memcmp(&got[r * 3 + 2], &plain[r * 3 + 2], sizeof want) == 0);
    /* no mask: exactly the plain quantizer */
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, x, R, C, NULL, got, NULL) == RL_OK);
    CHECK_SAME_ELEMENTS(got, plain, sizeof got / sizeof *got, "no mask against the plain quantizer");
    /* a binary16 source is widened exactly first */
    float hx[R * C];
    for (int i = 0; i < R * C; i++)
        hx[i] = rl_gguf_f16_to_f32(h[i]);
    rl_block_q8_0 gh[R * C / 32], gf[R * C / 32];
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F16, h, R, C, mask, gh, NULL) == RL_OK);
    rl_q8_quantize_outliers_ref(RL_SRC_F32, hx, R, C, mask, gf, NULL);
    CHECK_SAME_ELEMENTS(gh, gf, sizeof gh / sizeof *gh, "F16 source against F32 widened first");

    /* errors: bad length, bad source, NaN (first one, even after an
     * overflow), overflow (first block) */
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, x, R, 33, mask, got, NULL) == RL_BADLEN);
    CHECK(rl_q8_quantize_outliers_ref((rl_q8_src)9, x, R, C, mask, got, NULL) == RL_BADARG);
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, NULL, R, C, mask, got, NULL) == RL_BADARG);
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, x, SIZE_MAX / 64, C, mask, got, NULL) ==
          RL_BADARG);
    x[1 * C + 70] = 1e7f;
    x[3 * C + 5] = 2e7f;
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, x, R, C, mask, got, &w) == RL_OVERFLOW);
    CHECK_EQ_U(w, 1 * 3 + 2);
    x[4 * C + 11] = NAN;
    CHECK(rl_q8_quantize_outliers_ref(RL_SRC_F32, x, R, C, mask, got, &w) == RL_NONFINITE);
    CHECK_EQ_U(w, 4 * C + 11);
}

int main(void) {
    CHECK_CASE(test_random_blocks());
    CHECK_CASE(test_corners());
    CHECK_CASE(test_matrix());
    return check_report("q8_outlier");
}
