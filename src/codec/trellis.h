/* trellis.h — internal API of the 64-state bitshift trellis (the trellis record bodies;
 * record glue in trellis_record.c, payload order in docs/FORMAT.md).
 *
 * Code structure (k = 2, 3 or 4 bits per value, L = k + 6 window bits):
 *
 *   symbols of one sequence, in order:        ... | c[t-2] | c[t-1] | c[t] | ...
 *   window w[t] = the k bits of c[t] above the 6 bits just before them
 *               = (c[t] << 6) | s[t],       s[t] = carried state (6 bits, 64 states)
 *   s[t+1]      = w[t] >> k                 (the top 6 bits of the window)
 *   value[t]    = C[w[t]]                   (C: a trained table of 64 << k floats)
 *
 * Start state (no extra bits): tail-biting. The stream of a sequence is read as a ring,
 * so s[0] is the last 6 bits of the stream (s[0] = s[T]); the encoder guarantees this
 * by a two-pass Viterbi search (see trellis.c). A fixed start (s[0] = 0) is kept as an
 * option for measurement; it is not used by records.
 *
 * Data layout of the search: n_seq independent sequences of T values are processed
 * SJK_TRELLIS_LANES at a time, one sequence per SIMD lane. Inputs and codes are
 * "step-major": value t of sequence s is at [t * stride + s]. That is the natural layout
 * of a token-major [G][D] tile when sequences run along the token axis (one per
 * channel), so the token-axis default needs no transpose.
 *
 * The encoder minimises sum_t (u[t] - C[w[t]])^2 for already normalised values u
 * (roughly zero mean, unit variance); scale and offset are handled by the tile layer.
 */
#ifndef SJK_TRELLIS_H
#define SJK_TRELLIS_H

#include <stddef.h>
#include <stdint.h>

#include "codec/trellis_codebooks.h" /* sjk_trellis_codebook: the committed codebooks */
#include "sjkvarn.h"

#define SJK_TRELLIS_STATE_BITS 6
#define SJK_TRELLIS_STATES 64
#define SJK_TRELLIS_LANES 16 /* sequences per search block (one zmm, two ymm) */
#define SJK_TRELLIS_MAX_T 4096

/* The int8-grid form of a float table (sjk_trellis_codebook_grid): entry w is
 * c8[w] * step exactly as fp32, c8[w] = round-to-nearest-even(C[w] / step) in -127..127,
 * step = max|C| / 127. Built once per process (thread-safe, immutable afterwards) from
 * the committed float tables, so they are committed with their generator: this
 * function. On Gaussian data the grid costs the search at most 0.002 dB of SNR at 2 and
 * 3 bits and 0.001-0.007 dB at 4 (`sjkvarn bench trellis`, docs/FORMAT.md). NULL for a table
 * that is not one of the known float tables (sjk_trellis_codebook_set 0..2). */
const float *sjk_trellis_codebook_grid(const float *cb, unsigned k);
/* The int8 entries of a grid table (set 3..6) and its step; NULL for any other table. */
const int8_t *sjk_trellis_codebook_i8(const float *cb, unsigned k, float *step);

/* ---- the 128-entry tables (SJK_BODY_TRELLIS_S128, record format 5) ----------------
 * A table of 64 << k independent entries makes the attention readers' lookup of 4-bit
 * windows eight byte permutes and seven merges per 64 values (src/attention/attn_avx512.c).
 * These tables are built from 128 trained entries A_k:
 *
 *     C[w] = A_k[(w + o_k * (w >> 7)) mod 128],   o_2 = 32, o_3 = 16, o_4 = 8,
 *
 * so a reader looks 64 windows up with one two-register byte permute of A_k after adding
 * the offset of w >> 7 (a shift, a mask and an add on the windows). Every state keeps 2^k
 * distinct levels: state s with symbol c reads s + 64 (c & 1) + o_k (c >> 1) mod 128, and
 * the offsets o_k j are distinct modulo 64. The search loses at most 0.04 dB of SNR at 2
 * and 3 bits and 0.14-0.17 dB at 4 against the 64 << k-entry tables on Gaussian data
 * (test_trellis_s128_tables, `sjkvarn bench trellis` section 1b; docs/FORMAT.md). */
#define SJK_TRELLIS_S128_ENTRIES 128
static inline unsigned sjk_trellis_s128_index(unsigned k, unsigned w)
{
    return (w + (w >> 7) * (32u >> (k - 2))) & 127u;
}
/* The float form of A_k's table over all windows (entry w = A_k[index(w)] * step, exact
 * in fp32), built once per process: the table SJK_BODY_TRELLIS_S128 codes with. */
const float *sjk_trellis_codebook_s128(unsigned k);

/* The codebook a trellis body codes its K (is_v = 0) or V tiles of k bits with: the
 * committed table (trellis_codebooks.c), for SJK_BODY_TRELLIS_REAL the real-data one
 * (trellis_codebooks_real.c), and for the _I8 bodies the int8 grid of those. */
static inline const float *sjk_trellis_codebook_for(unsigned body, unsigned k, int is_v)
{
    switch (body) {
    case SJK_BODY_TRELLIS_REAL: return sjk_trellis_codebook_real(k, is_v);
    case SJK_BODY_TRELLIS_I8: return sjk_trellis_codebook_grid(sjk_trellis_codebook(k), k);
    case SJK_BODY_TRELLIS_REAL_I8: return sjk_trellis_codebook_grid(sjk_trellis_codebook_real(k, is_v), k);
    case SJK_BODY_TRELLIS_S128: return sjk_trellis_codebook_s128(k);
    default: return sjk_trellis_codebook(k);
    }
}

/* A token-axis trellis body (the attention readers read these in place). */
static inline int sjk_body_trellis_token(unsigned body)
{
    return body == SJK_BODY_TRELLIS || body == SJK_BODY_TRELLIS_REAL || body == SJK_BODY_TRELLIS_I8 ||
           body == SJK_BODY_TRELLIS_REAL_I8 || body == SJK_BODY_TRELLIS_S128;
}

/* Codebook entries for k bits: 256, 512, 1024. */
#define SJK_TRELLIS_CB_SIZE(k) ((size_t)SJK_TRELLIS_STATES << (k))

typedef enum sjk_trellis_start {
    SJK_TRELLIS_TAILBITE = 0, /* s[0] = s[T], two-pass search (records use this) */
    SJK_TRELLIS_FIXED = 1     /* s[0] = 0, one pass */
} sjk_trellis_start;


/* ---- search --------------------------------------------------------------------- */

/* Scratch bytes for sjk_trellis_encode with sequences of T values: two rows of costs
 * (2 * 64 * 16 floats) and the back-pointers, 4 bits per (value, state, sequence) of a
 * block (512 bytes per value of T), plus the first pass: 84 KiB at T = 128, 160 KiB at
 * T = 256. Float alignment. */
size_t sjk_trellis_scratch_nbytes(size_t T);

/* Viterbi search of n_seq sequences (n_seq a multiple of SJK_TRELLIS_LANES) of T values
 * (2 <= T <= SJK_TRELLIS_MAX_T, T*k >= 6 for tail-biting), u[t*stride + s] ->
 * codes[t*stride + s] (k-bit symbols). Deterministic: the same codes on every dispatch
 * path (ties go to the lowest state / predecessor). Never allocates. The dispatched
 * version uses AVX-512 or AVX2 when available; _ref is the portable reference. */
void sjk_trellis_encode(const float *cb, unsigned k, sjk_trellis_start start,
                        uint8_t *codes, const float *u, size_t T, size_t n_seq,
                        size_t stride, void *scratch);
void sjk_trellis_encode_ref(const float *cb, unsigned k, sjk_trellis_start start,
                            uint8_t *codes, const float *u, size_t T, size_t n_seq,
                            size_t stride, void *scratch);

/* Tail-biting search with a given first-pass length (2..T values around the wrap point;
 * sjk_trellis_encode uses 64): for measuring that choice (`sjkvarn bench trellis`). */
void sjk_trellis_encode_tb_pass1(const float *cb, unsigned k, uint8_t *codes, const float *u,
                                 size_t T, size_t n_seq, size_t stride, size_t pass1,
                                 void *scratch);

/* Name of the path sjk_trellis_encode uses ("avx512", "avx2", "scalar"). */
const char *sjk_trellis_path(void);

/* Squared error of a code sequence (double), for tests and training. */
double sjk_trellis_seq_sse(const float *cb, unsigned k, sjk_trellis_start start,
                           const uint8_t *codes, const float *u, size_t T, size_t stride);

/* ---- packing and decoding ------------------------------------------------------- */

/* Payload order (trellis.c): groups of 16 sequences; within a group, step t is 2k bytes
 * holding the 16 lanes' k-bit symbols (lane l at bits l*k..). Exactly T*k bits per
 * sequence. Packs codes[t*stride + s] of n_seq sequences (a multiple of 16) into
 * n_seq*T*k/8 bytes at dst. */
void sjk_trellis_pack(uint8_t *dst, const uint8_t *codes, size_t T, size_t n_seq,
                      size_t stride, unsigned k);
/* Decodes lane `lane` of a packed group into C[w[t]] values: out[t*out_stride]. */
void sjk_trellis_decode_seq(float *out, size_t out_stride, const float *cb, unsigned k,
                            sjk_trellis_start start, const uint8_t *group, unsigned lane,
                            size_t T);
/* The window indices of one lane of a packed group (tests, training). */
void sjk_trellis_windows(uint16_t *w, const uint8_t *group, unsigned lane, size_t T,
                         unsigned k, sjk_trellis_start start);

/* Pair table of the committed codebook C_k (k = 2, 3, 4): entry w | s' << (6 + k) holds
 * the fp32 bits of C_k[w] (low half) and C_k[w'] (high half), w' = (s' << 6) | (w >> k)
 * the window after w when the next symbol is s'. So one 64-bit load gives the values of
 * two consecutive tokens of a sequence (the attention readers use it to halve their
 * lookups). 8 / 32 / 128 KiB, built once per process (thread-safe, immutable
 * afterwards); NULL for another k. */
const uint64_t *sjk_trellis_pair_table(unsigned k);

/* Which known table cb is: 0 the committed C_k, 1 the real-data K table, 2 the real-data V
 * table of k bits (sjk_trellis_codebook_real), 3..5 the int8 grids of 0..2
 * (sjk_trellis_codebook_grid), 6 the 128-entry table (sjk_trellis_codebook_s128, born on
 * the grid); -1 for any other (a test's own table). The attention readers keep derived
 * tables (pair tables, int16 and int8 codebooks) for the known ones; another table takes
 * their plain paths. Sets from SJK_TRELLIS_CB_FLOAT_SETS on are the grid tables. */
#define SJK_TRELLIS_CB_SETS 7
#define SJK_TRELLIS_CB_FLOAT_SETS 3
#define SJK_TRELLIS_CB_GRID_SETS (SJK_TRELLIS_CB_SETS - SJK_TRELLIS_CB_FLOAT_SETS)
#define SJK_TRELLIS_CB_SET_S128 6
int sjk_trellis_codebook_set(const float *cb, unsigned k);
/* The inverse: the table of set 0..SJK_TRELLIS_CB_SETS-1 for k bits (NULL otherwise). */
const float *sjk_trellis_codebook_of_set(unsigned set, unsigned k);
/* The pair table (as sjk_trellis_pair_table) of a known table cb; NULL for another. */
const uint64_t *sjk_trellis_pair_table_of(const float *cb, unsigned k);

/* ---- the tile layer (what a record body calls) ---------------------------------- */

/* How a trellis body codes one tile.
 *
 * The tile is given token-major, y[t*D + d] for t < G (= 128), d < D: the balanced values
 * (column scales already divided out). "Rows" are the record's scale groups: for K the
 * rows are channels (row_scale/row_zero have D entries), for V the rows are tokens
 * (G entries). Sequences run along the token axis (one sequence of G values per
 * channel, the default) or the channel axis (one sequence of D values per token). */
typedef enum sjk_trellis_rows { SJK_TRELLIS_ROWS_CHANNELS = 0, SJK_TRELLIS_ROWS_TOKENS = 1 } sjk_trellis_rows;
typedef enum sjk_trellis_axis { SJK_TRELLIS_AXIS_TOKEN = 0, SJK_TRELLIS_AXIS_CHANNEL = 1 } sjk_trellis_axis;
typedef enum sjk_trellis_refit {
    SJK_TRELLIS_REFIT_LSQ = 0,    /* least squares: minimum MSE (default, see trellis.c) */
    SJK_TRELLIS_REFIT_MOMENT = 1, /* keep the row's mean and standard deviation */
    SJK_TRELLIS_REFIT_NONE = 2    /* keep the provisional mean/std map */
} sjk_trellis_refit;

typedef struct sjk_trellis_tile {
    uint32_t D;         /* channels (64..512) */
    uint32_t G;         /* tokens (SJK_GROUP) */
    uint8_t bits;       /* k */
    uint8_t rows;       /* sjk_trellis_rows */
    uint8_t axis;       /* sjk_trellis_axis */
    uint8_t refit;      /* sjk_trellis_refit */
    uint8_t peak_guard; /* 1: the K rows' peak guard (trellis.c; the int8-grid bodies set
                           it, trellis_record.c); 0, as brace initialisers leave it: the
                           plain map */
} sjk_trellis_tile;

/* Payload bytes: D*G*k/8. */
size_t sjk_trellis_tile_payload_nbytes(const sjk_trellis_tile *tt);
/* Scratch bytes for sjk_trellis_tile_encode. */
size_t sjk_trellis_tile_scratch_nbytes(const sjk_trellis_tile *tt);

/* Codes one tile: normalises each row to zero mean / unit variance, searches, refits
 * each row's affine map (scale, zero) and writes the payload. row_scale and row_zero
 * receive fp16-representable floats (the caller stores them as fp16 losslessly).
 * y must be finite. SJK_ERR_PARAM for bad shapes, SJK_ERR_BUFFER for small scratch. */
sjk_status sjk_trellis_tile_encode(const sjk_trellis_tile *tt, uint8_t *payload,
                                   float *row_scale, float *row_zero, const float *y,
                                   void *scratch, size_t scratch_nbytes);
sjk_status sjk_trellis_tile_encode_ref(const sjk_trellis_tile *tt, uint8_t *payload,
                                       float *row_scale, float *row_zero, const float *y,
                                       void *scratch, size_t scratch_nbytes);

/* The same tile read in place: value (t, d) is x[t*st + d*sd], multiplied by mul[t]
 * (mul_on_token) or mul[d] when mul is not NULL. The trellis record body codes its
 * balanced tiles this way (dividing out the stored column scales) with no copy; the
 * result is the bytes sjk_trellis_tile_encode gives for the stored products. */
typedef struct sjk_trellis_input {
    const float *x;
    size_t st, sd;
    const float *mul;
    int mul_on_token;
} sjk_trellis_input;
sjk_status sjk_trellis_tile_encode_in(const sjk_trellis_tile *tt, uint8_t *payload,
                                      float *row_scale, float *row_zero, const sjk_trellis_input *in,
                                      void *scratch, size_t scratch_nbytes);

/* The search sjk_trellis_tile_encode calls (the signature of sjk_trellis_encode), and the
 * tile encode with another one: for tests that hold a search to a reference algorithm.
 * The search gets the scratch past the tile layer's own, all of what remains. */
typedef void (*sjk_trellis_encode_fn)(const float *cb, unsigned k, sjk_trellis_start start,
                                      uint8_t *codes, const float *u, size_t T, size_t n_seq,
                                      size_t stride, void *scratch);
sjk_status sjk_trellis_tile_encode_on(sjk_trellis_encode_fn enc, const sjk_trellis_tile *tt,
                                      uint8_t *payload, float *row_scale, float *row_zero,
                                      const float *y, void *scratch, size_t scratch_nbytes);

/* Decodes one tile: out[t*D + d] = (C[w] * row_scale[r] + row_zero[r]) * col(t, d), where
 * r is the row of (t, d) and col is tok_scale[t] (rows = channels) or ch_scale[d]
 * (rows = tokens); a NULL col_scale means 1. */
sjk_status sjk_trellis_tile_decode(const sjk_trellis_tile *tt, float *out,
                                   const uint8_t *payload, const float *row_scale,
                                   const float *row_zero, const float *col_scale);
/* The scalar reference of the same (the SIMD decoders are bit-exact against it). */
sjk_status sjk_trellis_tile_decode_ref(const sjk_trellis_tile *tt, float *out,
                                       const uint8_t *payload, const float *row_scale,
                                       const float *row_zero, const float *col_scale);

/* ---- measuring codebooks on real tiles (`sjkvarn capture-tiles`, `train-codebook`) -- */

/* An observer sees every tile the tile layer codes, as it gets it, before the search
 * (the record bodies' tiles: K with rows = channels, V with rows = tokens). For capturing
 * the balanced K and V of a model; the product never sets one. Set it before any cache
 * codes a tile and clear it (NULL) after the last: the pointer is a plain global, and the
 * observer is called from whatever threads seal records, so it must be thread-safe. */
typedef void (*sjk_trellis_tile_observer)(void *ctx, const sjk_trellis_tile *tt,
                                          const sjk_trellis_input *in);
void sjk_trellis_set_observer(sjk_trellis_tile_observer fn, void *ctx);

/* Steps 1-2 of the tile encode: u receives the tile normalised as the search sees it,
 * step-major [T][n_seq] (T = G on the token axis), mean/istd the rows' provisional map
 * (max(D, G) floats each; with tt->peak_guard, the guard of the committed table,
 * trellis.c). SJK_ERR_PARAM for bad shapes. */
sjk_status sjk_trellis_tile_normalize(const sjk_trellis_tile *tt, const sjk_trellis_input *in, float *u,
                                      float *mean, float *istd);

/* The tile encode and decode with a given codebook cb[64 << bits] instead of the
 * committed one (for comparing codebooks; records always use the committed tables). */
sjk_status sjk_trellis_tile_encode_cb(const float *cb, const sjk_trellis_tile *tt, uint8_t *payload,
                                      float *row_scale, float *row_zero, const sjk_trellis_input *in,
                                      void *scratch, size_t scratch_nbytes);
sjk_status sjk_trellis_tile_decode_cb(const float *cb, const sjk_trellis_tile *tt, float *out,
                                      const uint8_t *payload, const float *row_scale,
                                      const float *row_zero, const float *col_scale);

/* ---- codebook training (the offline trainer; allocates, not for hot paths) ------- */

/* The standard normal quantile (bisection on erfc, double): the trainer's initial
 * table takes the quantiles (i + 1/2) / n. */
double sjk_trellis_normal_quantile(double p);

/* Gaussian: rows drawn by the trainer; GIVEN: the caller's values (params.u), already in
 * the search layout and normalised as the tile layer normalises them. */
typedef enum sjk_trellis_data { SJK_TRELLIS_DATA_GAUSSIAN = 0, SJK_TRELLIS_DATA_GIVEN = 1 } sjk_trellis_data;

typedef struct sjk_trellis_train_params {
    unsigned bits;      /* k: 2, 3 or 4 */
    uint64_t seed;      /* everything (data, initial permutation) derives from it */
    unsigned iters;     /* Lloyd iterations (search + centroid update) */
    size_t samples;     /* training values; rounded down to whole blocks of T*16 */
    size_t T;           /* sequence length (128: one token-axis sequence) */
    unsigned data;      /* sjk_trellis_data */
    const float *u;     /* GIVEN: n_seq sequences of T values, step-major u[t*n_seq + s] */
    size_t n_seq;       /* GIVEN: a multiple of SJK_TRELLIS_LANES (samples is ignored) */
    const float *init;  /* the starting table (64 << bits), or NULL for the quantiles below */
    unsigned tie;       /* sjk_trellis_tie: which windows share an entry (not with init) */
} sjk_trellis_train_params;

/* SJK_TRELLIS_TIE_S128 trains the 128-entry tables: the windows of one entry
 * (sjk_trellis_s128_index) are pooled in the centroid update, the starting table is 128
 * shuffled quantiles, and cb_out holds the expanded table (entry w = A[index(w)]). */
typedef enum sjk_trellis_tie { SJK_TRELLIS_TIE_NONE = 0, SJK_TRELLIS_TIE_S128 = 1 } sjk_trellis_tie;

/* Called after each iteration with the mean squared error of that iteration's search
 * (before its centroid update); iter 0 is the initial codebook. */
typedef void (*sjk_trellis_train_log_fn)(void *ctx, unsigned iter, double mse);

/* Trains a codebook by generalized Lloyd: rows of T values (drawn from `data`, each
 * normalised to zero mean and unit variance like the tile layer does), tail-biting
 * Viterbi search with the current table, then every entry becomes the mean of the
 * values coded with its window (an entry no value used keeps its value). Initial table:
 * Gaussian quantiles (i + 0.5) / N in an order shuffled by the seed, or params.init. Deterministic:
 * the same params give the same table on every run and dispatch path.
 * cb_out: [64 << bits]. SJK_ERR_PARAM, SJK_ERR_NOMEM. */
sjk_status sjk_trellis_train(const sjk_trellis_train_params *p, float *cb_out,
                             sjk_trellis_train_log_fn log, void *log_ctx);

/* ---- internal: SIMD kernels (src/codec/trellis_*.c) ------------------------------ */

/* One block of SJK_TRELLIS_LANES sequences: the forward pass, keeping two rows of costs
 * and a back-pointer per (step, state, lane), then the traceback along the pointers.
 * work: sjk_trellis_work_nbytes(T) bytes (trellis_impl.h), float-aligned. init_state:
 * NULL (all states start at cost 0) or the start state per lane; end_state likewise
 * (NULL: free end). */
typedef void (*sjk_trellis_block_fn)(const float *cb, unsigned k, uint8_t *codes,
                                     const float *u, size_t T, size_t stride,
                                     const uint8_t *init_state, const uint8_t *end_state,
                                     void *work, uint8_t *state_at /* [T+1][LANES] or NULL */);
void sjk_trellis_block_ref(const float *cb, unsigned k, uint8_t *codes, const float *u,
                           size_t T, size_t stride, const uint8_t *init_state,
                           const uint8_t *end_state, void *work, uint8_t *state_at);
void sjk_trellis_block_avx2(const float *cb, unsigned k, uint8_t *codes, const float *u,
                            size_t T, size_t stride, const uint8_t *init_state,
                            const uint8_t *end_state, void *work, uint8_t *state_at);
void sjk_trellis_block_avx512(const float *cb, unsigned k, uint8_t *codes, const float *u,
                              size_t T, size_t stride, const uint8_t *init_state,
                              const uint8_t *end_state, void *work, uint8_t *state_at);

/* sjk_trellis_encode with a given block kernel (NULL: the scalar reference), for tests
 * that hold every path to the same codes. */
void sjk_trellis_encode_on(sjk_trellis_block_fn fn, const float *cb, unsigned k,
                           sjk_trellis_start start, uint8_t *codes, const float *u, size_t T,
                           size_t n_seq, size_t stride, void *scratch);

/* Decode of a token-axis tile (the values of sjk_trellis_tile_decode, bit-exact). */
typedef void (*sjk_trellis_decode_token_fn)(float *out, size_t D, size_t G, const float *cb,
                                            unsigned k, const uint8_t *payload,
                                            const float *row_scale, const float *row_zero,
                                            const float *col_scale, int rows_are_channels);
void sjk_trellis_decode_token_avx2(float *out, size_t D, size_t G, const float *cb, unsigned k,
                                   const uint8_t *payload, const float *row_scale,
                                   const float *row_zero, const float *col_scale,
                                   int rows_are_channels);
void sjk_trellis_decode_token_avx512(float *out, size_t D, size_t G, const float *cb,
                                     unsigned k, const uint8_t *payload, const float *row_scale,
                                     const float *row_zero, const float *col_scale,
                                     int rows_are_channels);
/* The same for a channel-axis tile (same signature; AVX-512 only). */
void sjk_trellis_decode_channel_avx512(float *out, size_t D, size_t G, const float *cb,
                                       unsigned k, const uint8_t *payload, const float *row_scale,
                                       const float *row_zero, const float *col_scale,
                                       int rows_are_channels);
/* The paths tile decode uses (NULL: the scalar reference). */
sjk_trellis_decode_token_fn sjk_trellis_decode_token_get(void);
sjk_trellis_decode_token_fn sjk_trellis_decode_channel_get(void);

#endif
