/* forward.c — sessions and the forward passes of `llama`, `qwen2` and `gemma3`, each one
 * function that reads top to bottom (forward_llama, forward_qwen2, forward_gemma3), built
 * from the shared steps above them.
 *
 * One call of forward() runs a chunk of n <= B tokens at positions p0 … p0 + n − 1
 * through every layer: each matmul multiplies all n rows at once (the weight row is read
 * once per chunk, not once per token), attention appends the chunk's K/V first and then
 * lets each query row see its causal (or sliding-window) past. Shapes use
 * E = n_embd, H = n_head, KV = n_head_kv, hd = head_dim, F = n_ff, V = n_vocab. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hcommon.h"
#include "kv.h"
#include "model.h"
#include "kernels/ops.h"
#include "kernels/quants.h"

#define FAIL(st, ...) sjkh_fail((st), err, err_cap, __VA_ARGS__)

/* The session's pool (sjk_pool_create) polls this many pause instructions for the next
 * job before sleeping: the next matmul usually follows within microseconds. */
#define POOL_SPIN 2000

/* ---- the gated feed-forward activation ------------------------------------------- */

/* hb[i] = silu(hb[i]) * hb2[i] over n values (llama, qwen2; ops.h silu_mul). */
static void swiglu(float *hb, const float *hb2, size_t n) { sjkh_ops_get()->silu_mul(hb, hb2, n); }

/* hb[i] = gelu_tanh(hb[i]) * hb2[i] over n values (gemma3): as ggml's CPU backend computes
 * it, through an f16 table (ops.h gelu_table_mul); exact: in f32 (continuous, ops.h
 * gelu_mul). */
static void geglu(float *hb, const float *hb2, size_t n, int exact)
{
    if (exact) sjkh_ops_get()->gelu_mul(hb, hb2, n);
    else sjkh_ops_get()->gelu_table_mul(hb, hb2, n);
}

/* ---- small row operations --------------------------------------------------------- */

/* y = x / rms(x) * w, rows of n (ggml: sum of squares in double, scale in f32). Four
 * partial sums break the chain of dependent double additions; in double, their order
 * changes the f32 scale only in rare last-bit ties. */
static void rmsnorm(float *y, const float *x, const float *w, size_t n, float eps)
{
    double s4[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int u = 0; u < 4; u++) s4[u] += (double)x[i + u] * x[i + u];
    double ss = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* Rotates n_heads vectors of hd values at one position. cs/sn: [hd/2] for that position. */
static void rope(float *v, size_t n_heads, size_t hd, const float *cs, const float *sn, int neox)
{
    size_t half = hd / 2;
    for (size_t h = 0; h < n_heads; h++, v += hd)
        for (size_t i = 0; i < half; i++) {
            size_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * cs[i] - x1 * sn[i];
            v[b] = x0 * sn[i] + x1 * cs[i];
        }
}

/* cos/sin of position p for every pair, computed as ggml does (theta *= base^(-2/hd)) */
static void rope_table(float *cs, float *sn, uint32_t p, size_t hd, float base)
{
    float theta_scale = powf(base, -2.0f / (float)hd), theta = (float)p;
    for (size_t i = 0; i < hd / 2; i++) {
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta *= theta_scale;
    }
}

/* ---- matmul: y[t][r] = W[r] . x[t] --------------------------------------------------- */

typedef struct quant_job {
    sjkh_quantize_fn q;
    uint32_t dot_type;
    const float *x;
    uint8_t *xq;
    float *xr;      /* NULL, or [n_tok][n_in]: the quantized rows expanded back to f32 */
    float *xd;      /* with xr and Q8_1: [n_tok][n_in / 32] each block's s - d * sum(qs) */
    size_t n_in, row_nbytes;
} quant_job;

static void quant_task(void *ctx, uint32_t t, uint32_t thread)
{
    const quant_job *j = ctx;
    j->q(j->x + t * j->n_in, j->xq + t * j->row_nbytes, j->n_in);
    /* llama.cpp's q4_1/q5_1 dots add m * s with s = fp16(d * sum(qs)); the expanded row
     * sums to d * sum(qs): keep the gap */
    if (j->xr)
        sjkh_dequant_dot_row(j->dot_type, j->xq + t * j->row_nbytes, j->xr + t * j->n_in,
                             j->xd + t * (j->n_in / QK), j->n_in);
}

typedef struct mm_job {
    const uint8_t *w;     /* [n_out][w_row_nbytes] */
    size_t w_row_nbytes;
    const uint8_t *xa;    /* [n_tok][xa_row_nbytes] activations in the dot type */
    size_t xa_row_nbytes;
    float *y;             /* [n_tok][n_out] */
    size_t n_in, n_out, n_tok, rows_per_task;
    sjkh_vec_dot_fn dot;
    sjkh_vec_dot4_fn dot4;
    sjkh_vec_dotn_fn dotn;  /* NULL, or the many-rows kernel (then dot and dot4 are unused) */
} mm_job;

/* Software prefetch of the weight stream: while row r is combined, the bytes
 * MM_PREFETCH_AHEAD further on are requested. A decode GEMV reads each weight byte once
 * and does little work per byte; the hardware prefetcher alone left one thread at about
 * half of its streaming bandwidth (5.3 against 10.7 GB/s for the 178 MB Q8_0 output
 * matrix of Gemma 3, measured with and without this). Prefetches never fault, so running
 * past the end of the matrix is harmless. */
#define MM_PREFETCH_AHEAD 4096
#define MM_CACHE_LINE 64
/* Prefetches the n bytes that start `ahead` bytes after p (computed as an integer: the
 * address may lie past the end of the matrix, where pointer arithmetic would not be
 * defined; a prefetch of it is harmless). */
static inline void prefetch_span(const uint8_t *p, size_t ahead, size_t n)
{
#if defined(__GNUC__) || defined(__clang__)
    const uintptr_t a = (uintptr_t)p + ahead;
    for (size_t o = 0; o < n; o += MM_CACHE_LINE) __builtin_prefetch((const void *)(a + o), 0, 3);
#else
    (void)p;
    (void)ahead;
    (void)n;
#endif
}

/* Rows [r0, r1) of the output for every token, in 16 x 16 tiles so that the weight rows
 * and activation rows of a tile stay in L1 while they are combined. With the many-rows
 * kernel (quants.h vec_dotn): two weight rows against 8 tokens per call, each weight block
 * unpacked once for all of them; its outputs equal vec_dot's bit for bit, so a batched
 * decode step gives every row what a single step would. */
#define MM_TILE 16
/* Weight rows per vec_dotn call: a pair, so that the prefetches of the weight stream are
 * spread between the dot products (16 rows at once issued 170 prefetches in a burst that
 * stalled on the line-fill buffers: 0.79x the per-row kernels on the output head at one
 * token against 1.04x for pairs, bench/bench_dotn.c). */
#define MM_DOTN_ROWS 2
static void mm_task(void *ctx, uint32_t task, uint32_t thread)
{
    const mm_job *j = ctx;
    size_t r0 = task * j->rows_per_task, r1 = SJKH_MIN(j->n_out, r0 + j->rows_per_task);
    if (j->dotn) {
        for (size_t rt = r0; rt < r1; rt += MM_DOTN_ROWS) {
            size_t nr = SJKH_MIN(r1 - rt, (size_t)MM_DOTN_ROWS);
            const uint8_t *w = j->w + rt * j->w_row_nbytes;
            prefetch_span(w, MM_PREFETCH_AHEAD, nr * j->w_row_nbytes);
            for (size_t tt = 0; tt < j->n_tok; tt += SJKH_DOTN_MAX_TOK)
                j->dotn(j->n_in, w, j->w_row_nbytes, nr, j->xa + tt * j->xa_row_nbytes, j->xa_row_nbytes,
                        SJKH_MIN(j->n_tok - tt, (size_t)SJKH_DOTN_MAX_TOK), j->y + tt * j->n_out + rt, j->n_out);
        }
        return;
    }
    for (size_t rt = r0; rt < r1; rt += MM_TILE) {
        size_t re = SJKH_MIN(r1, rt + MM_TILE);
        for (size_t tt = 0; tt < j->n_tok; tt += MM_TILE) {
            size_t te = SJKH_MIN(j->n_tok, tt + MM_TILE);
            for (size_t r = rt; r < re; r++) {
                const uint8_t *w = j->w + r * j->w_row_nbytes;
                if (tt == 0) prefetch_span(w, MM_PREFETCH_AHEAD, j->w_row_nbytes);
                size_t t = tt;
                if (j->dot4)
                    for (; t + 4 <= te; t += 4) {
                        float o[4];
                        j->dot4(j->n_in, w, j->xa + t * j->xa_row_nbytes, j->xa_row_nbytes, o);
                        for (int u = 0; u < 4; u++) j->y[(t + u) * j->n_out + r] = o[u];
                    }
                for (; t < te; t++) j->y[t * j->n_out + r] = j->dot(j->n_in, w, j->xa + t * j->xa_row_nbytes);
            }
        }
    }
}

/* ---- exact activations (act_quant 0): f32 activations against dequantized weights ----
 * A task owns rows [r0, r1) (a multiple of SJKH_MM_PANEL rows, but the last). Many tokens
 * (prefill) and a panel kernel: SJKH_MM_PANEL weight rows at a time are dequantized into
 * the thread's row buffer, packed column by column (ops.h mm_f32_pack) and multiplied
 * with every token at once (mm_f32_panel). Otherwise MM_EXACT_ROWS rows are dequantized
 * at a time and the tokens walked in tiles of MM_TILE (weight rows and token rows of a
 * tile stay in L2) with the 4-rows x 2-tokens register-blocked kernel.
 *
 * Per-thread buffer (wdq + thread * wdq_per_thread, MM_WDQ_ROWS rows of the widest input):
 *   rows  [SJKH_MM_PANEL][n_in]  dequantized weight rows
 *   panel [n_in][SJKH_MM_PANEL]  the same rows packed */
#define MM_EXACT_ROWS 16
#define MM_PANEL_MIN_TOK 8 /* fewer tokens than this: the row tile (packing would not pay) */
#define MM_WDQ_ROWS (2 * SJKH_MM_PANEL)
/* act_quant 1: chunks of at least this many tokens take the panel kernel (matmul); at 16
 * the two paths were level in bench/bench_prefill.c, at 32 the panel was 1.5x faster */
#define MM_PREFILL_EXACT_TOK 16
_Static_assert(MM_PREFILL_EXACT_TOK >= MM_PANEL_MIN_TOK, "prefill chunks use the panel kernel");
_Static_assert(MM_EXACT_ROWS <= SJKH_MM_PANEL, "the row buffer holds a panel");
typedef struct mmx_job {
    const uint8_t *w;
    size_t w_row_nbytes;
    uint32_t type;
    const float *x; /* [n_tok][n_in] */
    const float *xd;/* NULL, or for Q4_1/Q5_1 against rounded activations: [n_tok][n_in / 32]
                       the gaps of quant_job.xd (y += sum over blocks of m * gap) */
    float *y;       /* [n_tok][n_out] */
    size_t n_in, n_out, n_tok, rows_per_task;
    sjkh_dequant_fn dequant; /* SIMD row dequantization, or NULL: sjkh_dequant_row */
    float *wdq;     /* per-thread buffers */
    size_t wdq_per_thread;
    const sjkh_ops *ops;
    int rows_alone; /* a decode batch: the row tile, whose tokens are summed one by one as
                       a single token's would be, at any count */
} mmx_job;

static void mmx_dequant_rows(const mmx_job *j, size_t r0, size_t nr, float *buf)
{
    for (size_t r = 0; r < nr; r++) {
        const uint8_t *src = j->w + (r0 + r) * j->w_row_nbytes;
        if (j->dequant) j->dequant(src, buf + r * j->n_in, j->n_in);
        else sjkh_dequant_row(j->type, src, buf + r * j->n_in, j->n_in);
    }
}

/* Adds sum_b m[r][b] * xd[t][b] (m: the fp16 min of block b of weight row r; Q4_1 and Q5_1
 * keep it at byte 2 of the block) to the outputs of rows [rt, rt + nr), with the panel
 * kernel: buf (the thread's free row buffer, SJKH_MM_PANEL * n_in floats) holds
 *   mp  [nb][SJKH_MM_PANEL]      the mins packed as a panel
 *   tmp [chunk][SJKH_MM_PANEL]   the corrections of chunk tokens at a time */
static void mmx_mins_correct(const mmx_job *j, size_t rt, size_t nr, float *buf)
{
    size_t nb = j->n_in / QK, blk_nbytes = j->w_row_nbytes / nb, chunk = j->n_in - nb;
    float *mp = buf, *tmp = buf + nb * SJKH_MM_PANEL;
    for (size_t b = 0; b < nb; b++)
        for (size_t r = 0; r < SJKH_MM_PANEL; r++) {
            float m = 0.0f;
            if (r < nr) {
                const uint8_t *blk = j->w + (rt + r) * j->w_row_nbytes + b * blk_nbytes;
                m = sjkh_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
            }
            mp[b * SJKH_MM_PANEL + r] = m;
        }
    for (size_t t0 = 0; t0 < j->n_tok; t0 += chunk) {
        size_t nt = SJKH_MIN(chunk, j->n_tok - t0);
        j->ops->mm_f32_panel(mp, nr, j->xd + t0 * nb, nt, nb, tmp, SJKH_MM_PANEL);
        for (size_t t = 0; t < nt; t++)
            for (size_t r = 0; r < nr; r++) j->y[(t0 + t) * j->n_out + rt + r] += tmp[t * SJKH_MM_PANEL + r];
    }
}

static void mmx_task(void *ctx, uint32_t task, uint32_t thread)
{
    const mmx_job *j = ctx;
    float *buf = j->wdq + (size_t)thread * j->wdq_per_thread;
    size_t r0 = task * j->rows_per_task, r1 = SJKH_MIN(j->n_out, r0 + j->rows_per_task);
    if (j->ops->mm_f32_panel && j->n_tok >= MM_PANEL_MIN_TOK && !j->rows_alone) {
        float *wp = buf + SJKH_MM_PANEL * j->n_in;
        for (size_t rt = r0; rt < r1; rt += SJKH_MM_PANEL) {
            size_t nr = SJKH_MIN(r1 - rt, (size_t)SJKH_MM_PANEL);
            mmx_dequant_rows(j, rt, nr, buf);
            j->ops->mm_f32_pack(buf, nr, j->n_in, wp);
            j->ops->mm_f32_panel(wp, nr, j->x, j->n_tok, j->n_in, j->y + rt, j->n_out);
            if (j->xd) mmx_mins_correct(j, rt, nr, buf);
        }
        return;
    }
    /* a few tokens (decode): 4 rows at a time, so the dequantized rows stay in L1 */
    size_t R = j->n_tok <= 4 ? 4 : MM_EXACT_ROWS;
    for (size_t rt = r0; rt < r1; rt += R) {
        size_t nr = SJKH_MIN(r1 - rt, R);
        mmx_dequant_rows(j, rt, nr, buf);
        for (size_t tt = 0; tt < j->n_tok; tt += MM_TILE) {
            size_t nt = SJKH_MIN(j->n_tok - tt, (size_t)MM_TILE);
            for (size_t r = 0; r < nr; r += 4)
                j->ops->mm_f32_tile(buf + r * j->n_in, SJKH_MIN((size_t)4, nr - r), j->x + tt * j->n_in, nt,
                                    j->n_in, j->y + tt * j->n_out + rt + r, j->n_out);
        }
    }
}

/* xd: NULL, or the Q8_1 gaps of x (quant_job.xd) when x is a rounded activation row and W
 * is Q4_1 or Q5_1; needs the panel kernel (n >= MM_PANEL_MIN_TOK) */
static void matmul_exact(sjkh_session *s, const sjkh_tensor *W, const float *x, const float *xd, size_t n, float *y)
{
    size_t n_in = (size_t)W->ne[0], n_out = (size_t)W->ne[1];
    size_t nt = (size_t)sjk_pool_n_threads(s->pool);
    size_t rpt = n_out / (nt * 8);
    rpt = SJKH_MAX((size_t)MM_EXACT_ROWS, SJKH_MIN((size_t)256, rpt));
    rpt = (rpt + SJKH_MM_PANEL - 1) / SJKH_MM_PANEL * SJKH_MM_PANEL;
    mmx_job j = {W->data, W->row_nbytes, W->type, x, xd, y, n_in, n_out, n, rpt, sjkh_qtraits_get(W->type)->dequant,
                 s->wdq, s->wdq_per_thread, sjkh_ops_get(), s->decode_rows};
    sjk_pool_run(s->pool, mmx_task, &j, (n_out + rpt - 1) / rpt);
}

/* Quantizes x [n][n_in] to W's dot type into s->xq (and, with expand, back to f32 into
 * s->xr), unless the last call did this for the same input: Q, K and V (gate and up)
 * share one quantization. Returns the bytes of one quantized row. */
static size_t act_quantize(sjkh_session *s, const sjkh_qtraits *qt, const float *x, size_t n, size_t n_in,
                           int expand)
{
    size_t row = sjkh_dot_row_nbytes(qt->dot_type, n_in);
    if (s->xq_src == x && s->xq_type == qt->dot_type && s->xq_n_in == n_in && (s->xq_expanded || !expand))
        return row;
    s->xp_ready = 0;
    quant_job qj = {qt->quantize, qt->dot_type, x, s->xq, expand ? s->xr : NULL, s->xd, n_in, row};
    if (n >= 8) sjk_pool_run(s->pool, quant_task, &qj, n);
    else
        for (size_t t = 0; t < n; t++) quant_task(&qj, t, 0);
    s->xq_src = x;
    s->xq_type = qt->dot_type;
    s->xq_n_in = n_in;
    s->xq_expanded = expand;
    return row;
}

/* The quantized rows s->xq ([n][xq_row], W's dot type) in the form of quants.h
 * sjkh_dotn_prepare (Q8_0 / Q8_1: values + 128, then the scales; Q8_K rows are taken as
 * they are), once per quantization (xp_ready); the bytes of one prepared row. */
static size_t act_prepare(sjkh_session *s, const sjkh_qtraits *qt, size_t n, size_t n_in, size_t xq_row,
                          const uint8_t **xa)
{
    if (qt->dot_type == SJKH_TYPE_Q8_K) {
        *xa = s->xq;
        return xq_row;
    }
    size_t prow = sjkh_dotn_row_nbytes(qt->dot_type, n_in);
    if (!s->xp_ready) {
        for (size_t t = 0; t < n; t++) sjkh_dotn_prepare(qt->dot_type, s->xq + t * xq_row, s->xp + t * prow, n_in);
        s->xp_ready = 1;
    }
    *xa = s->xp;
    return prow;
}

/* ---- many tokens (act_quant 1): integer panel products ------------------------------
 * quants.h mm_many packs 16 weight rows at a time and multiplies them with every token's
 * prepared 8-bit row (vpdpbusd), bit for bit what vec_dot computes; each task owns rows
 * [r0, r1), a multiple of 16 but the last, and its thread's scratch (the exact path's row
 * buffer, s->wdq, larger than sjkh_mm_many_scratch_nbytes of the widest input). */
#define MMK_TASK_ROWS 16
typedef struct mmk_job {
    const uint8_t *w;   /* [n_out][w_row_nbytes] */
    size_t w_row_nbytes;
    const uint8_t *xa;  /* [n_tok][xa_row_nbytes] prepared activation rows */
    size_t xa_row_nbytes;
    float *y;           /* [n_tok][n_out] */
    size_t n_in, n_out, n_tok, rows_per_task;
    sjkh_mm_many_fn mm;
    float *scratch;
    size_t scratch_per_thread; /* floats */
} mmk_job;

static void mmk_task(void *ctx, uint32_t task, uint32_t thread)
{
    const mmk_job *j = ctx;
    size_t r0 = task * j->rows_per_task, r1 = SJKH_MIN(j->n_out, r0 + j->rows_per_task);
    j->mm(j->n_in, j->w + r0 * j->w_row_nbytes, j->w_row_nbytes, r1 - r0, j->xa, j->xa_row_nbytes, j->n_tok,
          j->y + r0, j->n_out, j->scratch + (size_t)thread * j->scratch_per_thread);
}

static void matmul_many(sjkh_session *s, const sjkh_tensor *W, const sjkh_qtraits *qt, const float *x, size_t n,
                        float *y)
{
    size_t n_in = (size_t)W->ne[0], n_out = (size_t)W->ne[1];
    const uint8_t *xa;
    size_t xs = act_prepare(s, qt, n, n_in, act_quantize(s, qt, x, n, n_in, 0), &xa);
    size_t nt = (size_t)sjk_pool_n_threads(s->pool);
    size_t rpt = n_out / (nt * 8);
    rpt = SJKH_MAX((size_t)MMK_TASK_ROWS, SJKH_MIN((size_t)256, rpt));
    rpt = (rpt + MMK_TASK_ROWS - 1) / MMK_TASK_ROWS * MMK_TASK_ROWS;
    mmk_job j = {W->data, W->row_nbytes, xa, xs, y, n_in, n_out, n, rpt, qt->mm_many, s->wdq, s->wdq_per_thread};
    sjk_pool_run(s->pool, mmk_task, &j, (n_out + rpt - 1) / rpt);
}

/* y [n][n_out] = x [n][n_in] times W^T.
 *
 * act_quant 1 rounds the activations to W's dot type as llama.cpp does, at every chunk
 * size, but multiplies in three ways. Chunks of fewer than s->exact_min_tok tokens
 * (decode, short feeds) take the integer block dots (mm_task). A prefill chunk of a type
 * with a many-token integer kernel (quants.h mm_many: Q4_K, Q6_K, Q8_0, Q5_0 with
 * AVX512-VNNI) takes it (matmul_many): the numbers of the block dots' reference
 * (vec_dot_ref) bit for bit, 2.2-3.4x the f32 panel at 512 tokens (bench/bench_mm_k.c).
 * A decode batch of any size keeps the block dots (s->decode_rows), whose SIMD versions
 * agree with the reference only to their tolerance, so that a row is its session's own
 * (test_host_batch: 17 rows). Other types (in a prefill chunk) expand the
 * rounded activations back to f32 (d * q, exact for Q8_0/Q8_1) and take the exact path's
 * packed f32 panel kernel: the same products summed in f32 in another order (plus, for
 * Q4_1/Q5_1, llama.cpp's fp16 rounding of the block sums that meet the weights' mins,
 * mmx_mins_correct), 2.3-2.8x the block dots at 512 tokens (bench/bench_prefill.c). */
static void matmul(sjkh_session *s, const sjkh_tensor *W, const float *x, size_t n, float *y)
{
    const sjkh_qtraits *qt = sjkh_qtraits_get(W->type);
    size_t n_in = (size_t)W->ne[0], n_out = (size_t)W->ne[1];
    if (!s->p.act_quant) {
        matmul_exact(s, W, x, NULL, n, y);
        return;
    }
    if (n >= s->exact_min_tok && qt->mm_many && !s->decode_rows) {
        matmul_many(s, W, qt, x, n, y);
        return;
    }
    if (n >= s->exact_min_tok && !s->decode_rows) {
        const float *xd = NULL;
        if (qt->quantize) {
            act_quantize(s, qt, x, n, n_in, 1);
            x = s->xr;
            if (qt->dot_type == SJKH_TYPE_Q8_1) xd = s->xd;
        }
        matmul_exact(s, W, x, xd, n, y);
        return;
    }
    const uint8_t *xa = (const uint8_t *)x;
    size_t xa_row = n_in * sizeof(float);
    if (qt->quantize) {
        xa_row = act_quantize(s, qt, x, n, n_in, 0);
        xa = s->xq;
    }
    /* one token: vec_dot per row (the same numbers as vec_dotn, and faster for the legacy
     * types, whose unpacking is not shared then: bench/bench_dotn.c) */
    sjkh_vec_dotn_fn dotn = qt->quantize && n >= 2 ? qt->vec_dotn : NULL;
    if (dotn) xa_row = act_prepare(s, qt, n, n_in, xa_row, &xa);
    size_t nt = (size_t)sjk_pool_n_threads(s->pool);
    size_t rpt = n_out / (nt * 8);
    rpt = SJKH_MAX((size_t)4, SJKH_MIN((size_t)256, rpt));
    mm_job j = {W->data, W->row_nbytes, xa, xa_row, y, n_in, n_out, n, rpt, qt->vec_dot, qt->vec_dot4, dotn};
    sjk_pool_run(s->pool, mm_task, &j, (n_out + rpt - 1) / rpt);
}

/* The activation buffer changed: the quantized copy is stale. */
static void xq_invalidate(sjkh_session *s) { s->xq_src = NULL; }

/* Rows of one forward pass that belong to different sessions (sjkh_session_decode_batch):
 * row t is the next position of rows[t], attends that session's cache only, and a cache
 * that refuses a row fails that row alone (status[t]); NULL rows: every row is the next
 * position of the running session. */
typedef struct fwd_rows {
    sjkh_session *const *rows;
    sjk_status *status;
} fwd_rows;

/* Appends row t's K/V to its own session's cache and attends it (batched decode). */
static void attend_rows(sjkh_session *s, const fwd_rows *fr, uint32_t il, size_t n)
{
    const sjkh_model_info *in = &s->m->info;
    const size_t qrow = (size_t)in->n_head * in->head_dim, kvrow = (size_t)in->n_head_kv * in->head_dim;
    for (size_t t = 0; t < n; t++) {
        sjkh_session *r = fr->rows[t];
        if (fr->status[t]) continue;
        sjk_status st = sjkh_kv_append(r->kv, il, s->k + t * kvrow, s->v + t * kvrow, 1);
        if (!st) st = sjkh_kv_attend(r->kv, il, s->q + t * qrow, 1, s->m->attn_scale, s->att + t * qrow, s->pool);
        if (st) {
            fr->status[t] = st;
            memset(s->att + t * qrow, 0, qrow * sizeof(float));
        }
    }
}

/* ---- steps of the forward passes --------------------------------------------------
 * Each works on the chunk of n tokens in the session's activation buffers. */

/* x [n][E] = embedding rows of tokens, times scale. */
static void embed(sjkh_session *s, const int32_t *tokens, size_t n, float scale)
{
    const sjkh_tensor *te = s->m->tok_embd;
    const size_t E = s->m->info.n_embd;
    for (size_t t = 0; t < n; t++) {
        sjkh_dequant_row(te->type, (const uint8_t *)te->data + (size_t)tokens[t] * te->row_nbytes, s->x + t * E, E);
        if (scale != 1.0f)
            for (size_t i = 0; i < E; i++) s->x[t * E + i] *= scale;
    }
}

/* rope_cos/sin [2][n][hd/2] for positions n_past .. (batched rows: each row's session's
 * next position): [0] local base, [1] global base. */
static void rope_tables(sjkh_session *s, size_t n, const fwd_rows *fr)
{
    const sjkh_model_info *in = &s->m->info;
    const size_t hd = in->head_dim, half = hd / 2;
    for (size_t t = 0; t < n; t++) {
        uint32_t p = fr ? fr->rows[t]->n_past : s->n_past + (uint32_t)t;
        rope_table(s->rope_cos + t * half, s->rope_sin + t * half, p, hd, in->rope_base_local);
        rope_table(s->rope_cos + (s->B + t) * half, s->rope_sin + (s->B + t) * half, p, hd, in->rope_base);
    }
}

/* dst [n][E] = RMSNorm(src) * w, row by row (dst may be src). */
static void norm_rows(const sjkh_session *s, float *dst, const float *src, const float *w, size_t n)
{
    const size_t E = s->m->info.n_embd;
    for (size_t t = 0; t < n; t++) rmsnorm(dst + t * E, src + t * E, w, E, s->m->info.rms_eps);
}

/* v [rows][width] += b [width] */
static void add_bias(float *v, const float *b, size_t rows, size_t width)
{
    for (size_t r = 0; r < rows; r++, v += width)
        for (size_t i = 0; i < width; i++) v[i] += b[i];
}

/* x [n][E] += d [n][E] (the residual stream) */
static void residual(sjkh_session *s, const float *d, size_t n)
{
    const size_t nE = n * s->m->info.n_embd;
    for (size_t i = 0; i < nE; i++) s->x[i] += d[i];
}

/* q [n][H][hd], k [n][KV][hd], v [n][KV][hd] = the projections of xb. */
static void project_qkv(sjkh_session *s, const sjkh_layer_w *L, size_t n)
{
    xq_invalidate(s);
    matmul(s, L->wq, s->xb, n, s->q);
    matmul(s, L->wk, s->xb, n, s->k);
    matmul(s, L->wv, s->xb, n, s->v);
}

/* Rotates q and k of the chunk: global picks the global base's table; neox pairs (i, i +
 * hd/2), else (2i, 2i + 1). */
static void rope_qk(sjkh_session *s, size_t n, int global, int neox)
{
    const sjkh_model_info *in = &s->m->info;
    const size_t H = in->n_head, KV = in->n_head_kv, hd = in->head_dim, half = hd / 2, tb = global ? s->B : 0;
    for (size_t t = 0; t < n; t++) {
        const float *cs = s->rope_cos + (tb + t) * half, *sn = s->rope_sin + (tb + t) * half;
        rope(s->q + t * H * hd, H, hd, cs, sn, neox);
        rope(s->k + t * KV * hd, KV, hd, cs, sn, neox);
    }
}

/* Appends the chunk's k, v to layer il's cache, then att [n][H][hd] = softmax(scale q k^T) v
 * over each row's visible past, and xb2 [n][E] = att Wo. Grouped heads (H > KV) share
 * their KV head inside the cache's attention. */
static sjk_status attend(sjkh_session *s, uint32_t il, const sjkh_layer_w *L, size_t n, const fwd_rows *fr)
{
    sjk_status st;
    if (fr) {
        attend_rows(s, fr, il, n);
    } else {
        if ((st = sjkh_kv_append(s->kv, il, s->k, s->v, n))) return st;
        if ((st = sjkh_kv_attend(s->kv, il, s->q, n, s->m->attn_scale, s->att, s->pool))) return st;
    }
    matmul(s, L->wo, s->att, n, s->xb2);
    return SJK_OK;
}

/* hb [n][F] = gate(xb), hb2 [n][F] = up(xb); the caller applies the gated activation. */
static void ffn_gate_up(sjkh_session *s, const sjkh_layer_w *L, size_t n)
{
    xq_invalidate(s);
    matmul(s, L->w_gate, s->xb, n, s->hb);
    matmul(s, L->w_up, s->xb, n, s->hb2);
}

/* The FFN half of the llama / qwen2 block: x += W_down (SiLU(W_gate xb) * W_up xb), with
 * xb = RMSNorm(x) (hb, hb2 [n][F]; xb2 [n][E] holds the product before it is added). */
static void ffn_swiglu(sjkh_session *s, const sjkh_layer_w *L, size_t n)
{
    norm_rows(s, s->xb, s->x, L->ffn_norm, n);
    ffn_gate_up(s, L, n);
    swiglu(s->hb, s->hb2, n * s->m->info.n_ff);
    matmul(s, L->w_down, s->hb, n, s->xb2);
    residual(s, s->xb2, n);
}

/* A NaN or Inf in a weight (or an input) would otherwise reach the logits, where greedy
 * sampling reads NaN as a valid maximum: after each layer, stop at the first one that
 * makes one and say which (bad_layer; n_layers = the output projection). n * E additions
 * per layer: nothing next to the matmuls. The positions stay appended (the caller resets
 * or truncates). */
static int all_finite(const float *v, size_t n)
{
    /* NaN iff some v is NaN or Inf; eight independent sums (not one chain of dependent
     * additions: the logits of a batched step are 262144 values per row for Gemma 3) */
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) acc[u] += v[i + u] * 0.0f;
    for (; i < n; i++) acc[0] += v[i] * 0.0f;
    float a = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    return a == a;
}

/* After layer il: SJK_OK, or SJK_ERR_CORRUPT (bad_layer = il, n_past advanced) when the
 * residual stream holds a non-finite value (batched rows: that row's status). */
static sjk_status layer_done(sjkh_session *s, uint32_t il, size_t n, const fwd_rows *fr)
{
    const size_t E = s->m->info.n_embd;
    if (fr) { /* batched rows: a row that makes one fails alone */
        for (size_t t = 0; t < n; t++)
            if (!all_finite(s->x + t * E, E) && !fr->status[t]) fr->status[t] = SJK_ERR_CORRUPT;
        return SJK_OK;
    }
    if (all_finite(s->x, n * E)) return SJK_OK;
    s->bad_layer = (int32_t)il;
    s->n_past += (uint32_t)n;
    return SJK_ERR_CORRUPT;
}

/* logits [n or 1][V] = output · RMSNorm(x); advances n_past (batched rows: each good
 * row's session's). */
static sjk_status finish(sjkh_session *s, size_t n, float *logits, int all_logits, const fwd_rows *fr)
{
    const sjkh_model *m = s->m;
    const size_t E = m->info.n_embd, V = m->info.n_vocab;
    if (fr) {
        for (size_t t = 0; t < n; t++)
            if (!fr->status[t]) fr->rows[t]->n_past++;
    } else {
        s->n_past += (uint32_t)n;
    }
    if (!logits) return SJK_OK;
    size_t first = all_logits ? 0 : n - 1, cnt = n - first;
    norm_rows(s, s->xb, s->x + first * E, m->output_norm, cnt);
    xq_invalidate(s);
    matmul(s, m->output, s->xb, cnt, logits);
    if (fr) {
        for (size_t t = 0; t < cnt; t++)
            if (!all_finite(logits + t * V, V) && !fr->status[t]) fr->status[t] = SJK_ERR_CORRUPT;
        return SJK_OK;
    }
    if (all_finite(logits, cnt * m->info.n_vocab)) return SJK_OK;
    s->bad_layer = (int32_t)m->info.n_layers; /* the output projection */
    return SJK_ERR_CORRUPT;
}

/* ---- the forward passes, one per architecture family -------------------------------
 * One call runs a chunk of n <= B tokens at positions n_past .. n_past + n - 1. */

/* llama (SmolLM2): pre-norm blocks, RoPE on adjacent pairs, SwiGLU, every layer global. */
static sjk_status forward_llama(sjkh_session *s, const int32_t *tokens, size_t n, float *logits, int all_logits,
                                 const fwd_rows *fr)
{
    const sjkh_model *m = s->m;
    sjk_status st;
    embed(s, tokens, n, 1.0f); /* x [n][E] */
    rope_tables(s, n, fr);
    for (uint32_t il = 0; il < m->info.n_layers; il++) {
        const sjkh_layer_w *L = &m->layers[il];
        norm_rows(s, s->xb, s->x, L->attn_norm, n);      /* xb [n][E] */
        project_qkv(s, L, n);                            /* q [n][H][hd], k, v [n][KV][hd] */
        rope_qk(s, n, 1, 0);                             /* pairs (2i, 2i + 1) */
        if ((st = attend(s, il, L, n, fr))) return st;   /* xb2 [n][E] */
        residual(s, s->xb2, n);
        ffn_swiglu(s, L, n);
        if ((st = layer_done(s, il, n, fr))) return st;
    }
    return finish(s, n, logits, all_logits, fr);
}

/* qwen2 (Qwen2.5): llama's block with biases on Q, K, V and NeoX RoPE pairs (i, i + hd/2). */
static sjk_status forward_qwen2(sjkh_session *s, const int32_t *tokens, size_t n, float *logits, int all_logits,
                                 const fwd_rows *fr)
{
    const sjkh_model *m = s->m;
    const size_t H = m->info.n_head, KV = m->info.n_head_kv, hd = m->info.head_dim;
    sjk_status st;
    embed(s, tokens, n, 1.0f); /* x [n][E] */
    rope_tables(s, n, fr);
    for (uint32_t il = 0; il < m->info.n_layers; il++) {
        const sjkh_layer_w *L = &m->layers[il];
        norm_rows(s, s->xb, s->x, L->attn_norm, n);      /* xb [n][E] */
        project_qkv(s, L, n);                            /* q [n][H][hd], k, v [n][KV][hd] */
        add_bias(s->q, L->bq, n, H * hd);
        add_bias(s->k, L->bk, n, KV * hd);
        add_bias(s->v, L->bv, n, KV * hd);
        rope_qk(s, n, 1, 1);                             /* NeoX pairs (i, i + hd/2) */
        if ((st = attend(s, il, L, n, fr))) return st;   /* xb2 [n][E] */
        residual(s, s->xb2, n);
        ffn_swiglu(s, L, n);
        if ((st = layer_done(s, il, n, fr))) return st;
    }
    return finish(s, n, logits, all_logits, fr);
}

/* gemma3: embedding × sqrt(E); per-head RMSNorm of q and k; NeoX RoPE with a local base on
 * sliding-window layers and the file's base on global ones; post-attention and post-FFN
 * norms; GELU-tanh gate. */
static sjk_status forward_gemma3(sjkh_session *s, const int32_t *tokens, size_t n, float *logits, int all_logits,
                                 const fwd_rows *fr)
{
    const sjkh_model *m = s->m;
    const sjkh_model_info *in = &m->info;
    const size_t H = in->n_head, KV = in->n_head_kv, hd = in->head_dim, F = in->n_ff;
    sjk_status st;
    embed(s, tokens, n, sqrtf((float)in->n_embd)); /* x [n][E] */
    rope_tables(s, n, fr);
    for (uint32_t il = 0; il < in->n_layers; il++) {
        const sjkh_layer_w *L = &m->layers[il];
        norm_rows(s, s->xb, s->x, L->attn_norm, n);      /* xb [n][E] */
        project_qkv(s, L, n);                            /* q [n][H][hd], k, v [n][KV][hd] */
        for (size_t i = 0; i < n * H; i++) rmsnorm(s->q + i * hd, s->q + i * hd, L->q_norm, hd, in->rms_eps);
        for (size_t i = 0; i < n * KV; i++) rmsnorm(s->k + i * hd, s->k + i * hd, L->k_norm, hd, in->rms_eps);
        rope_qk(s, n, L->global, 1);
        if ((st = attend(s, il, L, n, fr))) return st;       /* xb2 [n][E] */
        norm_rows(s, s->xb2, s->xb2, L->post_attn_norm, n);
        residual(s, s->xb2, n);

        norm_rows(s, s->xb, s->x, L->ffn_norm, n);
        ffn_gate_up(s, L, n);                            /* hb, hb2 [n][F] */
        geglu(s->hb, s->hb2, n * F, !s->p.act_quant);
        matmul(s, L->w_down, s->hb, n, s->xb2);          /* xb2 [n][E] */
        norm_rows(s, s->xb2, s->xb2, L->post_ffw_norm, n);
        residual(s, s->xb2, n);
        if ((st = layer_done(s, il, n, fr))) return st;
    }
    return finish(s, n, logits, all_logits, fr);
}

/* fr: NULL (one session's chunk), or rows of several sessions (sjkh_session_decode_batch). */
static sjk_status forward(sjkh_session *s, const int32_t *tokens, size_t n, float *logits, int all_logits,
                          const fwd_rows *fr)
{
    switch (s->m->info.arch) {
    case SJKH_ARCH_QWEN2: return forward_qwen2(s, tokens, n, logits, all_logits, fr);
    case SJKH_ARCH_GEMMA3: return forward_gemma3(s, tokens, n, logits, all_logits, fr);
    case SJKH_ARCH_LLAMA: break;
    }
    return forward_llama(s, tokens, n, logits, all_logits, fr);
}

/* ---- sessions ---------------------------------------------------------------------- */

sjkh_session_params sjkh_session_params_default(void)
{
    sjkh_session_params p = {4096, 512, 1, "f16", 1, SJKH_WINDOW_F16};
    return p;
}

void sjkh_session_free(sjkh_session *s)
{
    if (!s) return;
    sjkh_kv_free(s->kv);
    sjk_pool_free(s->pool);
    free(s->x);
    free(s->xb);
    free(s->xb2);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->hb);
    free(s->hb2);
    free(s->rope_cos);
    free(s->rope_sin);
    free(s->xq);
    free(s->xp);
    free(s->wdq);
    free(s->xr);
    free(s->xd);
    free(s);
}

static float *alloc_f(size_t a, size_t b, int *fail)
{
    size_t n;
    if (!sjkh_mul_ok(a, b, &n) || !sjkh_mul_ok(n, sizeof(float), &n)) {
        *fail = 1;
        return NULL;
    }
    float *p = malloc(n ? n : 1);
    if (!p) *fail = 1;
    return p;
}

sjk_status sjkh_session_create(const sjkh_model *m, const sjkh_session_params *p, sjkh_session **out, char *err,
                               size_t err_cap)
{
    if (!out || !m || !p) return FAIL(SJK_ERR_PARAM, "session: bad arguments");
    *out = NULL;
    const sjkh_model_info *in = &m->info;
    if (!p->n_ctx || p->n_ctx > in->n_ctx_train)
        return FAIL(SJK_ERR_PARAM, "session: context %u is outside 1..%u (the model's context length)", p->n_ctx,
                    in->n_ctx_train);
    if (!p->n_batch || p->n_batch > 65536) return FAIL(SJK_ERR_PARAM, "session: n_batch %u is outside 1..65536", p->n_batch);
    if (!p->n_threads || p->n_threads > SJKH_SESSION_MAX_THREADS)
        return FAIL(SJK_ERR_PARAM, "session: n_threads %u is outside 1..%u", p->n_threads,
                    (unsigned)SJKH_SESSION_MAX_THREADS);
    if (p->kv && strlen(p->kv) > SJKH_KV_STR_MAX)
        return FAIL(SJK_ERR_PARAM, "session: kv configuration longer than %u characters",
                    (unsigned)SJKH_KV_STR_MAX);
    if (p->act_quant > 1) return FAIL(SJK_ERR_PARAM, "session: act_quant %u is not 0 or 1", p->act_quant);
    if (!sjkh_window_type_name(p->window_type))
        return FAIL(SJK_ERR_PARAM, "session: window_type %u is not f16 (0) or q8_0 (1)", p->window_type);
    sjkh_gelu_f16_table(); /* build it now, not in the first forward pass */

    sjkh_session *s = calloc(1, sizeof *s);
    if (!s) return FAIL(SJK_ERR_NOMEM, "session: out of memory");
    s->m = m;
    s->p = *p;
    snprintf(s->kv_str, sizeof s->kv_str, "%s", p->kv ? p->kv : "f16");
    s->p.kv = s->kv_str;
    uint32_t B = SJKH_MIN(p->n_batch, p->n_ctx);
    s->B = B;
    size_t E = in->n_embd, H = in->n_head, KV = in->n_head_kv, hd = in->head_dim, F = in->n_ff;
    int fail = 0;
    s->x = alloc_f(B, E, &fail);
    s->xb = alloc_f(B, E, &fail);
    s->xb2 = alloc_f(B, E, &fail);
    s->q = alloc_f(B, H * hd, &fail);
    s->k = alloc_f(B, KV * hd, &fail);
    s->v = alloc_f(B, KV * hd, &fail);
    s->att = alloc_f(B, H * hd, &fail);
    s->hb = alloc_f(B, F, &fail);
    s->hb2 = alloc_f(B, F, &fail);
    s->rope_cos = alloc_f(2 * (size_t)B, hd / 2, &fail);
    s->rope_sin = alloc_f(2 * (size_t)B, hd / 2, &fail);
    size_t max_in = SJKH_MAX(SJKH_MAX(E, F), H * hd);
    s->xq_row_nbytes = max_in * 2; /* >= any dot type's bytes per value (at most 36/32) */
    s->xq = (uint8_t *)alloc_f(B, s->xq_row_nbytes / sizeof(float) + 1, &fail);
    s->xp = (uint8_t *)alloc_f(B, s->xq_row_nbytes / sizeof(float) + 1, &fail); /* >= 1.25 bytes per value */
    /* act_quant 1 takes the f32 panel kernel for prefill chunks where it exists (AVX2, AVX-512) */
    s->exact_min_tok = sjkh_ops_get()->mm_f32_panel ? MM_PREFILL_EXACT_TOK : UINT32_MAX;
    if (!p->act_quant || B >= s->exact_min_tok) {
        s->wdq_per_thread = MM_WDQ_ROWS * max_in; /* also >= sjkh_mm_many_scratch_nbytes(max_in) / 4 */
        s->wdq = alloc_f(p->n_threads, s->wdq_per_thread, &fail);
    }
    if (p->act_quant && B >= s->exact_min_tok) {
        s->xr = alloc_f(B, max_in, &fail);
        s->xd = alloc_f(B, max_in / QK + 1, &fail);
    }
    if (fail) {
        sjkh_session_free(s);
        return FAIL(SJK_ERR_NOMEM, "session: out of memory for activations (batch %u)", B);
    }
    sjk_status st = sjk_pool_create(p->n_threads, POOL_SPIN, &s->pool);
    if (st) {
        sjkh_session_free(s);
        return FAIL(st, "session: cannot start %u threads", p->n_threads);
    }
    uint8_t *glob = malloc(in->n_layers);
    if (!glob) {
        sjkh_session_free(s);
        return FAIL(SJK_ERR_NOMEM, "session: out of memory");
    }
    for (uint32_t l = 0; l < in->n_layers; l++) glob[l] = (uint8_t)m->layers[l].global;
    sjkh_kv_params kp = {in->n_layers, in->n_head_kv, in->n_head, in->head_dim, p->n_ctx, B, p->n_threads,
                         glob, in->sliding_window, s->kv_str, p->window_type};
    st = sjkh_kv_create(&kp, &s->kv, err, err_cap);
    free(glob);
    if (st) {
        sjkh_session_free(s);
        return st;
    }
    *out = s;
    return SJK_OK;
}

sjk_status sjkh_session_feed(sjkh_session *s, const int32_t *tokens, size_t n, float *logits, int all_logits,
                             char *err, size_t err_cap)
{
    if (!s || (!tokens && n)) return FAIL(SJK_ERR_PARAM, "feed: bad arguments");
    if (s->failed)
        return FAIL(s->failed, "feed: an earlier feed failed in the middle of a chunk (%s); reset the session",
                    sjk_status_str(s->failed));
    if (!n) return SJK_OK;
    if (n > s->p.n_ctx - s->n_past)
        return FAIL(SJK_ERR_RANGE, "feed: %zu tokens after %u do not fit in the context of %u", n, s->n_past,
                    s->p.n_ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= s->m->info.n_vocab)
            return FAIL(SJK_ERR_RANGE, "feed: token id %d is outside the vocabulary (%u)", tokens[i],
                        s->m->info.n_vocab);
    size_t V = s->m->info.n_vocab;
    for (size_t off = 0; off < n; off += s->B) {
        size_t c = SJKH_MIN((size_t)s->B, n - off);
        int last = off + c == n;
        float *lg = NULL;
        if (logits && all_logits) lg = logits + off * V;
        else if (logits && last) lg = logits;
        s->bad_layer = -1;
        sjk_status st = forward(s, tokens + off, c, lg, all_logits, NULL);
        if (st && !(st == SJK_ERR_CORRUPT && s->bad_layer >= 0 && (uint32_t)s->bad_layer == s->m->info.n_layers)) {
            /* forward() stopped at a layer: the layers before it hold this chunk, the
             * rest do not. No later feed could line the layers up again: refuse them
             * until a reset or a load. (Non-finite logits from the output projection
             * come after every layer took the chunk: the session stays consistent.) */
            s->failed = st;
        }
        if (st == SJK_ERR_CORRUPT && s->bad_layer >= 0) {
            if ((uint32_t)s->bad_layer == s->m->info.n_layers)
                return FAIL(st, "feed: non-finite logits from the output projection (its weights or the final "
                                "norm hold NaN or Inf)");
            return FAIL(st, "feed: non-finite activations after layer %d (the model's weights hold NaN or Inf)",
                        (int)s->bad_layer);
        }
        if (st) return FAIL(st, "feed: the KV cache refused the positions (%s)", sjk_status_str(st));
    }
    return SJK_OK;
}

uint32_t sjkh_session_n_past(const sjkh_session *s) { return s->n_past; }

sjk_status sjkh_session_reset(sjkh_session *s)
{
    s->n_past = 0;
    s->failed = SJK_OK;
    return sjkh_kv_reset(s->kv);
}

sjk_status sjkh_session_truncate(sjkh_session *s, uint32_t keep, uint32_t *kept)
{
    if (!s || !kept) return SJK_ERR_PARAM;
    if (s->failed) { /* the layers may disagree after a failed feed: start over */
        *kept = 0;
        return sjkh_session_reset(s);
    }
    sjk_status st = sjkh_kv_truncate(s->kv, keep, kept);
    s->n_past = st ? 0 : *kept;
    if (st) sjkh_kv_reset(s->kv);
    return st;
}

sjk_status sjkh_session_kv_report(const sjkh_session *s, sjkh_kv_report *r) { return sjkh_kv_get_report(s->kv, r); }

sjk_cache *sjkh_session_cache(sjkh_session *s) { return s ? sjkh_kv_cache(s->kv) : NULL; }

sjk_status sjkh_session_decode_batch(sjkh_session *const *ss, size_t n, const int32_t *tokens, float *logits,
                                     sjk_status *status, char *err, size_t err_cap)
{
    if (!ss || !tokens || !logits || !status || !n || !ss[0])
        return FAIL(SJK_ERR_PARAM, "decode batch: bad arguments");
    sjkh_session *s = ss[0];
    if (n > s->B) return FAIL(SJK_ERR_PARAM, "decode batch: %zu sessions exceed the batch of %u", n, s->B);
    for (size_t i = 0; i < n; i++) {
        const sjkh_session *r = ss[i];
        if (!r || r->m != s->m || r->p.act_quant != s->p.act_quant || r->p.n_threads != s->p.n_threads)
            return FAIL(SJK_ERR_PARAM, "decode batch: session %zu is not of the same model, act_quant and threads", i);
        for (size_t j = 0; j < i; j++)
            if (ss[j] == r) return FAIL(SJK_ERR_PARAM, "decode batch: session %zu appears twice", i);
        if (r->failed)
            return FAIL(r->failed, "decode batch: session %zu failed in an earlier pass; reset it", i);
        if (r->n_past >= r->p.n_ctx)
            return FAIL(SJK_ERR_RANGE, "decode batch: session %zu is full (%u positions)", i, r->p.n_ctx);
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= s->m->info.n_vocab)
            return FAIL(SJK_ERR_RANGE, "decode batch: token id %d is outside the vocabulary (%u)", tokens[i],
                        s->m->info.n_vocab);
    }
    for (size_t i = 0; i < n; i++) status[i] = SJK_OK;
    fwd_rows fr = {ss, status};
    s->decode_rows = 1;
    sjk_status st = forward(s, tokens, n, logits, 1, &fr);
    s->decode_rows = 0;
    if (st) return FAIL(st, "decode batch: %s", sjk_status_str(st));
    for (size_t i = 0; i < n; i++)
        if (status[i]) ss[i]->failed = status[i]; /* its layers may disagree: refused until a reset */
    return SJK_OK;
}
