/* trellis.c — the 64-state bitshift trellis: Viterbi search, packing, decoding, and the
 * tile layer used by the trellis record body. See trellis.h for the code structure.
 *
 * The search. For one sequence u[0..T), the cost of reaching carried state ns after value
 * t is
 *
 *     cost[t+1][ns] = min over j < 2^k of  cost[t][p] + (u[t] - C[w])^2,
 *                     w = (ns << k) | j,  p = w & 63
 *
 * i.e. the 2^k windows that end in ns are exactly the ones whose top 6 bits are ns, and
 * each has its own predecessor p (its bottom 6 bits). So each step is 64 << k
 * add-compare-selects producing 64 minima, and the symbol emitted at step t is simply
 * ns >> (6 - k): the best predecessor of a state depends only on that state. We run
 * SJK_TRELLIS_LANES sequences side by side, one per SIMD lane, so everything is vertical
 * (no shuffles). The forward pass keeps two rows of costs and, per step, state and lane,
 * a 4-bit back-pointer: the j of the first minimum (the lowest j on ties); the traceback
 * follows the pointers (trellis_impl.h). Every path computes the same costs and applies
 * the same rule, so every path produces the same codes. (Until 2026-12 the forward pass
 * kept the whole float cost history, 4 KiB per value, and the traceback re-derived each
 * choice from it; the codes are the same, tests/test_trellis_bp.c keeps that algorithm
 * as its reference. The back-pointers take 512 bytes per value.)
 *
 * Start state. Records have no room for start bits, so a sequence is coded tail-biting:
 * its bit stream is a ring and the first window reads the last 6 bits. The search is the
 * usual two-pass approximation: (1) a free-start, free-end search over the sequence
 * rotated so that the wrap point sits in the middle (we use a window of
 * SJK_TRELLIS_TB_PASS1 values around it, enough for the survivor paths to merge), whose
 * traceback gives the carried state at the wrap; (2) a search over the sequence in order
 * with start and end both pinned to that state. Measured (`sjkvarn bench trellis`, 8,192
 * Gaussian rows of 128): tail-biting beats a fixed start state by 0.20 / 0.23 / 0.27 dB at
 * k = 2 / 3 / 4 with the same codebooks; a first pass of 64 values is within 0.02 dB of
 * one over the whole ring (128) and 25% cheaper; 32 would lose another 0.03–0.04 dB.
 *
 * Refit. With the symbols fixed, each scale row's (scale, offset) is refit. Least squares
 * minimises the row's squared error by construction; moment matching (keep the row's mean
 * and standard deviation, the SJ-KVaRN note's wording, docs/BACKGROUND.md) measured 0.01–0.09 dB lower on Gaussian
 * tiles and up to 0.23 dB lower on the outlier generator (`sjkvarn bench trellis`, part 2),
 * so records use least squares. Model KL has not been compared yet.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "codec/trellis.h"
#include "codec/trellis_impl.h"
#include "common/cpu.h"
#include "common/fp16.h"
#include "common/util.h"

/* The decoder's mul-then-add must not become a fused multiply-add where the compiler
 * could contract it (clang's default), or the SIMD decoders would not match it. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Values of the rotated first pass (centred on the wrap point); capped at T. */
#define SJK_TRELLIS_TB_PASS1 64

/* ---- dispatch ---------------------------------------------------------------------- */

static sjk_trellis_block_fn g_block = sjk_trellis_block_ref; /* set once under g_once */
static sjk_trellis_decode_token_fn g_decode = NULL, g_decode_ch = NULL;
static const char *g_path = "scalar";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void trellis_init(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned f = sjk_cpu_features();
    if (f & SJK_CPU_AVX512) {
        g_block = sjk_trellis_block_avx512;
        g_decode = sjk_trellis_decode_token_avx512;
        g_decode_ch = sjk_trellis_decode_channel_avx512;
        g_path = "avx512";
    } else if (f & SJK_CPU_AVX2) {
        g_block = sjk_trellis_block_avx2;
        g_decode = sjk_trellis_decode_token_avx2;
        g_path = "avx2";
    }
#endif
}

sjk_trellis_decode_token_fn sjk_trellis_decode_token_get(void)
{
    pthread_once(&g_once, trellis_init);
    return g_decode;
}

sjk_trellis_decode_token_fn sjk_trellis_decode_channel_get(void)
{
    pthread_once(&g_once, trellis_init);
    return g_decode_ch;
}

const char *sjk_trellis_path(void)
{
    pthread_once(&g_once, trellis_init);
    return g_path;
}

/* ---- the scalar reference block ------------------------------------------------------ */

static void block_ref_k(const unsigned k, const float *cb, uint8_t *codes, const float *u,
                        size_t T, size_t stride, const uint8_t *init_state,
                        const uint8_t *end_state, void *work, uint8_t *state_at)
{
    enum { NL = SJK_TRELLIS_LANES };
    const unsigned nb = 1u << k;
    float *first = sjk_trellis_cost_row(work, 0);
    for (unsigned s = 0; s < SJK_TRELLIS_STATES; s++)
        for (unsigned l = 0; l < NL; l++)
            first[s * NL + l] = (!init_state || init_state[l] == s) ? 0.0f : INFINITY;

    for (size_t t = 0; t < T; t++) {
        const float *prev = sjk_trellis_cost_row(work, t);
        float *cur = sjk_trellis_cost_row(work, t + 1);
        uint8_t *bp = sjk_trellis_bp_step(work, t);
        const float *ut = u + t * stride;
        for (unsigned ns = 0; ns < SJK_TRELLIS_STATES; ns++) {
            float acc[NL];
            uint8_t bj[NL];
            for (unsigned l = 0; l < NL; l++) acc[l] = INFINITY, bj[l] = 0;
            /* the first minimum over j (the lowest j on ties) */
            for (unsigned j = 0; j < nb; j++) {
                unsigned w = (ns << k) | j, p = w & 63u;
                float c = cb[w];
                for (unsigned l = 0; l < NL; l++) {
                    float cand = sjk_trellis_cand(ut[l], c, prev[p * NL + l]);
                    if (cand < acc[l]) acc[l] = cand, bj[l] = (uint8_t)j;
                }
            }
            memcpy(cur + ns * NL, acc, sizeof acc);
            for (unsigned l = 0; l < NL; l += 2)
                bp[ns * (NL / 2) + l / 2] = (uint8_t)(bj[l] | bj[l + 1] << 4);
        }
    }
    sjk_trellis_traceback(k, work, codes, T, stride, end_state, state_at);
}

void sjk_trellis_block_ref(const float *cb, unsigned k, uint8_t *codes, const float *u,
                           size_t T, size_t stride, const uint8_t *init_state,
                           const uint8_t *end_state, void *work, uint8_t *state_at)
{
    /* Constant k per instantiation so the inner loops have fixed trip counts. */
    SJK_TRELLIS_WITH_K(k, block_ref_k, cb, codes, u, T, stride, init_state, end_state, work, state_at);
}

/* ---- the search driver -------------------------------------------------------------- */

/* Scratch layout (all float-aligned):
 *   work     two cost rows [2][64][LANES] float, then back-pointers [T][64][LANES/2]
 *            bytes (trellis_impl.h)
 *   urot     [P][LANES] float           (the rotated first pass)
 *   crot     [P][LANES] uint8           (its codes)
 *   st       [(P+1)][LANES] uint8       (its states)
 *   s0       [LANES] uint8              (the wrap state)                               */
static size_t pass1_len(size_t T) { return SJK_MIN((size_t)SJK_TRELLIS_TB_PASS1, T); }

size_t sjk_trellis_scratch_nbytes(size_t T)
{
    if (T < 2 || T > SJK_TRELLIS_MAX_T) return 0;
    size_t P = T; /* room for any first-pass length up to T */
    return sjk_trellis_work_nbytes(T) + P * SJK_TRELLIS_LANES * sizeof(float) +
           P * SJK_TRELLIS_LANES + (P + 1) * SJK_TRELLIS_LANES + SJK_TRELLIS_LANES + 64;
}

static void encode_with(sjk_trellis_block_fn fn, const float *cb, unsigned k,
                        sjk_trellis_start start, uint8_t *codes, const float *u, size_t T,
                        size_t n_seq, size_t stride, void *scratch, size_t P)
{
    enum { NL = SJK_TRELLIS_LANES };
    const size_t h = P / 2;
    void *work = scratch;
    float *urot = (float *)(void *)((uint8_t *)scratch + sjk_trellis_work_nbytes(T));
    uint8_t *crot = (uint8_t *)(urot + T * NL);
    uint8_t *st = crot + T * NL;
    uint8_t *s0 = st + (T + 1) * NL;

    for (size_t b = 0; b < n_seq; b += NL) {
        if (start == SJK_TRELLIS_FIXED) {
            memset(s0, 0, NL);
            fn(cb, k, codes + b, u + b, T, stride, s0, NULL, work, NULL);
            continue;
        }
        /* Pass 1: u[T-h .. T) then u[0 .. P-h); the wrap point is index h. */
        for (size_t i = 0; i < P; i++) {
            size_t t = (i + T - h) % T;
            memcpy(urot + i * NL, u + t * stride + b, NL * sizeof(float));
        }
        fn(cb, k, crot, urot, P, NL, NULL, NULL, work, st);
        memcpy(s0, st + h * NL, NL);
        /* Pass 2: in order, start and end pinned to the wrap state. */
        fn(cb, k, codes + b, u + b, T, stride, s0, s0, work, NULL);
    }
}

void sjk_trellis_encode_on(sjk_trellis_block_fn fn, const float *cb, unsigned k,
                           sjk_trellis_start start, uint8_t *codes, const float *u, size_t T,
                           size_t n_seq, size_t stride, void *scratch)
{
    encode_with(fn ? fn : sjk_trellis_block_ref, cb, k, start, codes, u, T, n_seq, stride,
                scratch, pass1_len(T));
}

void sjk_trellis_encode(const float *cb, unsigned k, sjk_trellis_start start,
                        uint8_t *codes, const float *u, size_t T, size_t n_seq,
                        size_t stride, void *scratch)
{
    pthread_once(&g_once, trellis_init);
    encode_with(g_block, cb, k, start, codes, u, T, n_seq, stride, scratch, pass1_len(T));
}

void sjk_trellis_encode_tb_pass1(const float *cb, unsigned k, uint8_t *codes, const float *u,
                                 size_t T, size_t n_seq, size_t stride, size_t pass1,
                                 void *scratch)
{
    pthread_once(&g_once, trellis_init);
    pass1 = SJK_MAX((size_t)2, SJK_MIN(pass1, T));
    encode_with(g_block, cb, k, SJK_TRELLIS_TAILBITE, codes, u, T, n_seq, stride, scratch, pass1);
}

void sjk_trellis_encode_ref(const float *cb, unsigned k, sjk_trellis_start start,
                            uint8_t *codes, const float *u, size_t T, size_t n_seq,
                            size_t stride, void *scratch)
{
    encode_with(sjk_trellis_block_ref, cb, k, start, codes, u, T, n_seq, stride, scratch,
                pass1_len(T));
}

/* The carried state before value 0: the last 6 bits of the ring (tail-biting) or 0. */
static unsigned start_state_from_codes(const uint8_t *codes, size_t T, size_t stride,
                                       unsigned k, sjk_trellis_start start)
{
    if (start == SJK_TRELLIS_FIXED) return 0;
    /* Run the state update through the whole ring once: after T values the state is the
     * last 6 bits, whatever the start (T*k >= 6). */
    unsigned s = 0;
    for (size_t t = 0; t < T; t++) s = (((unsigned)codes[t * stride] << 6) | s) >> k;
    return s;
}

double sjk_trellis_seq_sse(const float *cb, unsigned k, sjk_trellis_start start,
                           const uint8_t *codes, const float *u, size_t T, size_t stride)
{
    unsigned s = start_state_from_codes(codes, T, stride, k, start);
    double e = 0;
    for (size_t t = 0; t < T; t++) {
        unsigned w = ((unsigned)codes[t * stride] << 6) | s;
        double d = (double)u[t * stride] - cb[w];
        e += d * d;
        s = w >> k;
    }
    return e;
}

/* ---- packing and decoding ---------------------------------------------------------- *
 *
 * Payload order: sequences in groups of 16 (one search block). A group of T steps takes
 * T * 2k bytes; step t of the group is 2k bytes (16 symbols of k bits, little-endian),
 * the symbol of the group's sequence l at bits l*k .. l*k+k-1:
 *
 *   group bytes:  | step 0: 2k bytes | step 1: 2k bytes | ... | step T-1 |
 *   step t:       bit 16k*t + k*l + i  =  bit i of sym[t] of lane l      (LSB first)
 *
 * So one step of 16 sequences is one small load, and a decoder keeps the 16 windows in a
 * vector: w[t] = (sym[t] << 6) | (w[t-1] >> k). */

void sjk_trellis_pack(uint8_t *dst, const uint8_t *codes, size_t T, size_t n_seq,
                      size_t stride, unsigned k)
{
    const uint64_t m = (1u << k) - 1;
    for (size_t g = 0; g < n_seq; g += SJK_TRELLIS_LANES) {
        uint8_t *gd = dst + g / SJK_TRELLIS_LANES * T * 2 * k;
        for (size_t t = 0; t < T; t++) {
            uint64_t acc = 0;
            const uint8_t *c = codes + t * stride + g;
            for (unsigned l = 0; l < SJK_TRELLIS_LANES; l++) acc |= ((uint64_t)c[l] & m) << (l * k);
            for (unsigned i = 0; i < 2 * k; i++) gd[t * 2 * k + i] = (uint8_t)(acc >> (8 * i));
        }
    }
}

/* Symbol t of lane l of a packed group. */
static inline unsigned sym_at(const uint8_t *group, size_t t, unsigned l, unsigned k)
{
    size_t bit = t * 16 * k + (size_t)l * k, byte = bit >> 3;
    unsigned off = (unsigned)(bit & 7);
    unsigned v = group[byte] >> off;
    if (off + k > 8) v |= (unsigned)group[byte + 1] << (8 - off);
    return v & ((1u << k) - 1);
}

/* The carried state before step 0: the last 6 bits of the lane's ring, or 0. */
static unsigned packed_start_state(const uint8_t *group, unsigned l, size_t T, unsigned k,
                                   sjk_trellis_start start)
{
    if (start == SJK_TRELLIS_FIXED) return 0;
    unsigned s = 0;
    size_t first = T - SJK_MIN(T, (size_t)(SJK_TRELLIS_STATE_BITS + k - 1) / k);
    for (size_t t = first; t < T; t++) s = ((sym_at(group, t, l, k) << 6) | s) >> k;
    return s;
}

void sjk_trellis_windows(uint16_t *w, const uint8_t *group, unsigned lane, size_t T,
                         unsigned k, sjk_trellis_start start)
{
    unsigned s = packed_start_state(group, lane, T, k, start);
    for (size_t t = 0; t < T; t++) {
        unsigned win = (sym_at(group, t, lane, k) << 6) | s;
        w[t] = (uint16_t)win;
        s = win >> k;
    }
}

void sjk_trellis_decode_seq(float *out, size_t out_stride, const float *cb, unsigned k,
                            sjk_trellis_start start, const uint8_t *group, unsigned lane,
                            size_t T)
{
    unsigned s = packed_start_state(group, lane, T, k, start);
    for (size_t t = 0; t < T; t++) {
        unsigned win = (sym_at(group, t, lane, k) << 6) | s;
        out[t * out_stride] = cb[win];
        s = win >> k;
    }
}

/* Pair tables (trellis.h): for every window w and next symbol s', the two values; one
 * per known table (set 0: the committed C_k, 1: the real-data K table, 2: the V table,
 * 3..5: the int8 grids of 0..2, 6: the 128-entry table). */
static const float *float_set(unsigned set, unsigned k)
{
    return set == 0 ? sjk_trellis_codebook(k) : set < SJK_TRELLIS_CB_FLOAT_SETS ? sjk_trellis_codebook_real(k, set == 2) : NULL;
}

/* The grid tables (trellis.h): sets 3..5 the int8 grids of the float sets
 * (sjk_trellis_codebook_grid), set 6 the 128-entry tables expanded over the windows
 * (sjk_trellis_codebook_s128). Index set - SJK_TRELLIS_CB_FLOAT_SETS. */
static float g_grid[SJK_TRELLIS_CB_GRID_SETS][3][64 << 4];
static int8_t g_grid8[SJK_TRELLIS_CB_GRID_SETS][3][64 << 4];
static float g_grid_step[SJK_TRELLIS_CB_GRID_SETS][3];
static pthread_once_t g_grid_once = PTHREAD_ONCE_INIT;

static void grid_build(void)
{
    for (unsigned set = 0; set < SJK_TRELLIS_CB_FLOAT_SETS; set++)
        for (unsigned k = 2; k <= 4; k++) {
            const float *cb = float_set(set, k);
            const size_t n = SJK_TRELLIS_CB_SIZE(k);
            float mx = 0;
            for (size_t w = 0; w < n; w++) mx = fabsf(cb[w]) > mx ? fabsf(cb[w]) : mx;
            const float step = mx / 127.0f;
            g_grid_step[set][k - 2] = step;
            for (size_t w = 0; w < n; w++) {
                float c = nearbyintf(cb[w] / step);
                c = c > 127 ? 127 : c < -127 ? -127 : c;
                g_grid8[set][k - 2][w] = (int8_t)c;
                g_grid[set][k - 2][w] = c * step;
            }
        }
    const unsigned s = SJK_TRELLIS_CB_SET_S128 - SJK_TRELLIS_CB_FLOAT_SETS;
    for (unsigned k = 2; k <= 4; k++) {
        float step;
        const int8_t *a = sjk_trellis_s128_table(k, &step);
        g_grid_step[s][k - 2] = step;
        for (unsigned w = 0; w < SJK_TRELLIS_CB_SIZE(k); w++) {
            const int8_t c = a[sjk_trellis_s128_index(k, w)];
            g_grid8[s][k - 2][w] = c;
            g_grid[s][k - 2][w] = (float)c * step;
        }
    }
}

const float *sjk_trellis_codebook_grid(const float *cb, unsigned k)
{
    if (!cb || k < 2 || k > 4) return NULL;
    for (unsigned set = 0; set < SJK_TRELLIS_CB_FLOAT_SETS; set++)
        if (cb == float_set(set, k)) {
            pthread_once(&g_grid_once, grid_build);
            return g_grid[set][k - 2];
        }
    return NULL;
}

const float *sjk_trellis_codebook_s128(unsigned k)
{
    if (k < 2 || k > 4) return NULL;
    pthread_once(&g_grid_once, grid_build);
    return g_grid[SJK_TRELLIS_CB_SET_S128 - SJK_TRELLIS_CB_FLOAT_SETS][k - 2];
}

const int8_t *sjk_trellis_codebook_i8(const float *cb, unsigned k, float *step)
{
    if (!cb || k < 2 || k > 4) return NULL;
    pthread_once(&g_grid_once, grid_build);
    for (unsigned set = 0; set < SJK_TRELLIS_CB_GRID_SETS; set++)
        if (cb == g_grid[set][k - 2]) {
            if (step) *step = g_grid_step[set][k - 2];
            return g_grid8[set][k - 2];
        }
    return NULL;
}

const float *sjk_trellis_codebook_of_set(unsigned set, unsigned k)
{
    if (set < SJK_TRELLIS_CB_FLOAT_SETS) return float_set(set, k);
    if (set == SJK_TRELLIS_CB_SET_S128) return sjk_trellis_codebook_s128(k);
    if (set < SJK_TRELLIS_CB_SETS) return sjk_trellis_codebook_grid(float_set(set - SJK_TRELLIS_CB_FLOAT_SETS, k), k);
    return NULL;
}

int sjk_trellis_codebook_set(const float *cb, unsigned k)
{
    if (!cb || k < 2 || k > 4) return -1;
    for (unsigned set = 0; set < SJK_TRELLIS_CB_SETS; set++)
        if (cb == sjk_trellis_codebook_of_set(set, k)) return (int)set;
    return -1;
}

static uint64_t g_pair2[SJK_TRELLIS_CB_SETS][1u << 10], g_pair3[SJK_TRELLIS_CB_SETS][1u << 12],
    g_pair4[SJK_TRELLIS_CB_SETS][1u << 14];
static pthread_once_t g_pair_once[SJK_TRELLIS_CB_SETS][3] = {
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT},
    {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT}};
_Static_assert(SJK_TRELLIS_CB_SETS == 7, "one row of g_pair_once and of init[] per set");

static void pair_build(uint64_t *P, const float *cb, unsigned k)
{
    const unsigned L = SJK_TRELLIS_STATE_BITS + k;
    for (unsigned w = 0; w < (1u << L); w++)
        for (unsigned s1 = 0; s1 < (1u << k); s1++) {
            const unsigned w1 = (s1 << SJK_TRELLIS_STATE_BITS) | (w >> k);
            uint32_t a, b;
            memcpy(&a, cb + w, 4);
            memcpy(&b, cb + w1, 4);
            P[w | (s1 << L)] = (uint64_t)a | ((uint64_t)b << 32);
        }
}

static uint64_t *pair_of(unsigned set, unsigned k)
{
    return k == 2 ? g_pair2[set] : k == 3 ? g_pair3[set] : g_pair4[set];
}

/* pthread_once takes no argument: one function per (set, k). */
#define PAIR_INIT(S, K) \
    static void pair_init_##S##_##K(void) { pair_build(pair_of(S, K), sjk_trellis_codebook_of_set(S, K), K); }
PAIR_INIT(0, 2) PAIR_INIT(0, 3) PAIR_INIT(0, 4)
PAIR_INIT(1, 2) PAIR_INIT(1, 3) PAIR_INIT(1, 4)
PAIR_INIT(2, 2) PAIR_INIT(2, 3) PAIR_INIT(2, 4)
PAIR_INIT(3, 2) PAIR_INIT(3, 3) PAIR_INIT(3, 4)
PAIR_INIT(4, 2) PAIR_INIT(4, 3) PAIR_INIT(4, 4)
PAIR_INIT(5, 2) PAIR_INIT(5, 3) PAIR_INIT(5, 4)
PAIR_INIT(6, 2) PAIR_INIT(6, 3) PAIR_INIT(6, 4)
#undef PAIR_INIT

/* Each table is built on its first use (the 128 KiB of k = 4 only by a caller that asks). */
const uint64_t *sjk_trellis_pair_table_of(const float *cb, unsigned k)
{
    static void (*const init[SJK_TRELLIS_CB_SETS][3])(void) = {
        {pair_init_0_2, pair_init_0_3, pair_init_0_4},
        {pair_init_1_2, pair_init_1_3, pair_init_1_4},
        {pair_init_2_2, pair_init_2_3, pair_init_2_4},
        {pair_init_3_2, pair_init_3_3, pair_init_3_4},
        {pair_init_4_2, pair_init_4_3, pair_init_4_4},
        {pair_init_5_2, pair_init_5_3, pair_init_5_4},
        {pair_init_6_2, pair_init_6_3, pair_init_6_4}};
    const int set = sjk_trellis_codebook_set(cb, k);
    if (set < 0) return NULL;
    pthread_once(&g_pair_once[set][k - 2], init[set][k - 2]);
    return pair_of((unsigned)set, k);
}

const uint64_t *sjk_trellis_pair_table(unsigned k)
{
    return k < 2 || k > 4 ? NULL : sjk_trellis_pair_table_of(sjk_trellis_codebook(k), k);
}

/* ---- the tile layer ---------------------------------------------------------------- */

static int tile_ok(const sjk_trellis_tile *tt)
{
    return tt && tt->bits >= 2 && tt->bits <= 4 && tt->D >= 16 && tt->D <= 4096 &&
           tt->D % SJK_TRELLIS_LANES == 0 && tt->G >= 16 && tt->G <= 4096 &&
           tt->G % SJK_TRELLIS_LANES == 0 && tt->rows <= SJK_TRELLIS_ROWS_TOKENS &&
           tt->axis <= SJK_TRELLIS_AXIS_CHANNEL && tt->refit <= SJK_TRELLIS_REFIT_NONE;
}

size_t sjk_trellis_tile_payload_nbytes(const sjk_trellis_tile *tt)
{
    if (!tile_ok(tt)) return 0;
    return (size_t)tt->D * tt->G * tt->bits / 8;
}

/* Tile scratch: normalised/transposed values [D*G] floats (after the search the same
 * floats hold the decoded values), per-row stats, codes [D*G] bytes, then the search
 * scratch. */
size_t sjk_trellis_tile_scratch_nbytes(const sjk_trellis_tile *tt)
{
    if (!tile_ok(tt)) return 0;
    size_t n = (size_t)tt->D * tt->G;
    size_t T = tt->axis == SJK_TRELLIS_AXIS_TOKEN ? tt->G : tt->D;
    size_t nrows = SJK_MAX(tt->D, tt->G);
    size_t cb = 0;
    cb += n * sizeof(float);            /* u (search layout), then c (decoded, [t][d]) */
    cb += 2 * nrows * sizeof(float);    /* provisional mean, 1/std */
    cb += n;                            /* codes */
    cb = (cb + 63) & ~(size_t)63;
    return cb + sjk_trellis_scratch_nbytes(T);
}

typedef struct tile_view {
    size_t D, G, T, n_seq, nrows;
    int rows_are_channels, token_axis;
    double peak; /* the K rows' peak guard (tile_normalize); 0: none */
} tile_view;

static tile_view view_of(const sjk_trellis_tile *tt)
{
    tile_view v;
    v.D = tt->D;
    v.G = tt->G;
    v.token_axis = tt->axis == SJK_TRELLIS_AXIS_TOKEN;
    v.rows_are_channels = tt->rows == SJK_TRELLIS_ROWS_CHANNELS;
    v.T = v.token_axis ? v.G : v.D;
    v.n_seq = v.token_axis ? v.D : v.G;
    v.nrows = v.rows_are_channels ? v.D : v.G;
    v.peak = 0;
    return v;
}

/* The codebook values of a packed tile, token-major c[t*D + d]. */
static void decode_values(const tile_view *v, float *c, const float *cb, unsigned k,
                          const uint8_t *payload)
{
    const size_t group_nbytes = v->T * 2 * k;
    for (size_t s = 0; s < v->n_seq; s++) {
        const uint8_t *g = payload + s / SJK_TRELLIS_LANES * group_nbytes;
        unsigned l = (unsigned)(s % SJK_TRELLIS_LANES);
        if (v->token_axis) sjk_trellis_decode_seq(c + s, v->D, cb, k, SJK_TRELLIS_TAILBITE, g, l, v->T);
        else sjk_trellis_decode_seq(c + s * v->D, 1, cb, k, SJK_TRELLIS_TAILBITE, g, l, v->T);
    }
}

/* Clamp to the finite fp16 range and round; never stores Inf. */
static float fp16_clamped(double x)
{
    if (!(x == x)) x = 0;
    if (x > 65504.0) x = 65504.0;
    if (x < -65504.0) x = -65504.0;
    return sjk_round_fp16((float)x);
}

/* Value (t, d) of the tile as the input view gives it: x[t*st + d*sd], times the factor
 * of its token or channel when there is one (one float multiply, as a caller that
 * stored the products would have rounded them). */
static inline float in_at(const sjk_trellis_input *in, size_t t, size_t d)
{
    float x = in->x[t * in->st + d * in->sd];
    return in->mul ? x * in->mul[in->mul_on_token ? t : d] : x;
}

/* The tile observer (sjk_trellis_set_observer): set before any tile is coded, so plain
 * globals read by the coding threads. */
static sjk_trellis_tile_observer g_observer;
static void *g_observer_ctx;

void sjk_trellis_set_observer(sjk_trellis_tile_observer fn, void *ctx)
{
    g_observer = fn;
    g_observer_ctx = ctx;
}

/* The K rows' peak guard. A K row (one channel's 128 tokens) whose largest deviation
 * from its mean passes SJK_TRELLIS_PEAK_Z standard deviations is normalised by
 * |x - mean|max / (g * max|C|) instead, so that the deviation lands at g = 0.8 of the
 * codebook's largest entry (4-bit tiles only; 2- and 3-bit tiles and V rows keep the
 * plain map). With the standard deviation alone a row's extremes fall past the outer
 * entries of a table trained on N(0, 1) and the search pays for them with errors of
 * 0.2-1.0 standard deviations, where the scalar body (whose range is the row's min..max)
 * codes them best of all its values; and the extreme keys are the ones that win
 * attention. Measured on the 1,288 balanced K tiles of Qwen2.5-Coder-1.5B on code-0 at
 * 4K (`sjkvarn capture-tiles`, the 4-bit grid table): the tile SNR 22.47 -> 22.60 dB, the
 * rms error at |z| 3.0-3.5 0.23 -> 0.16 standard deviations and at |z| > 4.5 1.0 -> 0.14;
 * on i.i.d. Gaussian tiles the SNR moves by less than 0.1 dB (most Gaussian rows stay
 * under the threshold). The guard on every row (g = 0.6) had cut the same model's KL
 * with the body's keys coded to 0.79x, but cost 0.5 dB on Gaussian tiles. This rule took
 * the Qwen model's 4/4t KL to 0.64-0.88x on three documents and left Gemma 3's level
 * (0.82-1.22x, 0.96x pooled); at 3 bits (g = 0.9) it raised Gemma's KL on every
 * comparison (1.07-1.20x), so 3-bit tiles keep the plain map (4K and 16K probes,
 * docs/studies/qwen2.5-coder-1.5b.md, "The trellis keys' extremes"). The tile asks for
 * it (peak_guard): the record layer sets it for the int8-grid bodies (t, tr, ts), and
 * the float-table bodies of the older record formats (tf, trf, tc) keep the plain map, so
 * that this build still writes an old writer's bytes for them
 * (tests/test_record_v1_fixture.c). */
#define SJK_TRELLIS_PEAK_Z 3.0
static double peak_guard(const float *cb, unsigned k)
{
    static const double g[5] = {0, 0, 0, 0, 0.80};
    if (k > 4 || g[k] == 0) return 0;
    double cmax = 0;
    for (size_t w = 0; w < ((size_t)64 << k); w++) cmax = fmax(cmax, fabs((double)cb[w]));
    return g[k] * cmax;
}

/* Steps 1 and 2 of the tile encode: each row's provisional map (mean and biased standard
 * deviation, in double; for K rows raised by the peak guard above) and the normalised
 * values in the search layout. */
static void tile_normalize(const tile_view *vp, const sjk_trellis_input *in, float *u, float *mean, float *istd)
{
    const tile_view v = *vp;
    /* 1. Provisional row map: mean and standard deviation (biased), in double. */
    for (size_t r = 0; r < v.nrows; r++) {
        double s = 0, s2 = 0;
        size_t m = v.rows_are_channels ? v.G : v.D;
        for (size_t i = 0; i < m; i++) {
            double x = v.rows_are_channels ? in_at(in, i, r) : in_at(in, r, i);
            s += x;
        }
        double mu = s / (double)m, dev = 0; /* dev: the largest |x - mu| */
        for (size_t i = 0; i < m; i++) {
            double x = (v.rows_are_channels ? in_at(in, i, r) : in_at(in, r, i)) - mu;
            s2 += x * x;
            dev = fmax(dev, fabs(x));
        }
        double sd = sqrt(s2 / (double)m);
        if (v.peak > 0 && v.rows_are_channels && dev > SJK_TRELLIS_PEAK_Z * sd) sd = fmax(sd, dev / v.peak);
        mean[r] = (float)mu;
        istd[r] = sd > 1e-30 ? (float)(1.0 / sd) : 0.0f;
    }
    /* 2. Normalise into the search layout. */
    for (size_t t = 0; t < v.G; t++) {
        for (size_t d = 0; d < v.D; d++) {
            size_t r = v.rows_are_channels ? d : t;
            float x = (in_at(in, t, d) - mean[r]) * istd[r];
            if (v.token_axis) u[t * v.D + d] = x;
            else u[d * v.G + t] = x;
        }
    }
}

sjk_status sjk_trellis_tile_normalize(const sjk_trellis_tile *tt, const sjk_trellis_input *in, float *u,
                                      float *mean, float *istd)
{
    if (!tile_ok(tt) || !in || !in->x || !u || !mean || !istd) return SJK_ERR_PARAM;
    tile_view v = view_of(tt);
    const float *cb = sjk_trellis_codebook(tt->bits);
    v.peak = cb && tt->peak_guard ? peak_guard(cb, tt->bits) : 0;
    tile_normalize(&v, in, u, mean, istd);
    return SJK_OK;
}

/* The tile encode with a given codebook (cb of 64 << bits entries; NULL: the committed one). */
static sjk_status tile_encode_with(sjk_trellis_encode_fn enc, const float *cb, const sjk_trellis_tile *tt,
                                   uint8_t *payload, float *row_scale, float *row_zero,
                                   const sjk_trellis_input *in, void *scratch, size_t scratch_nbytes)
{
    if (!tile_ok(tt) || !payload || !row_scale || !row_zero || !in || !in->x || !scratch)
        return SJK_ERR_PARAM;
    size_t need = sjk_trellis_tile_scratch_nbytes(tt);
    if (scratch_nbytes < need) return SJK_ERR_BUFFER;
    if (!cb) cb = sjk_trellis_codebook(tt->bits);
    if (!cb) return SJK_ERR_UNSUPPORTED;
    if (g_observer) g_observer(g_observer_ctx, tt, in);
    tile_view v = view_of(tt);
    v.peak = tt->peak_guard ? peak_guard(cb, tt->bits) : 0;
    const unsigned k = tt->bits;
    const size_t n = v.D * v.G;

    float *u = (float *)scratch;      /* [T][n_seq] search layout */
    float *c = u;                     /* [G][D] decoded codebook values, once u is spent */
    float *mean = u + n;              /* [nrows] */
    float *istd = mean + SJK_MAX(v.D, v.G);
    uint8_t *codes = (uint8_t *)(istd + SJK_MAX(v.D, v.G));
    uintptr_t sp = (uintptr_t)(codes + n);
    sp = (sp + 63) & ~(uintptr_t)63;
    void *search = (void *)sp;

    tile_normalize(&v, in, u, mean, istd);
    /* 3. Search, pack, decode back the codebook values. */
    enc(cb, k, SJK_TRELLIS_TAILBITE, codes, u, v.T, v.n_seq, v.n_seq, search);
    sjk_trellis_pack(payload, codes, v.T, v.n_seq, v.n_seq, k);
    decode_values(&v, c, cb, k, payload);
    /* 4. Refit each row's affine map with the codes fixed. */
    for (size_t r = 0; r < v.nrows; r++) {
        size_t m = v.rows_are_channels ? v.G : v.D;
        double sx = 0, sc = 0;
        for (size_t i = 0; i < m; i++) {
            size_t idx = v.rows_are_channels ? i * v.D + r : r * v.D + i;
            sx += v.rows_are_channels ? in_at(in, i, r) : in_at(in, r, i);
            sc += c[idx];
        }
        double mx = sx / (double)m, mc = sc / (double)m, sxc = 0, scc = 0, sxx = 0;
        for (size_t i = 0; i < m; i++) {
            size_t idx = v.rows_are_channels ? i * v.D + r : r * v.D + i;
            double dx = (double)(v.rows_are_channels ? in_at(in, i, r) : in_at(in, r, i)) - mx, dc = c[idx] - mc;
            sxc += dx * dc;
            scc += dc * dc;
            sxx += dx * dx;
        }
        double a;
        switch (tt->refit) {
        case SJK_TRELLIS_REFIT_MOMENT: a = scc > 0 ? sqrt(sxx / scc) : 0; break;
        case SJK_TRELLIS_REFIT_NONE: a = istd[r] > 0 ? 1.0 / istd[r] : 0; break;
        default: a = scc > 0 ? sxc / scc : 0; break;
        }
        float a16 = fp16_clamped(a);
        /* Every mode keeps the row mean: the offset is computed for the stored (rounded)
         * scale, which is also the least-squares offset given that scale. */
        row_scale[r] = a16;
        row_zero[r] = fp16_clamped(mx - (double)a16 * mc);
    }
    return SJK_OK;
}

static sjk_trellis_input token_major(const sjk_trellis_tile *tt, const float *y)
{
    sjk_trellis_input in = {y, tt ? tt->D : 0, 1, NULL, 0};
    return in;
}

sjk_status sjk_trellis_tile_encode(const sjk_trellis_tile *tt, uint8_t *payload,
                                   float *row_scale, float *row_zero, const float *y,
                                   void *scratch, size_t scratch_nbytes)
{
    sjk_trellis_input in = token_major(tt, y);
    return tile_encode_with(sjk_trellis_encode, NULL, tt, payload, row_scale, row_zero, &in, scratch,
                            scratch_nbytes);
}

sjk_status sjk_trellis_tile_encode_in(const sjk_trellis_tile *tt, uint8_t *payload,
                                      float *row_scale, float *row_zero, const sjk_trellis_input *in,
                                      void *scratch, size_t scratch_nbytes)
{
    return tile_encode_with(sjk_trellis_encode, NULL, tt, payload, row_scale, row_zero, in, scratch,
                            scratch_nbytes);
}

sjk_status sjk_trellis_tile_encode_on(sjk_trellis_encode_fn enc, const sjk_trellis_tile *tt,
                                      uint8_t *payload, float *row_scale, float *row_zero,
                                      const float *y, void *scratch, size_t scratch_nbytes)
{
    if (!enc) return SJK_ERR_PARAM;
    sjk_trellis_input in = token_major(tt, y);
    return tile_encode_with(enc, NULL, tt, payload, row_scale, row_zero, &in, scratch, scratch_nbytes);
}

sjk_status sjk_trellis_tile_encode_cb(const float *cb, const sjk_trellis_tile *tt, uint8_t *payload,
                                      float *row_scale, float *row_zero, const sjk_trellis_input *in,
                                      void *scratch, size_t scratch_nbytes)
{
    if (!cb) return SJK_ERR_PARAM;
    return tile_encode_with(sjk_trellis_encode, cb, tt, payload, row_scale, row_zero, in, scratch,
                            scratch_nbytes);
}

sjk_status sjk_trellis_tile_encode_ref(const sjk_trellis_tile *tt, uint8_t *payload,
                                       float *row_scale, float *row_zero, const float *y,
                                       void *scratch, size_t scratch_nbytes)
{
    sjk_trellis_input in = token_major(tt, y);
    return tile_encode_with(sjk_trellis_encode_ref, NULL, tt, payload, row_scale, row_zero, &in,
                            scratch, scratch_nbytes);
}

static sjk_status tile_decode_with(sjk_trellis_decode_token_fn fast, sjk_trellis_decode_token_fn fast_ch,
                                   const float *cb, const sjk_trellis_tile *tt,
                                   float *out, const uint8_t *payload, const float *row_scale,
                                   const float *row_zero, const float *col_scale)
{
    if (!tile_ok(tt) || !out || !payload || !row_scale || !row_zero) return SJK_ERR_PARAM;
    if (!cb) cb = sjk_trellis_codebook(tt->bits);
    if (!cb) return SJK_ERR_UNSUPPORTED;
    const tile_view v = view_of(tt);
    const unsigned k = tt->bits;
    if (v.token_axis ? fast != NULL : fast_ch != NULL) {
        (v.token_axis ? fast : fast_ch)(out, v.D, v.G, cb, k, payload, row_scale, row_zero, col_scale,
                                        v.rows_are_channels);
        return SJK_OK;
    }
    decode_values(&v, out, cb, k, payload);
    for (size_t t = 0; t < v.G; t++) {
        float *o = out + t * v.D;
        if (v.rows_are_channels) {
            float ct = col_scale ? col_scale[t] : 1.0f;
            for (size_t d = 0; d < v.D; d++) o[d] = (o[d] * row_scale[d] + row_zero[d]) * ct;
        } else {
            float a = row_scale[t], b = row_zero[t];
            if (col_scale)
                for (size_t d = 0; d < v.D; d++) o[d] = (o[d] * a + b) * col_scale[d];
            else
                for (size_t d = 0; d < v.D; d++) o[d] = o[d] * a + b;
        }
    }
    return SJK_OK;
}

sjk_status sjk_trellis_tile_decode(const sjk_trellis_tile *tt, float *out,
                                   const uint8_t *payload, const float *row_scale,
                                   const float *row_zero, const float *col_scale)
{
    return tile_decode_with(sjk_trellis_decode_token_get(), sjk_trellis_decode_channel_get(), NULL, tt,
                            out, payload, row_scale, row_zero, col_scale);
}

sjk_status sjk_trellis_tile_decode_ref(const sjk_trellis_tile *tt, float *out,
                                       const uint8_t *payload, const float *row_scale,
                                       const float *row_zero, const float *col_scale)
{
    return tile_decode_with(NULL, NULL, NULL, tt, out, payload, row_scale, row_zero, col_scale);
}

sjk_status sjk_trellis_tile_decode_cb(const float *cb, const sjk_trellis_tile *tt, float *out,
                                      const uint8_t *payload, const float *row_scale,
                                      const float *row_zero, const float *col_scale)
{
    if (!cb) return SJK_ERR_PARAM;
    return tile_decode_with(sjk_trellis_decode_token_get(), sjk_trellis_decode_channel_get(), cb, tt,
                            out, payload, row_scale, row_zero, col_scale);
}
