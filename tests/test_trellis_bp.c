/* test_trellis_bp.c — the back-pointer search gives the codes of the algorithm it
 * replaced, byte for byte, on every kernel path.
 *
 * The reference below is the search as it was until 2026-12 (trellis.c at 99f372a):
 * the forward pass kept the whole float cost history [(T+1)][64][16] and the traceback
 * re-derived each step's choice from it, taking the first minimum over the 2^k
 * candidates. It is kept here, and only here, so that the new search (two cost rows and
 * 4-bit back-pointers, trellis.c / trellis_impl.h / trellis_x86.h) is held to it: the
 * scalar reference, the AVX2 and the AVX-512 kernels (whatever this CPU runs), as blocks
 * (with their states), through the two-pass tail-biting driver, and through the tile
 * layer (payload and row maps) on Gaussian, outlier, constant, tied, huge and
 * non-finite inputs. */
#include <math.h>
#include <stdlib.h>

#include "codec/record.h"
#include "codec/record_layout.h"
#include "codec/trellis.h"
#include "codec/trellis_impl.h"
#include "common/fp16.h"
#include "common/rng.h"
#include "common/synth.h"
#include "harness.h"
#include "sjkvarn.h"

enum { NL = SJK_TRELLIS_LANES, OLD_PASS1 = 64 };

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

/* ---- the old algorithm (reference) ----------------------------------------------- */

static void old_block(unsigned k, const float *cb, uint8_t *codes, const float *u, size_t T,
                      size_t stride, const uint8_t *init_state, const uint8_t *end_state,
                      float *hist, uint8_t *state_at)
{
    const unsigned nb = 1u << k, sh = SJK_TRELLIS_STATE_BITS - k;
    const size_t SF = SJK_TRELLIS_STEP_FLOATS;
    for (unsigned s = 0; s < SJK_TRELLIS_STATES; s++)
        for (unsigned l = 0; l < NL; l++)
            hist[s * NL + l] = (!init_state || init_state[l] == s) ? 0.0f : INFINITY;
    for (size_t t = 0; t < T; t++) {
        const float *prev = hist + t * SF;
        float *cur = hist + (t + 1) * SF;
        for (unsigned ns = 0; ns < SJK_TRELLIS_STATES; ns++) {
            float acc[NL];
            for (unsigned l = 0; l < NL; l++) acc[l] = INFINITY;
            for (unsigned j = 0; j < nb; j++) {
                unsigned w = (ns << k) | j, p = w & 63u;
                for (unsigned l = 0; l < NL; l++) {
                    float cand = sjk_trellis_cand(u[t * stride + l], cb[w], prev[p * NL + l]);
                    acc[l] = cand < acc[l] ? cand : acc[l];
                }
            }
            memcpy(cur + ns * NL, acc, sizeof acc);
        }
    }
    for (unsigned l = 0; l < NL; l++) {
        unsigned s = 0;
        if (end_state) {
            s = end_state[l];
        } else {
            const float *last = hist + T * SF;
            for (unsigned q = 1; q < SJK_TRELLIS_STATES; q++)
                if (last[q * NL + l] < last[s * NL + l]) s = q;
        }
        for (size_t t = T; t-- > 0;) {
            const float *prev = hist + t * SF;
            if (state_at) state_at[(t + 1) * NL + l] = (uint8_t)s;
            codes[t * stride + l] = (uint8_t)(s >> sh);
            float best = INFINITY;
            unsigned bj = 0;
            for (unsigned j = 0; j < nb; j++) {
                unsigned w = (s << k) | j, p = w & 63u;
                float cand = sjk_trellis_cand(u[t * stride + l], cb[w], prev[p * NL + l]);
                if (cand < best) { best = cand; bj = j; }
            }
            s = ((s << k) | bj) & 63u;
        }
        if (state_at) state_at[l] = (uint8_t)s;
    }
}

static size_t old_scratch_nbytes(size_t T)
{
    return (T + 1) * SJK_TRELLIS_STEP_FLOATS * sizeof(float) + T * NL * sizeof(float) + T * NL +
           (T + 1) * NL + NL + 64;
}

/* The old two-pass driver (sjk_trellis_encode's signature, so the tile layer can call it). */
static void old_encode(const float *cb, unsigned k, sjk_trellis_start start, uint8_t *codes,
                       const float *u, size_t T, size_t n_seq, size_t stride, void *scratch)
{
    const size_t P = T < OLD_PASS1 ? T : OLD_PASS1, h = P / 2;
    float *hist = scratch;
    float *urot = hist + (T + 1) * SJK_TRELLIS_STEP_FLOATS;
    uint8_t *crot = (uint8_t *)(urot + T * NL), *st = crot + T * NL, *s0 = st + (T + 1) * NL;
    for (size_t b = 0; b < n_seq; b += NL) {
        if (start == SJK_TRELLIS_FIXED) {
            memset(s0, 0, NL);
            old_block(k, cb, codes + b, u + b, T, stride, s0, NULL, hist, NULL);
            continue;
        }
        for (size_t i = 0; i < P; i++)
            memcpy(urot + i * NL, u + ((i + T - h) % T) * stride + b, NL * sizeof(float));
        old_block(k, cb, crot, urot, P, NL, NULL, NULL, hist, st);
        memcpy(s0, st + h * NL, NL);
        old_block(k, cb, codes + b, u + b, T, stride, s0, s0, hist, NULL);
    }
}

/* ---- the paths under test --------------------------------------------------------- */

typedef struct path {
    const char *name;
    sjk_trellis_block_fn fn;
} path;

static int n_paths(path *p)
{
    int n = 0;
    p[n++] = (path){"scalar", sjk_trellis_block_ref};
    /* what the hardware has, whatever SJK_CPU_DISABLE says */
    __builtin_cpu_init();
    int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int has512 = has2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (has2) p[n++] = (path){"avx2", sjk_trellis_block_avx2};
    if (has512) p[n++] = (path){"avx512", sjk_trellis_block_avx512};
    return n;
}

/* Inputs [T][n_seq], by kind. Every kind is finite except NONFINITE. */
enum { GAUSS, OUTLIER, CONSTANT, GRID, CODEBOOK, HUGE, NONFINITE, N_KINDS };
static const char *const kind_name[N_KINDS] = {"gaussian", "outliers", "constant", "grid (ties)",
                                               "codebook values (ties)", "huge (inf costs)",
                                               "nan/inf"};

static void fill(float *u, size_t T, size_t n_seq, int kind, unsigned k, uint64_t seed)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    const float *cb = sjk_trellis_codebook(k);
    const size_t n = T * n_seq, ncb = SJK_TRELLIS_CB_SIZE(k);
    for (size_t i = 0; i < n; i++) {
        float g = (float)sjk_rng_normal(&r);
        switch (kind) {
        case GAUSS: u[i] = g; break;
        case OUTLIER: u[i] = sjk_rng_u64(&r) % 29 == 0 ? g * 40.0f : g; break;
        case CONSTANT: /* whole sequences constant (zero: a constant row normalised) */
            u[i] = (i % n_seq) % 3 == 0 ? 0.0f : (i % n_seq) % 3 == 1 ? 0.75f : g; break;
        case GRID: u[i] = roundf(g * 2.0f) * 0.5f; break;
        case CODEBOOK: u[i] = cb[sjk_rng_u64(&r) % ncb]; break;
        case HUGE: u[i] = sjk_rng_u64(&r) % 7 == 0 ? g * 3e19f : g; break;
        default: {
            uint64_t x = sjk_rng_u64(&r) % 41;
            u[i] = x == 0 ? NAN : x == 1 ? INFINITY : x == 2 ? -INFINITY : g;
        }
        }
    }
}

/* ---- tests ------------------------------------------------------------------------- */

/* Blocks: every mode (free, fixed start, start and end pinned), codes and states. */
TEST(test_trellis_bp_blocks_equal_old)
{
    path P[3];
    const int np = n_paths(P);
    const size_t Ts[] = {2, 3, 20, 64, 128, 256}; /* light (sanitizers): the first three */
    const size_t nseq = 32, Tmax = 256;
    float *u = xalloc(Tmax * nseq * sizeof(float));
    float *hist = xalloc(old_scratch_nbytes(Tmax));
    void *work = xalloc(sjk_trellis_work_nbytes(Tmax));
    uint8_t *c_old = xalloc(Tmax * nseq), *c_new = xalloc(Tmax * nseq);
    uint8_t *st_old = xalloc((Tmax + 1) * NL), *st_new = xalloc((Tmax + 1) * NL), s0[NL];
    const size_t n_T = test_light() ? 3 : sizeof Ts / sizeof Ts[0];
    size_t blocks = 0;
    for (unsigned k = 2; k <= 4; k++) {
        const float *cb = sjk_trellis_codebook(k);
        for (size_t ti = 0; ti < n_T; ti++) {
            const size_t T = Ts[ti];
            for (int kind = 0; kind < N_KINDS; kind++) {
                fill(u, T, nseq, kind, k, 1000 * k + 10 * ti + (uint64_t)kind);
                for (int mode = 0; mode < 3; mode++) {
                    for (unsigned l = 0; l < NL; l++) s0[l] = (uint8_t)((l * 37 + k + ti) & 63);
                    const uint8_t *init = mode == 0 ? NULL : s0, *end = mode == 2 ? s0 : NULL;
                    old_block(k, cb, c_old, u, T, nseq, init, end, hist, st_old);
                    for (int p = 0; p < np; p++) {
                        memset(c_new, 0xEE, T * nseq);
                        memset(st_new, 0xEE, (T + 1) * NL);
                        P[p].fn(cb, k, c_new, u, T, nseq, init, end, work, st_new);
                        int same = 1;
                        for (size_t t = 0; t < T; t++)
                            if (memcmp(c_old + t * nseq, c_new + t * nseq, NL)) same = 0;
                        CHECKF(same, "%s k=%u T=%zu %s mode=%d: codes differ", P[p].name, k, T,
                               kind_name[kind], mode);
                        CHECKF(!memcmp(st_old, st_new, (T + 1) * NL), "%s k=%u T=%zu %s mode=%d: states differ",
                               P[p].name, k, T, kind_name[kind], mode);
                        blocks++;
                    }
                }
            }
        }
    }
    printf("     %zu blocks on %d path(s), %d input kinds: identical codes and states\n", blocks, np, N_KINDS);
    free(u); free(hist); free(work); free(c_old); free(c_new); free(st_old); free(st_new);
}

/* The two-pass tail-biting driver and the fixed start, many sequences. */
TEST(test_trellis_bp_driver_equals_old)
{
    path P[3];
    const int np = n_paths(P);
    const size_t T = test_light() ? 48 : 128, nseq = test_light() ? 16 : 64;
    float *u = xalloc(T * nseq * sizeof(float));
    void *s_old = xalloc(old_scratch_nbytes(T)), *s_new = xalloc(sjk_trellis_scratch_nbytes(T));
    uint8_t *c_old = xalloc(T * nseq), *c_new = xalloc(T * nseq);
    for (unsigned k = 2; k <= 4; k++) {
        const float *cb = sjk_trellis_codebook(k);
        for (int kind = 0; kind < N_KINDS; kind++) {
            if (test_light() && kind != CONSTANT && kind != NONFINITE) continue; /* the tie-heavy ones */
            fill(u, T, nseq, kind, k, 77 + 100 * k + (uint64_t)kind);
            for (int start = 0; start < 2; start++) {
                const sjk_trellis_start sm = start ? SJK_TRELLIS_FIXED : SJK_TRELLIS_TAILBITE;
                old_encode(cb, k, sm, c_old, u, T, nseq, nseq, s_old);
                for (int p = 0; p < np; p++) {
                    sjk_trellis_encode_on(P[p].fn, cb, k, sm, c_new, u, T, nseq, nseq, s_new);
                    CHECKF(!memcmp(c_old, c_new, T * nseq), "%s k=%u %s start=%d: codes differ", P[p].name,
                           k, kind_name[kind], start);
                }
                sjk_trellis_encode(cb, k, sm, c_new, u, T, nseq, nseq, s_new);
                CHECKF(!memcmp(c_old, c_new, T * nseq), "dispatched (%s) k=%u %s: codes differ",
                       sjk_trellis_path(), k, kind_name[kind]);
                if (kind == GAUSS) {
                    sjk_trellis_encode_ref(cb, k, sm, c_new, u, T, nseq, nseq, s_new);
                    CHECKF(!memcmp(c_old, c_new, T * nseq), "_ref k=%u %s: codes differ", k, kind_name[kind]);
                }
            }
        }
    }
    free(u); free(s_old); free(s_new); free(c_old); free(c_new);
}

/* Whole tiles through the tile layer: the payload and the refit row maps of the old
 * search and of the new one (dispatched and reference) are the same bytes. Tiles:
 * Gaussian and outlier groups (common/synth.h, as the record tests use), the Irwin–Hall
 * tile of test_trellis_format_pinned, a tile with constant rows and columns. Both axes,
 * both row kinds, D = 64, 256, 128; the dispatched path on every tile, the scalar
 * reference on those of D = 64 (it is held to the old search on every kind above). */
TEST(test_trellis_bp_tiles_equal_old)
{
    const size_t Ds[] = {64, 256, 128}, G = SJK_GROUP;
    const size_t n_D = test_light() ? 1 : 3;
    float *y = xalloc(256 * G * sizeof(float));
    uint8_t *pay_old = xalloc(256 * G), *pay_new = xalloc(256 * G);
    float sc_old[256], ze_old[256], sc_new[256], ze_new[256];
    size_t tiles = 0;
    for (size_t di = 0; di < n_D; di++) {
        const size_t D = Ds[di], n = D * G;
        for (int src = 0; src < 4; src++) {
            if (test_light() && src != 3) continue; /* constant rows */
            sjk_rng r;
            sjk_rng_seed(&r, 4242 + 17 * di + (uint64_t)src);
            if (src == 0) sjk_synth_group(y, G, D, SJK_SYNTH_GAUSSIAN, 0, 1.0, 5, &r);
            else if (src == 1) sjk_synth_group(y, G, D, SJK_SYNTH_OUTLIER, (int)(di & 1), 0.3, 9, &r);
            else if (src == 2) {
                for (size_t i = 0; i < n; i++) {
                    double x = 0;
                    for (int j = 0; j < 12; j++) x += sjk_rng_uniform(&r);
                    y[i] = (float)(x - 6.0);
                }
            } else {
                for (size_t t = 0; t < G; t++)
                    for (size_t d = 0; d < D; d++)
                        y[t * D + d] = t % 5 == 0 ? 1.5f : d % 7 == 0 ? -0.25f : (float)sjk_rng_normal(&r);
            }
            for (unsigned k = 2; k <= 4; k += test_light() ? 2 : 1)
                for (int axis = 0; axis < 2; axis++) {
                    const int rows = (int)((k + (unsigned)src + (unsigned)axis) & 1); /* the refit's two kinds */
                    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)k, (uint8_t)rows,
                                           (uint8_t)axis, SJK_TRELLIS_REFIT_LSQ, 0};
                    const size_t T = axis ? D : G;
                    const size_t sn = sjk_trellis_tile_scratch_nbytes(&tt) + old_scratch_nbytes(T);
                    void *scr = xalloc(sn);
                    const size_t nr = rows ? G : D, pn = sjk_trellis_tile_payload_nbytes(&tt);
                    CHECK(sjk_trellis_tile_encode_on(old_encode, &tt, pay_old, sc_old, ze_old, y, scr,
                                                     sn) == SJK_OK);
                    for (int v = 0; v < (D == 64 && !test_light() ? 2 : 1); v++) { /* the scalar reference on the small tiles */
                        memset(pay_new, 0, pn);
                        sjk_status st = v ? sjk_trellis_tile_encode_ref(&tt, pay_new, sc_new, ze_new, y, scr,
                                                                        sjk_trellis_tile_scratch_nbytes(&tt))
                                          : sjk_trellis_tile_encode(&tt, pay_new, sc_new, ze_new, y, scr,
                                                                    sjk_trellis_tile_scratch_nbytes(&tt));
                        CHECK(st == SJK_OK);
                        CHECKF(!memcmp(pay_old, pay_new, pn) && !memcmp(sc_old, sc_new, nr * sizeof(float)) &&
                                   !memcmp(ze_old, ze_new, nr * sizeof(float)),
                               "%s D=%zu src=%d k=%u rows=%d axis=%d: tile differs", v ? "ref" : sjk_trellis_path(),
                               D, src, k, rows, axis);
                        tiles++;
                    }
                    free(scr);
                }
        }
    }
    printf("     %zu tile encodes (scalar reference and %s): identical payloads and row maps\n", tiles,
           sjk_trellis_path());
    free(y); free(pay_old); free(pay_new);
}

/* The cache's seal (input gathered into the scratch, the trellis scratch over it once
 * the tiles are loaded) writes the bytes of sjk_record_encode, for every body, split and
 * head dim, on clean and on non-finite input, whole or as its K and V parts sealed apart
 * (sjk_record_seal_part); its scratch is smaller for a trellis body and the same for the
 * scalar one. */
TEST(test_record_seal_in_scratch_equals_encode)
{
    const size_t Ds[] = {64, 128, 256}, G = SJK_GROUP;
    const unsigned splits[][2] = {{8, 3}, {4, 4}, {4, 2}, {3, 3}, {2, 4}, {4, 8}}; /* an 8-bit tile is scalar in any body */
    const int bodies[] = {SJK_BODY_SCALAR, SJK_BODY_TRELLIS, SJK_BODY_TRELLIS_CHANNEL, SJK_BODY_TRELLIS_REAL,
                          SJK_BODY_TRELLIS_S128};
    const size_t n_split = test_light() ? 2 : 6;
    float *k = xalloc(256 * G * sizeof(float)), *v = xalloc(256 * G * sizeof(float));
    uint8_t *r_enc = xalloc(1 << 18), *r_seal = xalloc(1 << 18);
    size_t n = 0;
    for (size_t di = 0; di < (test_light() ? 2u : 3u); di++) {
        const size_t D = Ds[di];
        for (size_t si = 0; si < n_split; si++)
            for (size_t b = 0; b < SJK_ARRAY_LEN(bodies); b++) {
                sjk_record_params p = {(uint32_t)D, (uint8_t)splits[si][0], (uint8_t)splits[si][1], (uint8_t)bodies[b],
                                       SJK_BALANCE_SJ};
                const size_t rn = sjk_record_nbytes(&p), en = sjk_record_scratch_nbytes(&p);
                const size_t sn = sjk_record_seal_scratch_nbytes(&p);
                CHECK(rn > 0 && rn <= (1 << 18) && sn > 0);
                if (bodies[b] == SJK_BODY_SCALAR) CHECK(sn == en + 2 * G * D * sizeof(float));
                else CHECKF(sn < en + 2 * G * D * sizeof(float), "D=%zu body %d: %zu >= %zu", D, bodies[b], sn,
                            en + 2 * G * D * sizeof(float));
                void *e_scr = xalloc(en), *s_scr = xalloc(sn);
                for (int nonfinite = 0; nonfinite < 2; nonfinite++) {
                    sjk_rng r;
                    sjk_rng_seed(&r, 99 + 7 * di + 3 * si + (uint64_t)b);
                    sjk_synth_group(k, G, D, SJK_SYNTH_OUTLIER, 0, 1.0, 3 + di, &r);
                    sjk_synth_group(v, G, D, SJK_SYNTH_OUTLIER, 1, 1.0, 3 + di, &r);
                    if (nonfinite) k[5 * D + 3] = NAN, v[7] = INFINITY, k[9] = 1e30f;
                    CHECK(sjk_record_encode(&p, r_enc, rn, k, v, e_scr, en) == SJK_OK);
                    memcpy(s_scr, k, G * D * sizeof(float));
                    memcpy((float *)s_scr + G * D, v, G * D * sizeof(float));
                    CHECK(sjk_record_seal_in_scratch(&p, r_seal, rn, s_scr, sn) == SJK_OK);
                    CHECKF(!memcmp(r_enc, r_seal, rn), "D=%zu %u/%u body %d nonfinite=%d: records differ", D,
                           splits[si][0], splits[si][1], bodies[b], nonfinite);
                    /* the two parts sealed apart, in either order, each from a scratch whose
                     * other part is garbage, into a record of garbage: the same bytes (the
                     * later part would overwrite any byte of the earlier one's it wrote) */
                    for (int v_first = 0; v_first < 2; v_first++) {
                        memset(r_seal, 0xA5, rn);
                        for (int i = 0; i < 2; i++) {
                            const int part_v = i == !v_first;
                            memset(s_scr, 0x7F, sn); /* 0x7F7F7F7F: a large finite float */
                            memcpy((float *)s_scr + (part_v ? G * D : 0), part_v ? v : k, G * D * sizeof(float));
                            CHECK(sjk_record_seal_part(&p, r_seal, rn, s_scr, sn,
                                                       part_v ? SJK_RECORD_PART_V : SJK_RECORD_PART_K) == SJK_OK);
                        }
                        CHECKF(!memcmp(r_enc, r_seal, rn),
                               "D=%zu %u/%u body %d nonfinite=%d v_first=%d: parts sealed apart differ", D,
                               splits[si][0], splits[si][1], bodies[b], nonfinite, v_first);
                    }
                    n++;
                }
                CHECK(sjk_record_seal_part(&p, r_seal, rn, s_scr, sn, 0) == SJK_ERR_PARAM);
                CHECK(sjk_record_seal_part(&p, r_seal, rn, s_scr, sn, 4) == SJK_ERR_PARAM);
                CHECK(sjk_record_seal_in_scratch(&p, r_seal, rn, s_scr, sn - 1) == SJK_ERR_BUFFER);
                free(e_scr);
                free(s_scr);
            }
    }
    printf("     %zu records: sealed in scratch = encoded\n", n);
    free(k); free(v); free(r_enc); free(r_seal);
}

/* The trellis record body as it was until 2026-12 (trellis_record.c at 99f372a): it
 * copied each balanced tile into a token-major buffer with the column scale divided out
 * and coded that with sjk_trellis_tile_encode. Now the tile layer reads the tile in
 * place (sjk_trellis_tile_encode_in); the records must be the same bytes. */
typedef struct old_ctx {
    uint8_t axis;
    float *y, *ic, *a, *z;
    void *ts;
    size_t ts_nbytes;
} old_ctx;

static float old_inv_stored(float inv_col)
{
    float q = sjk_fp16_to_f32(sjk_record_f16(1.0f / inv_col));
    return q > 0 ? 1.0f / q : 0.0f;
}

static sjk_status old_quantize_tile(const sjk_tile_view *tile, uint8_t *payload, size_t row_nbytes, float *step,
                                    float *lo, void *ctx)
{
    old_ctx *o = ctx;
    const int is_v = tile->is_v != 0;
    const size_t D = is_v ? tile->n_cols : tile->n_rows, G = is_v ? tile->n_rows : tile->n_cols;
    sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, (uint8_t)tile->bits,
                           is_v ? SJK_TRELLIS_ROWS_TOKENS : SJK_TRELLIS_ROWS_CHANNELS,
                           o->axis ? SJK_TRELLIS_AXIS_CHANNEL : SJK_TRELLIS_AXIS_TOKEN, SJK_TRELLIS_REFIT_LSQ, 0};
    (void)row_nbytes;
    const float *M = tile->M;
    if (is_v) {
        for (size_t d = 0; d < D; d++) o->ic[d] = old_inv_stored(tile->inv_col[d]);
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++) o->y[t * D + d] = M[t * D + d] * o->ic[d];
    } else {
        for (size_t t = 0; t < G; t++) o->ic[t] = old_inv_stored(tile->inv_col[t]);
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++) o->y[t * D + d] = M[d * G + t] * o->ic[t];
    }
    sjk_status st = sjk_trellis_tile_encode(&tt, payload, o->a, o->z, o->y, o->ts, o->ts_nbytes);
    if (st != SJK_OK) return st;
    for (size_t r = 0; r < tile->n_rows; r++) {
        step[r] = o->a[r] * tile->inv_row[r];
        lo[r] = o->z[r] * tile->inv_row[r];
    }
    return SJK_OK;
}

TEST(test_trellis_record_in_place_equals_old_copy)
{
    const size_t Ds[] = {64, 128, 256}, G = SJK_GROUP;
    const unsigned splits[][2] = {{4, 4}, {4, 2}, {3, 3}, {2, 3}};
    const size_t n_split = test_light() ? 1 : 4, n_D = test_light() ? 1 : 3;
    float *k = xalloc(256 * G * sizeof(float)), *v = xalloc(256 * G * sizeof(float));
    uint8_t *r_new = xalloc(1 << 17), *r_old = xalloc(1 << 17);
    size_t n = 0;
    for (size_t di = 0; di < n_D; di++) {
        const size_t D = Ds[di];
        for (size_t si = 0; si < n_split; si++)
            for (int axis = 0; axis < 2; axis++) {
                sjk_record_params p = {(uint32_t)D, (uint8_t)splits[si][0], (uint8_t)splits[si][1],
                                       (uint8_t)(axis ? SJK_BODY_TRELLIS_CHANNEL : SJK_BODY_TRELLIS), SJK_BALANCE_SJ};
                const size_t rn = sjk_record_nbytes(&p), sn = sjk_record_scratch_nbytes(&p);
                sjk_trellis_tile tt = {(uint32_t)D, (uint32_t)G, 4, 0, (uint8_t)axis, SJK_TRELLIS_REFIT_LSQ, 0};
                old_ctx o = {(uint8_t)axis, xalloc(D * G * sizeof(float)), xalloc(512 * sizeof(float)),
                             xalloc(512 * sizeof(float)), xalloc(512 * sizeof(float)), NULL, 0};
                o.ts_nbytes = sjk_trellis_tile_scratch_nbytes(&tt);
                o.ts = xalloc(o.ts_nbytes);
                void *scr = xalloc(sn);
                for (int src = 0; src < 2; src++) {
                    sjk_rng r;
                    sjk_rng_seed(&r, 31 + 5 * di + 3 * si + (uint64_t)axis + 100 * (uint64_t)src);
                    sjk_synth_kind kind = src ? SJK_SYNTH_OUTLIER : SJK_SYNTH_GAUSSIAN;
                    sjk_synth_group(k, G, D, kind, 0, 0.7, 11 + di, &r);
                    sjk_synth_group(v, G, D, kind, 1, 0.7, 11 + di, &r);
                    CHECK(sjk_record_encode(&p, r_new, rn, k, v, scr, sn) == SJK_OK);
                    CHECK(sjk_record_encode_body(&p, r_old, rn, k, v, scr, sn, old_quantize_tile, &o, NULL) == SJK_OK);
                    CHECKF(!memcmp(r_new, r_old, rn), "D=%zu %u/%u axis=%d src=%d: records differ", D, splits[si][0],
                           splits[si][1], axis, src);
                    n++;
                }
                free(scr); free(o.y); free(o.ic); free(o.a); free(o.z); free(o.ts);
            }
    }
    printf("     %zu trellis records: the in-place tile gives the old copy's bytes\n", n);
    free(k); free(v); free(r_new); free(r_old);
}

/* The scratch is what the block uses: the work area ends where the first pass begins,
 * and the new sizes are what the header states (84 KiB at T = 128, 160 KiB at 256). */
TEST(test_trellis_bp_scratch_sizes)
{
    CHECK(sjk_trellis_work_nbytes(128) == 8192 + 128 * 512);
    CHECK(sjk_trellis_scratch_nbytes(128) / 1024 == 84);
    CHECK(sjk_trellis_scratch_nbytes(256) / 1024 == 160);
    CHECK(sjk_trellis_scratch_nbytes(128) * 6 < old_scratch_nbytes(128));
    CHECK(sjk_trellis_scratch_nbytes(1) == 0 && sjk_trellis_scratch_nbytes(SJK_TRELLIS_MAX_T + 1) == 0);
}

int main(void)
{
    RUN(test_trellis_bp_blocks_equal_old);
    RUN(test_trellis_bp_driver_equals_old);
    RUN(test_trellis_bp_tiles_equal_old);
    RUN(test_record_seal_in_scratch_equals_encode);
    RUN(test_trellis_record_in_place_equals_old_copy);
    RUN(test_trellis_bp_scratch_sizes);
    return test_summary();
}
