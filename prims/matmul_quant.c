/* matmul_quant.c - weights of the legacy, K and IQ4 types times a sequence
 * of activation rows (matmul.h, rl_matmul_quant_ex): a GGUF file's
 * Q4_K_M weights are used as the file holds them, a fifth of the memory of
 * f32 copies, through each type's row product (type_traits.h's vec_dot,
 * quant_dot.c).
 *
 * The activations are quantized once per product into the type's
 * vec_dot_type, so a row product reads blocks only; each thread takes a
 * range of weight rows and walks it in tiles small enough for L1, running
 * every token against a tile, as matmul.c does for Q8_0.  Built with
 * -ffp-contract=off: the Q8x2 sum is a product and an addition, two
 * roundings.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/matmul.h"
#include "prims/matvec.h"
#include "prims/pool.h"
#include "prims/quants.h"
#include "prims/type_traits.h"

/* Weight bytes per tile: half of a 32 KB L1 data cache, as matmul.c's. */
#define RL_MQ_TILE_BYTES 16384

typedef struct {
    rl_vec_dot_kernel dot;
    rl_vec_dot2_kernel dot2; /* two tokens at once, or NULL */
    const uint8_t *w;
    size_t row_bytes;  /* one weight row */
    const uint8_t *xq; /* n activation rows of xrow_bytes */
    const uint8_t *xr; /* Q8x2: the residual rows, or NULL */
    size_t xrow_bytes;
    size_t rows, nb, n, tile;
    double *yd;
    float *yf;
} rl_mq_job;

static void rl_mq_job_run(void *ctx, int ith, int nth) {
    const rl_mq_job *j = ctx;
    size_t r0, r1;
    rl_pool_chunk(j->rows, ith, nth, RL_MATVEC_ROWS, &r0, &r1);
    for (size_t rt = r0; rt < r1; rt += j->tile) {
        const size_t re = r1 - rt < j->tile ? r1 : rt + j->tile;
        size_t t = 0;
        for (; j->dot2 && t + 2 <= j->n; t += 2) {
            const uint8_t *x = j->xq + t * j->xrow_bytes;
            for (size_t r = rt; r < re; r++) {
                float s[2];
                j->dot2(j->w + r * j->row_bytes, x, j->xrow_bytes, j->nb, s);
                for (int k = 0; k < 2; k++) {
                    if (j->yd)
                        j->yd[(t + k) * j->rows + r] = s[k];
                    if (j->yf)
                        j->yf[(t + k) * j->rows + r] = s[k];
                }
            }
        }
        for (; t < j->n; t++) {
            const uint8_t *xq = j->xq + t * j->xrow_bytes;
            const uint8_t *xr = j->xr ? j->xr + t * j->xrow_bytes : NULL;
            for (size_t r = rt; r < re; r++) {
                const uint8_t *w = j->w + r * j->row_bytes;
                float s = j->dot(w, xq, j->nb);
                if (xr)
                    s += 0x1p-7f * j->dot(w, xr, j->nb);
                if (j->yd)
                    j->yd[t * j->rows + r] = s;
                if (j->yf)
                    j->yf[t * j->rows + r] = s;
            }
        }
    }
}

static rl_status rl_mq_fail(rl_status st, char *msg, size_t msglen, const char *op,
                            const char *why) {
    if (msg && msglen)
        snprintf(msg, msglen, "%s: %s", op, why);
    return st;
}

/* The Q8x2 residual rows of Q8_0 activations: per block the residual
 * quants (matmul.h's rl_q8x2_residual) under the block's own scale. */
static void rl_mq_residual_rows(const float *x, size_t n, size_t cols, const rl_block_q8_0 *xq,
                                int8_t *r, rl_block_q8_0 *xr) {
    const size_t nb = n * cols / RL_QK8_0;
    rl_q8x2_residual(x, n * cols, xq, r);
    for (size_t b = 0; b < nb; b++) {
        xr[b].d = xq[b].d;
        memcpy(xr[b].qs, r + RL_QK8_0 * b, RL_QK8_0);
    }
}

static rl_status rl_mq_core(const char *op, uint32_t type, const void *w, size_t rows,
                            size_t cols, rl_q8_src xsrc, const void *x, size_t n, double *yd,
                            float *yf, rl_act act, rl_path path, int threads, int min_work,
                            char *msg, size_t msglen, rl_mm_fault *fault) {
    if (msg && msglen)
        msg[0] = 0;
    const rl_type_traits *tt = rl_type_traits_of(type);
    const rl_status run = rl_check_run(path, threads);
    if (!tt || !tt->vec_dot || (unsigned)act > RL_ACT_Q8X2 || (unsigned)xsrc > RL_SRC_BF16 ||
        run == RL_BADARG || (!yd && !yf))
        return rl_mq_fail(RL_BADARG, msg, msglen, op, "bad argument");
    const size_t block = rl_gguf_ggml_block_size(type);
    const uint32_t xt = tt->vec_dot_type;
    const size_t xblock = rl_gguf_ggml_block_size(xt), xbytes = rl_gguf_ggml_block_bytes(xt);
    if (cols % block || cols % xblock) {
        if (msg && msglen)
            snprintf(msg, msglen, "%s: %zu columns is not a multiple of %zu (%s blocks)", op,
                     cols, block, rl_gguf_ggml_type_name(type));
        return RL_BADLEN;
    }
    const size_t row_bytes = cols / block * rl_gguf_ggml_block_bytes(type);
    const size_t xrow_bytes = cols / xblock * xbytes;
    if ((row_bytes && rows > SIZE_MAX / row_bytes) || (xrow_bytes && n > SIZE_MAX / 4 / xrow_bytes) ||
        (cols && n > SIZE_MAX / sizeof(float) / cols) || (rows && cols && !w) || (n && cols && !x))
        return rl_mq_fail(RL_BADARG, msg, msglen, op, "bad argument");
    if (run != RL_OK) {
        if (msg && msglen)
            snprintf(msg, msglen, "%s: this CPU cannot run the %s path", op, rl_path_name(path));
        return RL_UNSUPPORTED;
    }
    if (rows == 0 || n == 0)
        return RL_OK;

    /* One allocation before any worker starts: f32 copies of other
     * activations, the Q8_0 rows every type's check makes, the rows of the
     * type's own activations, and the Q8x2 residuals. */
    const size_t nx = n * cols;
    const int q8_0 = xt == RL_GGUF_GGML_Q8_0;
    const int q8x2 = q8_0 && act == RL_ACT_Q8X2;
    const size_t xf_bytes = xsrc != RL_SRC_F32 ? nx * sizeof(float) : 0;
    const size_t q0_bytes = (rl_q8_bytes(nx) + 7) / 8 * 8;
    const size_t own_bytes = q8_0 ? 0 : (n * xrow_bytes + 7) / 8 * 8;
    const size_t xr_bytes = q8x2 ? q0_bytes + (nx + 7) / 8 * 8 : 0;
    char *scratch = malloc(xf_bytes + q0_bytes + own_bytes + xr_bytes + 8);
    if (!scratch)
        return rl_mq_fail(RL_NOMEM, msg, msglen, op, "out of memory for the activations");
    /* f32 and Q8_K (an f32 scale first) at 8-aligned offsets, then the
     * 2-aligned blocks, then bytes. */
    float *xf = (float *)(void *)scratch;
    uint8_t *own = (uint8_t *)scratch + xf_bytes;
    rl_block_q8_0 *q0 = (rl_block_q8_0 *)(void *)(own + own_bytes);
    rl_block_q8_0 *xr = (rl_block_q8_0 *)(void *)((uint8_t *)q0 + q0_bytes);
    int8_t *r = (int8_t *)xr + (q8x2 ? q0_bytes : 0);

    const float *x32 = x;
    if (xsrc != RL_SRC_F32) { /* f64 by the C cast, halves exactly, as the quantizer does */
        rl_q8_widen_ref(xsrc, x, 0, nx, xf);
        x32 = xf;
    }
    const rl_status st = rl_mm_quantize_rows(op, x32, n, cols, q0, path, msg, msglen, fault);
    if (st != RL_OK) {
        free(scratch);
        return st;
    }
    rl_mq_job job = {.dot = tt->vec_dot[path], .dot2 = tt->vec_dot2 ? tt->vec_dot2[path] : NULL,
                     .w = w, .row_bytes = row_bytes,
                     .xq = (const uint8_t *)q0, .xrow_bytes = xrow_bytes, .rows = rows,
                     .nb = cols / block, .n = n, .yd = yd, .yf = yf};
    if (xt == RL_GGUF_GGML_Q8_1 || xt == RL_GGUF_GGML_Q8_K) {
        void (*quantize)(const float *, void *, size_t) =
            xt == RL_GGUF_GGML_Q8_1 ? rl_quantize_q8_1_ref : rl_quantize_q8_K_ref;
        for (size_t t = 0; t < n; t++)
            quantize(x32 + t * cols, own + t * xrow_bytes, cols / xblock);
        job.xq = own;
    } else if (q8x2) {
        rl_mq_residual_rows(x32, n, cols, q0, r, xr);
        job.xr = (const uint8_t *)xr;
        job.dot2 = NULL; /* the two-row form has no residual pass */
    }
    size_t tile = row_bytes ? RL_MQ_TILE_BYTES / row_bytes : 64;
    tile = tile / RL_MATVEC_ROWS * RL_MATVEC_ROWS;
    job.tile = tile < RL_MATVEC_ROWS ? RL_MATVEC_ROWS : tile > 64 ? 64 : tile;

    /* work in matmul.c's unit: row-blocks of 32 values times tokens */
    const size_t groups = (rows + RL_MATVEC_ROWS - 1) / RL_MATVEC_ROWS;
    const size_t work = rl_pool_mul_sat(rl_pool_mul_sat(rows, cols / RL_QK8_0), n);
    const int nth = rl_pool_threads(threads, groups, work,
                                    min_work ? (n > 1 ? RL_MM_MIN_WORK_SEQ : RL_MM_MIN_WORK) : 0);
    rl_pool_run_split(rl_pool_split_chunks(nth, groups), nth, rl_mq_job_run, &job);
    free(scratch);
    return RL_OK;
}

rl_status rl_matmul_quant_ex(uint32_t type, const void *w, size_t rows, size_t cols,
                             const float *x, size_t n, float *y, rl_act act, rl_path path,
                             int threads, int min_work, char *msg, size_t msglen,
                             rl_mm_fault *fault) {
    if (!y && rows && n)
        return rl_mq_fail(RL_BADARG, msg, msglen, "matmul", "bad argument");
    float dummy;
    return rl_mq_core("matmul", type, w, rows, cols, RL_SRC_F32, x, n, NULL, y ? y : &dummy, act,
                      path, threads, min_work, msg, msglen, fault);
}

rl_status rl_matmul_quant(uint32_t type, const void *w, size_t rows, size_t cols,
                          const float *x, size_t n, float *y, rl_act act, char *msg,
                          size_t msglen, rl_mm_fault *fault) {
    return rl_matmul_quant_ex(type, w, rows, cols, x, n, y, act, rl_path_best(), rl_threads(),
                              1, msg, msglen, fault);
}

rl_status rl_matvec_quant_ex(uint32_t type, const void *w, size_t rows, size_t cols,
                             rl_q8_src xsrc, const void *x, double *yd, float *yf, rl_act act,
                             rl_path path, int threads, int min_work, char *msg, size_t msglen,
                             rl_mm_fault *fault) {
    return rl_mq_core("matvec", type, w, rows, cols, xsrc, x, 1, yd, yf, act, path, threads,
                      min_work, msg, msglen, fault);
}
