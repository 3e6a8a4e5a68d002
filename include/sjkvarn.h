/*
 * sjkvarn.h — the public API of libsjkvarn, the SJ-KVaRN KV-cache codec and cache.
 *
 * This header is the manual. Every function says what it takes, what it returns, who
 * owns memory, whether it allocates and whether it is thread-safe.
 *
 * Conventions
 *  - Every fallible call returns an sjk_status; SJK_OK is 0. sjk_status_str() names it.
 *  - Buffers are passed as (dst, dst_cap, src, src_nbytes); byte counts end in _nbytes.
 *  - Nothing here calls exit() or abort(). Untrusted bytes are bounds-checked.
 *  - Functions without a handle are thread-safe (they touch only their arguments and
 *    immutable tables that are initialised once, thread-safely, on first use).
 *  - "Rotated" values are values multiplied by the orthonormal Walsh–Hadamard matrix of
 *    sjk_hadamard(); the codec works in that basis.
 *
 * Layers: common (status, fp16, cpu dispatch) <- codec (rotation, balancing, formats,
 * records) <- cache (regions, policy) <- attention. docs/FORMAT.md is the normative
 * description of every byte this library writes.
 */
#ifndef SJKVARN_H
#define SJKVARN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SJK_VERSION_MAJOR 0
#define SJK_VERSION_MINOR 1
#define SJK_VERSION_PATCH 0
#define SJK_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------------------------
 * Status codes
 * ---------------------------------------------------------------------------------- */
typedef enum sjk_status {
    SJK_OK = 0,
    SJK_ERR_PARAM,       /* an argument or a params field is invalid (see *_validate) */
    SJK_ERR_NOMEM,       /* an allocation failed; nothing was changed */
    SJK_ERR_BUFFER,      /* a destination is too small or a source too short */
    SJK_ERR_FORMAT,      /* bytes are not in the expected format (magic, version, type) */
    SJK_ERR_CORRUPT,     /* bytes are in the format but inconsistent (checksum, bounds) */
    SJK_ERR_RANGE,       /* a position, index or size is outside what was configured */
    SJK_ERR_UNSUPPORTED, /* a valid request this build does not implement */
    SJK_ERR_IO,          /* an operating-system I/O call failed (errno is preserved) */
    SJK_ERR_REPROCESS,   /* the operation succeeded partially; the caller must re-append
                            the positions the call reported (see sjk_cache_truncate) */
    SJK_ERR_MISMATCH,    /* a valid file made for another model, configuration or cache
                            geometry (see sjk_cache_restore) */
    SJK_STATUS_COUNT
} sjk_status;

/* A short, static, human-readable name for a status ("ok", "invalid parameter", ...). */
const char *sjk_status_str(sjk_status s);

/* The library version string, e.g. "0.1.0". */
const char *sjk_version(void);

/* ------------------------------------------------------------------------------------
 * CPU dispatch
 *
 * SIMD kernels are chosen once per process from the CPU's features. The environment
 * variable SJK_CPU_DISABLE (comma list of "avx512", "avx2"; "all" = scalar only) switches
 * features off so one machine exercises every path; it is read once, at first use.
 * ---------------------------------------------------------------------------------- */
enum {
    SJK_CPU_AVX2   = 1u << 0, /* AVX2 + FMA + F16C */
    SJK_CPU_AVX512 = 1u << 1, /* AVX-512 F/BW/VL/DQ + VNNI, BF16, VBMI */
};
/* The features in use (after SJK_CPU_DISABLE). Thread-safe. */
unsigned sjk_cpu_features(void);

/* ------------------------------------------------------------------------------------
 * Thread pool
 *
 * The worker pool a cache runs its seals and attention on, for a host's own parallel
 * loops (libsjkhost's matmuls and attention use it). sjk_pool_run calls fn(arg, item,
 * worker) once for every item in [0, n_items), spread over the n_threads − 1 workers and
 * the caller's thread (worker 0; worker < n_threads), and returns when all are done;
 * items are claimed one at a time, so uneven items balance. One run at a time per pool.
 * spin: after a job, each worker polls for the next one (and the caller, for the end of
 * its job) this many pause instructions before sleeping; 0 sleeps at once, about 2000
 * suits jobs that follow each other within microseconds. A NULL pool runs everything on
 * the caller's thread. sjk_pool_create: SJK_ERR_PARAM unless 1 <= n_threads <=
 * SJK_POOL_MAX_THREADS; SJK_ERR_NOMEM if memory or a thread cannot be had (the threads
 * already started are joined). sjk_pool_run never allocates.
 * ---------------------------------------------------------------------------------- */
#define SJK_POOL_MAX_THREADS 256
typedef struct sjk_pool sjk_pool;
typedef void (*sjk_pool_fn)(void *arg, uint32_t item, uint32_t worker);
sjk_status sjk_pool_create(uint32_t n_threads, uint32_t spin, sjk_pool **out);
void sjk_pool_free(sjk_pool *p);
uint32_t sjk_pool_n_threads(const sjk_pool *p); /* 1 for NULL */
void sjk_pool_run(sjk_pool *p, sjk_pool_fn fn, void *arg, uint32_t n_items);

/* ------------------------------------------------------------------------------------
 * Deterministic random numbers
 *
 * A small PRNG (splitmix64 seeding, xoshiro256**) for draws that must repeat exactly on
 * every machine: the synthetic data of the tests and benchmarks, the codebook trainer's
 * samples, the KL study's bootstrap and synthetic documents (libsjkeval). Never used by
 * the codec's data path. The state is the caller's struct: thread-safe per struct, no
 * allocation. sjk_rng_uniform: [0, 1) with 53 random bits; sjk_rng_normal: a standard
 * normal (Box–Muller, one value per call).
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_rng { uint64_t s[4]; } sjk_rng;
void sjk_rng_seed(sjk_rng *r, uint64_t seed);
uint64_t sjk_rng_u64(sjk_rng *r);
double sjk_rng_uniform(sjk_rng *r);
double sjk_rng_normal(sjk_rng *r);

/* ------------------------------------------------------------------------------------
 * Rotation: orthonormal Walsh–Hadamard transform
 *
 * Sylvester order, scaled by 1/sqrt(block), no random signs: H = H^T = H^-1.
 * Transforms each consecutive block of `block` values of x[0..n) in place.
 * block must be a power of two in [2, 4096] and divide n. O(n log block). Never allocates.
 * ---------------------------------------------------------------------------------- */
sjk_status sjk_hadamard(float *x, size_t n, size_t block);

/* ------------------------------------------------------------------------------------
 * Value formats (uniform caches and staging)
 *
 * One table of type traits drives every format. A "row" is a run of n values; n must be
 * a multiple of the format's block_values. Encoding is deterministic: the same input gives
 * the same bytes on every run and every dispatch path. The ggml formats (q8_0 … q4_1,
 * f16, bf16) are byte-identical to llama.cpp's reference quantizers. The TurboQuant
 * formats (tq6_0, tq5_0, turbo4, turbo3) apply their own signed 128-point rotation inside
 * the format; SJK_FMT_TQ6_0_STAGE is tq6_0 without that rotation (the SJ-KVaRN staging
 * ring, whose input is already in the Hadamard basis). Decoding a TurboQuant row undoes
 * the format's rotation, so decode(encode(x)) approximates x in the caller's basis.
 * Block sizes: 1 value (f32, f16, bf16), 32 (q*), 128 (tq*, turbo*).
 * Quantized formats never store NaN or Inf: a block holding NaN/Inf, or values beyond the
 * format's fp16-scale range, is encoded from a copy with NaN -> 0 and values clamped
 * (docs/FORMAT.md "## Value formats"); f32/f16/bf16 store IEEE values as they are.
 * ---------------------------------------------------------------------------------- */
typedef enum sjk_format {
    SJK_FMT_F32 = 0,
    SJK_FMT_F16,
    SJK_FMT_BF16,
    SJK_FMT_Q8_0,
    SJK_FMT_Q5_1,
    SJK_FMT_Q5_0,
    SJK_FMT_Q4_1,
    SJK_FMT_Q4_0,
    SJK_FMT_TQ6_0,
    SJK_FMT_TQ5_0,
    SJK_FMT_TURBO4,
    SJK_FMT_TURBO3,
    SJK_FMT_TQ6_0_STAGE,
    SJK_FMT_COUNT
} sjk_format;

typedef struct sjk_format_info {
    const char *name;        /* "q8_0", ... (the spelling used in configuration strings) */
    uint32_t block_values;   /* values per block */
    uint32_t block_nbytes;   /* bytes per block */
    double bits_per_value;   /* 8 * block_nbytes / block_values */
    /* Encode n values (a multiple of block_values) into n/block_values blocks. Unchecked:
     * the caller guarantees n and the buffer sizes (sjk_format_encode_row checks them).
     * Thread-safe; never allocates; dst and src must not overlap. */
    void (*encode)(void *dst, const float *src, size_t n);
    /* Decode n values (unchecked, as encode). */
    void (*decode)(float *dst, const void *src, size_t n);
} sjk_format_info;

/* Traits of a format, or NULL for an out-of-range value. Thread-safe, never allocates. */
const sjk_format_info *sjk_format_get(sjk_format f);
/* Looks a format up by name; SJK_ERR_PARAM if unknown. */
sjk_status sjk_format_from_name(const char *name, sjk_format *out);
/* Bytes for a row of n values; 0 if n is not a multiple of the block size. */
size_t sjk_format_row_nbytes(sjk_format f, size_t n);
/* Checked encode/decode of one row. SJK_ERR_PARAM for an unknown format, a bad n or a
 * NULL buffer (n = 0 is an empty row: SJK_OK, nothing touched), SJK_ERR_BUFFER for a
 * small dst or short src (nothing written). NaN/Inf inputs are defined per format in
 * docs/FORMAT.md. Thread-safe, never allocate. */
sjk_status sjk_format_encode_row(sjk_format f, void *dst, size_t dst_cap,
                                 const float *src, size_t n);
sjk_status sjk_format_decode_row(sjk_format f, float *dst, size_t n,
                                 const void *src, size_t src_nbytes);
/* Optional llama.cpp-style Hadamard rotation in front of a ggml format (upstream
 * llama.cpp's default "attention rotation"): the block size to pass to sjk_hadamard() for
 * the K rows (and the query) when is_v == 0, or for the V rows (and the attention output)
 * when is_v != 0; 0 means "no rotation" (f32/f16/bf16, the TurboQuant formats, or a head
 * size that is not a multiple of 64). K: the largest power of two >= 64 dividing head_dim
 * (128 for 128, 256 for 256, 512 for 512); V: 64. The caller rotates before encoding and
 * un-rotates the attention output with the V block; the format bytes are then exactly
 * what a rotated llama.cpp cache stores. Thread-safe, never allocates. */
size_t sjk_format_rotation_block(sjk_format f, size_t head_dim, int is_v);

/* ------------------------------------------------------------------------------------
 * Balancing (log-domain Sinkhorn-style), per 128-token tile
 *
 * A tile is an R x C fp32 matrix whose rows are the axis quantized as one group (K: rows =
 * channels, cols = tokens; V: rows = tokens, cols = channels). Balancing finds positive
 * row and column scales so tile / (s_row (x) s_col) has near-equal row and column spreads.
 * ---------------------------------------------------------------------------------- */
typedef enum sjk_balance_mode {
    SJK_BALANCE_SJ = 0,        /* our default: up to 16 passes, rule chosen by measurement
                                  (docs/BALANCING.md) */
    SJK_BALANCE_REFERENCE,     /* exactly the KVarN reference (8 passes, its clamps) */
    SJK_BALANCE_OFF            /* all scales 1 */
} sjk_balance_mode;

/* ------------------------------------------------------------------------------------
 * Sealed records
 *
 * One record holds one (layer, KV head, 128-token group): K and V of 128 rotated rows of
 * head_dim values. Layout (docs/FORMAT.md):
 *
 *   +-----------+-----------+-----------+----------+---------+--------+-----------+-----------+
 *   | K payload | V payload | Kscale[D] | Kzero[D] | Ktok[G] | Vch[D] | Vscale[G] | Vzero[G]  |
 *   +-----------+-----------+-----------+----------+---------+--------+-----------+-----------+
 *     D*G*bK/8    G*D*bV/8    fp16 ...
 *
 *   K[t,d] = (qK[t,d] * Kscale[d] + Kzero[d]) * Ktok[t]
 *   V[t,d] = (qV[t,d] * Vscale[t] + Vzero[t]) * Vch[d]
 * ---------------------------------------------------------------------------------- */
#define SJK_GROUP 128 /* tokens per record */

typedef enum sjk_body {
    SJK_BODY_SCALAR = 0,   /* asymmetric round-to-nearest per row */
    SJK_BODY_TRELLIS,      /* 64-state bitshift trellis, same record size; sequences run
                              along the token axis (128 tokens of one channel) */
    SJK_BODY_TRELLIS_CHANNEL, /* the same trellis with sequences along the channel axis (D
                              channels of one token; the SJ-KVaRN note's earlier default) */
    SJK_BODY_TRELLIS_REAL, /* the token-axis trellis with codebooks trained on the balanced
                              K and V of real models, one set for K and one for V (record
                              format 3; docs/FORMAT.md) */
    SJK_BODY_TRELLIS_I8,   /* SJK_BODY_TRELLIS with its codebooks on an int8 grid: every
                              entry a multiple of the table's step max|C| / 127 (record
                              format 4; the `t` suffix since then; docs/FORMAT.md) */
    SJK_BODY_TRELLIS_REAL_I8, /* SJK_BODY_TRELLIS_REAL on the int8 grid (format 4; `tr`) */
    SJK_BODY_TRELLIS_S128  /* the token-axis trellis on tables built from 128 int8 entries,
                              read with one byte permute per 64 values (record format 5;
                              `ts`; docs/FORMAT.md) */
} sjk_body;

typedef struct sjk_record_params {
    uint32_t head_dim;          /* D: 64, 128, 256 or 512 */
    uint8_t bits_k;             /* 2..8 (5..8: record format v2, scalar body only) */
    uint8_t bits_v;             /* 2..8 */
    uint8_t body;               /* sjk_body: of the tiles of 2..4 bits; a tile above 4 bits
                                   is always scalar (a trellis body needs one tile of 2..4) */
    uint8_t balance;            /* sjk_balance_mode */
} sjk_record_params;

/* Defaults: D = 256, 4/4, scalar body, sj balancing. */
sjk_record_params sjk_record_params_default(void);
/* SJK_OK, or SJK_ERR_PARAM with *bad_field (if non-NULL) set to the field's name. */
sjk_status sjk_record_params_validate(const sjk_record_params *p, const char **bad_field);

/* Bytes of one record (0 for invalid params). 35,072 at D = 256, 4/4. */
size_t sjk_record_nbytes(const sjk_record_params *p);
/* Scratch bytes sjk_record_encode needs (callers allocate once and reuse). */
size_t sjk_record_scratch_nbytes(const sjk_record_params *p);

/* Seals one group: k and v are [SJK_GROUP][head_dim] rotated rows (token-major). Balances,
 * quantizes and writes one record into dst. Never allocates; uses only scratch.
 * Non-finite inputs are replaced as docs/FORMAT.md says; no NaN is ever stored.
 * Thread-safe for distinct dst/scratch. */
sjk_status sjk_record_encode(const sjk_record_params *p, void *dst, size_t dst_cap,
                             const float *k, const float *v,
                             void *scratch, size_t scratch_nbytes);

/* Decodes one record into k and v, each [SJK_GROUP][head_dim] (rotated basis). */
sjk_status sjk_record_decode(const sjk_record_params *p, float *k, float *v,
                             const void *src, size_t src_nbytes);

/* ------------------------------------------------------------------------------------
 * Cache
 *
 * A cache holds the K/V history of n_seqs independent sequences for every attention layer
 * of a model, n_kv_heads KV heads of head_dim values each, up to max_pos positions per
 * sequence. Everything it will ever need (regions, scratch, seal workers) is allocated
 * once, by sjk_cache_create; sjk_cache_estimate returns that exact byte count first.
 * Append, seal, attend and truncate never allocate.
 *
 * Rows in, rows out. Callers append the model's own K and V rows (post-RoPE, NOT
 * rotated) and pass their own query rows (post-RoPE, not rotated) to attend; the cache
 * rotates rows into the Hadamard basis itself and rotates the attention output back, so
 * out = softmax(scale · q·Kᵀ) · V in the model's basis. (The rotation is orthonormal, so
 * scores are unchanged by it; only quantization error differs.)
 *
 * Regions of one (sequence, layer, KV head) in a compressed ("sj" / "kvarn") layer:
 *
 *   position 0        sink            B (body end)                 N (length)
 *   |----- sink -----|------- body: sealed records -------|--- staging ring ---|
 *     fp16, rotated     one record per 128-token group      rotated rows in the
 *     (default 128)     (immutable once sealed)             staging format
 *
 * Policy (docs/DESIGN.md §2.5): the tail N − B grows until it reaches tail_max; then every full
 * group older than the newest tail_min positions is sealed in one batch (inside the
 * append that reached tail_max). tail_max = 0 is a fixed tail: a group is sealed as soon
 * as it is older than the newest tail_min positions. sjk_cache_seal_idle seals back to
 * tail_min at any time. The ring holds ceil(max tail / 128) · 128 rows, so no unsealed
 * row is ever overwritten; the body has floor((max_pos − sink − tail_min) / 128) record
 * slots, as every seal keeps the newest tail_min positions in the ring. A seal encodes the staged rows as attention saw them (read
 * back from the staging format). Uniform layers ("f16", "q8_0/q4_0", ...) store every
 * position as one row of their K and V formats, optionally rotated, and never seal.
 *
 * Sink rows and f16 staging rows are stored with NaN -> 0 and ±Inf saturated to ±65504,
 * so one bad activation cannot poison every later softmax; records do the same
 * (docs/FORMAT.md).
 *
 * Threads: a handle is not thread-safe; one call at a time per handle. The handle owns a
 * small pool of n_threads − 1 worker threads (created by sjk_cache_create, joined by
 * sjk_cache_free) that seals run across (layer, head, group) tiles and attention across
 * heads and position ranges. Distinct handles are independent.
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_cache sjk_cache;

typedef enum sjk_cache_kind {
    SJK_KIND_UNIFORM = 0, /* every position one row of k_format / v_format */
    SJK_KIND_SJ,          /* SJ-KVaRN: sink + sealed records + staging ring, adaptive tail */
    SJK_KIND_KVARN        /* KVarN paper-faithful: reference balancing, scalar body, fp16 tail */
} sjk_cache_kind;

/* How one layer stores its K/V. Build one with sjk_layer_config_default() or
 * sjk_cache_config_parse(); fields a kind does not use are ignored. */
typedef struct sjk_layer_config {
    uint8_t kind;       /* sjk_cache_kind */
    uint8_t k_format;   /* UNIFORM: sjk_format of K rows (any format of sjk_format_get) */
    uint8_t v_format;   /* UNIFORM: sjk_format of V rows */
    uint8_t rotate;     /* UNIFORM: 1 = store Hadamard-rotated rows (SJ/KVARN always do) */
    uint8_t bits_k;     /* SJ/KVARN: body bits of K, 2..8 (above 4: a scalar tile) */
    uint8_t bits_v;     /* SJ/KVARN: body bits of V, 2..8 */
    uint8_t body;       /* SJ/KVARN: sjk_body (KVARN: scalar only) */
    uint8_t balance;    /* SJ/KVARN: sjk_balance_mode (SJ default SJK_BALANCE_SJ,
                           KVARN SJK_BALANCE_REFERENCE) */
    uint8_t staging;    /* SJ/KVARN: ring format: SJK_FMT_TQ6_0_STAGE (SJ default),
                           SJK_FMT_Q8_0 or SJK_FMT_F16 (KVARN). At head_dim 64 a row is
                           shorter than tq6_0's 128-value block: the ring uses q8_0. */
    uint8_t center;     /* SJ/KVARN: 1 = ring rows are stored minus the sink's mean row
                           (docs/FORMAT.md "Ring centering"; SJ default 1, KVARN 0). Exact
                           in attention; it removes the rows' common offset (large on keys)
                           before the 6-bit staging format spends its levels on it. */
    uint8_t reserved[2];
    uint32_t sink;      /* SJ/KVARN: fp16 sink positions, a multiple of 128 (default 128) */
    uint32_t tail_min;  /* SJ/KVARN: newest positions never sealed (SJ 4096, KVARN 0) */
    uint32_t tail_max;  /* SJ/KVARN: tail length that triggers a batched seal; 0 = fixed
                           tail (SJ 8192, KVARN 0). Nonzero requires >= tail_min + 128. */
    uint32_t rot_block; /* rotation block: 0 = default (head_dim, or 256 for D = 512) */
} sjk_layer_config;

/* The default layer: SJ 4/4, scalar body, tq6_0 staging, sink 128, tail 4096/8192. */
sjk_layer_config sjk_layer_config_default(void);

/* The most threads one cache runs (sjk_cache_params.n_threads). A host with more CPUs
 * gives the cache this many (the host's own pool may be larger). */
#define SJK_CACHE_MAX_THREADS 64

typedef struct sjk_cache_params {
    uint32_t n_layers;      /* attention layers held by this cache, >= 1 */
    uint32_t n_kv_heads;    /* KV heads per layer, >= 1 */
    uint32_t n_q_heads;     /* query heads per layer, a multiple of n_kv_heads (GQA) */
    uint32_t head_dim;      /* D: 64, 128, 256 or 512 */
    uint32_t max_pos;       /* positions per sequence, >= 1 */
    uint32_t n_seqs;        /* independent sequences, >= 1 */
    uint32_t max_q_rows;    /* most query rows per attend call (prefill chunk), >= 1 */
    uint32_t n_threads;     /* threads for seal and attention incl. the caller,
                               1..SJK_CACHE_MAX_THREADS */
    const sjk_layer_config *layers; /* [n_layers] per-layer configurations, or NULL:
                                       every layer uses `layer`. Copied by create. */
    sjk_layer_config layer;
} sjk_cache_params;

/* Defaults: 1 layer, 1 KV head, 1 query head, D = 256, max_pos 32768, 1 sequence,
 * max_q_rows 512, 1 thread, layers NULL, layer = sjk_layer_config_default(). */
sjk_cache_params sjk_cache_params_default(void);

/* SJK_OK, or SJK_ERR_PARAM with *bad_field (if non-NULL) naming the first bad field as a
 * static string: "head_dim", "n_q_heads", ...; for a layer's field "layers[].tail_max"
 * when p->layers is set and "tail_max" for p->layer. The static name cannot say which
 * layer; sjk_cache_params_check does. */
sjk_status sjk_cache_params_validate(const sjk_cache_params *p, const char **bad_field);

/* The same check, naming the first bad field in why[0..why_cap) as a NUL-terminated
 * string with the layer's index: "head_dim", "layers[3].tail_max" (a field of
 * p->layers[3]) or "layer.tail_max" (of p->layer); "" when p is valid. Truncates to fit;
 * why may be NULL (then why_cap is ignored). Does not allocate; thread-safe. */
sjk_status sjk_cache_params_check(const sjk_cache_params *p, char *why, size_t why_cap);

/* Parses one configuration string into out[0..n_layers) (see README, "KV configuration
 * strings"): `f16`, `q8_0`, `q8_0/q4_0`, `q4_0:rot`, `sj`, `sj:4/4`, `sj:3/3t`,
 * `sj:3/2t:tail=2048`, `sj:3/3t:edge=4/4`, `kvarn:4/4`, `kvarn:4/4:tail=1024`, ...
 * On error returns SJK_ERR_PARAM and writes a message naming the bad part into err
 * (NUL-terminated, truncated to err_cap; err may be NULL). Thread-safe; never allocates. */
sjk_status sjk_cache_config_parse(const char *str, uint32_t n_layers, sjk_layer_config *out,
                                  char *err, size_t err_cap);

/* Writes a canonical configuration string for one layer ("sj:3/3t", "q8_0/q4_0:rot",
 * "kvarn:4/4:tail=1024", ...) into dst. SJK_ERR_BUFFER if dst_cap is too small. */
sjk_status sjk_layer_config_str(const sjk_layer_config *c, char *dst, size_t dst_cap);

/* Exact bytes sjk_cache_create will allocate for p (one allocation, plus the pool's
 * thread stacks which the OS provides). Never allocates. */
sjk_status sjk_cache_estimate(const sjk_cache_params *p, size_t *nbytes);

/* Creates a cache; *out receives the handle (NULL on error). Allocates once, starts
 * n_threads − 1 workers. SJK_ERR_PARAM (validate), SJK_ERR_NOMEM, SJK_ERR_UNSUPPORTED
 * (a format or body this build lacks). */
sjk_status sjk_cache_create(const sjk_cache_params *p, sjk_cache **out);
/* Joins the workers and frees everything. NULL is a no-op. */
void sjk_cache_free(sjk_cache *c);

/* Appends n_pos positions to layer `layer` of sequence `seq`.
 *   k, v: [n_pos][n_kv_heads][head_dim] fp32, the model's post-RoPE rows, NOT rotated.
 * Positions are numbered per (seq, layer) from 0; each layer is appended separately, in
 * any interleaving. May seal (policy above). SJK_ERR_PARAM, or SJK_ERR_RANGE past
 * max_pos: checked first, nothing is appended. Non-finite values are stored as the
 * formats define. Never allocates.
 * After a failure in the middle of the call (a seal that fails: an internal error, not
 * expected with parameters that passed validation) the positions before the failing
 * one, and the one that triggered the seal, are stored and readable
 * (sjk_cache_length says how many); the call's later positions are not; the body is as
 * before the seal, its rows still in the ring, and the next append or sjk_cache_seal
 * retries it. No stored row is ever overwritten: should the ring fill up because seals
 * keep failing, append tries the seal once more and returns its error, or SJK_ERR_RANGE,
 * without storing the position. */
sjk_status sjk_cache_append(sjk_cache *c, uint32_t seq, uint32_t layer,
                            const float *k, const float *v, size_t n_pos);

/* Attention of n_rows query rows against layer `layer` of sequence `seq`.
 *   q:   [n_rows][n_q_heads][head_dim] fp32, post-RoPE, NOT rotated
 *   out: [n_rows][n_q_heads][head_dim] fp32, in the model's basis
 * Row i is the query at position N − n_rows + i (N = current length), and sees positions
 * 0 … N − n_rows + i (causal). n_rows = 1 is decode; more is prefill (append the rows'
 * K/V first). Query head h reads KV head h / (n_q_heads / n_kv_heads). Scores are
 * scale · q·k (pass 1/sqrt(head_dim) for standard attention). SJK_ERR_RANGE if n_rows
 * is 0, exceeds max_q_rows or the length. fp32 throughout; never allocates. */
sjk_status sjk_cache_attend(sjk_cache *c, uint32_t seq, uint32_t layer, const float *q,
                            size_t n_rows, float scale, float *out);

/* Limits the threads later calls use to n (1 .. the n_threads the cache was created
 * with; larger values are clamped). Lets one cache be measured or run at several thread
 * counts. Never allocates. */
sjk_status sjk_cache_set_threads(sjk_cache *c, uint32_t n);

/* Seals by policy, for every layer of `seq`: the same seal append performs on reaching
 * tail_max (a no-op otherwise). */
sjk_status sjk_cache_seal(sjk_cache *c, uint32_t seq);
/* Idle seal: seals every full group older than the newest tail_min positions, for every
 * layer of `seq`, in one multi-threaded batch. */
sjk_status sjk_cache_seal_idle(sjk_cache *c, uint32_t seq);

/* Seals every full group of every compressed layer of `seq` that ends at or before
 * position pos (clamped to the length and to the record slots), keeping no tail: the
 * cut a prefix store publishes at (sjk_cache_block_export), so that a cache importing
 * the blocks below pos is in exactly this state. */
sjk_status sjk_cache_seal_to(sjk_cache *c, uint32_t seq, uint32_t pos);

/* Removes positions >= pos of every layer of `seq` (pos may exceed the length: no-op).
 * Positions in the sink or the staging ring are simply dropped. Sealed records are
 * immutable: if pos falls inside the body (pos < B of a layer), the records from the one
 * containing pos onward are dropped, every layer is cut back to the earliest such group
 * start, *resume_pos receives that position and SJK_ERR_REPROCESS is returned: the
 * caller must re-append positions resume_pos … pos − 1 (the cache is consistent, with
 * length resume_pos). Otherwise SJK_OK and *resume_pos = pos clamped to the length. */
sjk_status sjk_cache_truncate(sjk_cache *c, uint32_t seq, uint32_t pos, uint32_t *resume_pos);

/* Current length of (seq, layer), and its body end B (sealed positions end; for uniform
 * layers B = 0). */
sjk_status sjk_cache_length(const sjk_cache *c, uint32_t seq, uint32_t layer,
                            uint32_t *n_pos, uint32_t *body_end);

typedef struct sjk_cache_memory {
    size_t total_nbytes;    /* the one allocation (== sjk_cache_estimate) */
    size_t sink_nbytes;     /* fp16 sink rows, all sequences, layers, heads */
    size_t body_nbytes;     /* sealed-record slots */
    size_t ring_nbytes;     /* staging ring rows */
    size_t uniform_nbytes;  /* rows of uniform layers */
    size_t scratch_nbytes;  /* seal and attention scratch, pool, bookkeeping */
    size_t occupied_nbytes; /* bytes holding live K/V now (sink/ring counted by length) */
    double occupied_bits_per_value; /* occupied_nbytes * 8 / (positions * 2 * heads * D) */
    double allocated_bits_per_value;/* K/V region bytes * 8 / (max_pos * n_seqs * ...) */
    size_t seal_scratch_nbytes; /* the part of scratch_nbytes only compressed layers need:
                                   per thread, the seal tile and record-encode scratch
                                   beyond attention's own (0 for a cache of uniform layers) */
} sjk_cache_memory;

/* Memory report (current occupancy counts every sequence and layer). */
sjk_status sjk_cache_memory_report(const sjk_cache *c, sjk_cache_memory *m);
/* The allocation parts of the report (total, regions, scratch, seal scratch, allocated
 * bits) of the cache sjk_cache_create(p) would make, without making it; the occupancy
 * fields are 0. The same numbers as sjk_cache_memory_report on a new cache of p. */
sjk_status sjk_cache_estimate_memory(const sjk_cache_params *p, sjk_cache_memory *m);

/* Where a stored position lives (sjk_cache_read_rows). */
typedef enum sjk_region {
    SJK_REGION_SINK = 0,    /* fp16 sink row */
    SJK_REGION_BODY = 1,    /* sealed record */
    SJK_REGION_RING = 2,    /* staging ring row */
    SJK_REGION_UNIFORM = 3  /* row of a uniform layer */
} sjk_region;

/* Scratch bytes sjk_cache_read_rows needs (a record is decoded whole). */
size_t sjk_cache_read_scratch_nbytes(const sjk_cache *c);

/* Decodes positions pos .. pos + n_pos − 1 of (seq, layer, KV head) back to the model's
 * basis (post-RoPE, unrotated): the rows attention reads for them now, from wherever they
 * live (sink, sealed record, ring row plus the centering mean, uniform row), rotated
 * back. k, v: [n_pos][head_dim] fp32; region (may be NULL): [n_pos] sjk_region of each.
 * For analysis and tests (the KL study's region attribution); attention itself never
 * decodes whole rows. SJK_ERR_RANGE past the length, SJK_ERR_BUFFER for too little
 * scratch. Read-only; never allocates. */
sjk_status sjk_cache_read_rows(const sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t head,
                               uint32_t pos, uint32_t n_pos, float *k, float *v, uint8_t *region,
                               void *scratch, size_t scratch_nbytes);

/* Checks every internal invariant: lengths within max_pos; B = sink + 128·k and B <= N
 * (or B = sink before the sink fills); sealed groups within the record slots; the tail
 * N − B within the ring and below the seal trigger; every sealed record's fp16 scale
 * fields finite. SJK_OK or SJK_ERR_CORRUPT with a description in msg (may be NULL).
 * Read-only, O(sealed records); for tests and debugging. */
sjk_status sjk_cache_check(const sjk_cache *c, char *msg, size_t msg_cap);

/* ------------------------------------------------------------------------------------
 * Cache files: save and restore (docs/FORMAT.md "## Cache files", version 2)
 *
 * A cache file holds everything a cache holds now: every live region of every sequence
 * and layer (sink rows, sealed records, staged ring rows, uniform rows; only the
 * occupied parts), the lengths and body ends, the configuration and geometry, the file
 * and record format versions, and a caller-supplied model fingerprint of
 * SJK_FINGERPRINT_NBYTES bytes (any bytes that identify the model: a hash of its
 * weights, its file name and size ...; NULL means all zeros). Every section carries a
 * CRC-32C.
 *
 * Restore goes into an existing cache created with the same params (n_layers,
 * n_kv_heads, n_q_heads, head_dim, max_pos, n_seqs and every layer configuration;
 * max_q_rows and n_threads may differ). It never allocates: it reads the file twice
 * through a small stack buffer, first validating every byte (header and section
 * checksums, geometry, configuration, fingerprint, lengths, sealed-record scales) without
 * touching the cache, then copying into the cache's own regions. A file that fails
 * validation leaves the cache exactly as it was. Afterwards attention over the restored
 * cache gives bit-identical results to attention over the saved one.
 *
 * Errors (with a message naming what was wrong in err, NUL-terminated, may be NULL):
 *   SJK_ERR_FORMAT    not a cache file, or a file/record format version this build
 *                     does not read
 *   SJK_ERR_CORRUPT   a checksum, size or bound does not hold (bit flips, truncation)
 *   SJK_ERR_MISMATCH  a valid file for another model (fingerprint), configuration or
 *                     geometry
 *   SJK_ERR_IO        an OS call failed (errno preserved)
 * If the file changes between the two passes (another writer), the second pass detects
 * it, the cache is emptied (every length 0) and SJK_ERR_CORRUPT is returned.
 * ---------------------------------------------------------------------------------- */
#define SJK_CACHE_FILE_VERSION 2
#define SJK_FINGERPRINT_NBYTES 32

/* Bytes sjk_cache_save writes for the cache as it is now. */
sjk_status sjk_cache_file_nbytes(const sjk_cache *c, size_t *nbytes);

/* Saves atomically: writes a temporary file in path's directory, fsyncs it, renames it
 * over path and fsyncs the directory, so a crash at any moment leaves either the previous
 * file or the new one, never a mix. The file is created with mode 0600. A writer killed
 * mid-save leaves its temporary `path.tmp-XXXXXX` behind; each successful save of path
 * then removes those whose writer is gone (the writer holds an flock on its temporary
 * until the rename; one still locked belongs to a live save and is left alone). Read-only
 * on the cache; never allocates. SJK_ERR_IO (errno preserved), SJK_ERR_PARAM. */
sjk_status sjk_cache_save(const sjk_cache *c, const char *path,
                          const uint8_t *fingerprint, char *err, size_t err_cap);
/* The same bytes into memory: *nbytes receives the file size; dst may be NULL (size
 * only); SJK_ERR_BUFFER if dst_cap is smaller. */
sjk_status sjk_cache_save_memory(const sjk_cache *c, const uint8_t *fingerprint,
                                 void *dst, size_t dst_cap, size_t *nbytes);

/* Restores from a file or from memory (see above). */
sjk_status sjk_cache_restore(sjk_cache *c, const char *path, const uint8_t *fingerprint,
                             char *err, size_t err_cap);
sjk_status sjk_cache_restore_memory(sjk_cache *c, const void *src, size_t src_nbytes,
                                    const uint8_t *fingerprint, char *err, size_t err_cap);
/* Every check sjk_cache_restore_memory makes, and nothing else: the cache is only read.
 * SJK_OK means a restore of the same bytes into c would succeed. lengths (may be NULL)
 * receives the positions the file holds, [n_seqs][n_layers], so a caller that restores
 * more than the cache (a host session) can check the whole before changing anything. */
sjk_status sjk_cache_check_memory(const sjk_cache *c, const void *src, size_t src_nbytes,
                                  const uint8_t *fingerprint, uint32_t *lengths, char *err,
                                  size_t err_cap);

/* What a cache file says about itself, read without a cache (sjk_cache_file_inspect). */
typedef struct sjk_cache_file_info {
    uint32_t file_version;      /* header: cache file format version */
    uint32_t record_version;    /* header: record format version */
    uint32_t writer_version;    /* library that wrote it: major<<16 | minor<<8 | patch */
    uint32_t n_layers, n_kv_heads, n_q_heads, head_dim, max_pos, n_seqs;
    uint64_t file_nbytes;       /* what the header says (the real size is src_nbytes) */
    uint8_t fingerprint[SJK_FINGERPRINT_NBYTES];
    uint32_t n_sections;        /* sections the header announces: 2 + n_seqs * n_layers */
    uint32_t n_sections_ok;     /* sections read whose CRC-32C matched */
    uint32_t n_sections_bad;    /* sections read whose CRC-32C did not match */
} sjk_cache_file_info;

/* Reads a cache file from memory without a cache: the header (magic, CRC, versions,
 * geometry, fingerprint), then every section in order, checking its tag, index, size
 * against the file and its CRC-32C. A section whose CRC does not match is counted and the
 * walk goes on; a structural fault (truncation, a wrong tag, a size beyond the file,
 * trailing bytes) ends it. layers[0 .. min(n_layers, layers_cap)) receive the CONF
 * section's layer configurations and states[2 * i], states[2 * i + 1] for
 * i = seq * n_layers + layer < states_cap / 2 the STAT section's length N and body end B
 * (either array may be NULL). Values are reported as stored: this checks the file's
 * integrity, not that its contents make a valid cache (DATA sizes against (N, B), the
 * cache invariants, record scales); sjk_cache_restore into a cache created with these
 * parameters checks all of that. *info is filled as far as the file could be read, also
 * on error. SJK_OK when every check passed; SJK_ERR_FORMAT (not a cache file, a version
 * this build does not read), SJK_ERR_CORRUPT (a bad CRC, truncation or structure),
 * SJK_ERR_PARAM; err names the first problem. Never allocates; thread-safe. */
sjk_status sjk_cache_file_inspect(const void *src, size_t src_nbytes, sjk_cache_file_info *info,
                                  sjk_layer_config *layers, size_t layers_cap, uint32_t *states,
                                  size_t states_cap, char *err, size_t err_cap);

/* What cache files are made with, for a host whose own files are made the same way
 * (libsjkhost's models and session files). Thread-safe; none of them allocates.
 *  sjk_crc32c: the CRC-32C (Castagnoli) of the file sections, incremental
 *    (crc = sjk_crc32c(crc, next, n), starting from 0).
 *  sjk_tmp_create: creates and flocks the temporary file `path.tmp-XXXXXX` of an atomic
 *    save, its name into tmp (tmp_cap bytes); returns the descriptor (O_CLOEXEC, mode
 *    0600), or -1 with errno set; keep it open until after the rename.
 *  sjk_tmp_probe: 0 if a save of path could start now (a temporary is created and removed
 *    at once), else -1 with errno.
 *  sjk_tmp_sweep: removes the `path.tmp-XXXXXX` files whose writer is gone, as
 *    sjk_cache_save does after each save; returns how many.
 *  sjk_file_open_regular: opens path read-only (O_CLOEXEC) if it is a regular file, never
 *    blocking on a FIFO; *nbytes (may be NULL) receives its size. The descriptor, -1 with
 *    errno when the OS refuses, or -2 (errno EINVAL) when path is not a regular file.
 *  sjk_file_target_problem: NULL if path may be the target of an atomic save (absent, or
 *    a regular file), else why not, as a phrase for "PATH: <phrase>".
 * src/common/tmpfile.h and src/common/file.h say how they work. */
uint32_t sjk_crc32c(uint32_t crc, const void *data, size_t n);
int sjk_tmp_create(const char *path, char *tmp, size_t tmp_cap);
int sjk_tmp_probe(const char *path);
int sjk_tmp_sweep(const char *path);
int sjk_file_open_regular(const char *path, uint64_t *nbytes);
const char *sjk_file_target_problem(const char *path);

/* ------------------------------------------------------------------------------------
 * Blocks: export and import of final 128-token blocks (docs/FORMAT.md "## Cache blocks")
 *
 * Block i of a layer covers positions [128 i, 128 i + 128). For one KV head its bytes are
 * what the cache holds for those positions: inside the fp16 sink of a compressed layer
 * K rows then V rows ([128][head_dim] fp16 each); in the body the sealed record
 * (sjk_record_nbytes bytes); in a uniform layer K rows then V rows in the layer's
 * formats. A block is final once nothing can change it: sink and uniform rows once
 * appended, a record once sealed (the staging ring is never exported). Blocks are the
 * unit a prefix store shares: a fresh cache with the same configuration and geometry
 * (max_pos may differ as long as the blocks fit) that imports blocks 0 .. n-1 of every
 * layer is, byte for byte, in the state of the exporting cache cut at 128 n with no
 * tail (sjk_cache_seal_to(128 n)); appending and attending then give bit-identical
 * results. The bytes carry no configuration: the caller must key them by it.
 * ---------------------------------------------------------------------------------- */

/* The version of a block's bytes (sealed record layout, sink and row layouts); it
 * changes whenever any of them does, so that a store keyed by it never mixes them. */
#define SJK_CACHE_BLOCK_VERSION 1

/* Bytes of block `block` of one KV head of `layer` (the same for every head and
 * sequence). SJK_ERR_RANGE past max_pos or the record slots, SJK_ERR_UNSUPPORTED for a
 * block that straddles the end of a sink that is not a multiple of 128 (a sink clamped
 * to a small max_pos). Never allocates. */
sjk_status sjk_cache_block_nbytes(const sjk_cache *c, uint32_t layer, uint32_t block, size_t *nbytes);

/* How many leading blocks of `seq` are final in every layer (the least over layers). */
sjk_status sjk_cache_blocks_final(const sjk_cache *c, uint32_t seq, uint32_t *n_blocks);

/* Copies block `block` of (seq, layer, head) into dst (dst NULL: size only, in
 * *nbytes). SJK_ERR_RANGE if the block is not final, SJK_ERR_BUFFER if dst_cap is too
 * small. Read-only on the cache; never allocates. */
sjk_status sjk_cache_block_export(const sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t head,
                                  uint32_t block, void *dst, size_t dst_cap, size_t *nbytes);

/* Appends block `block` of every KV head of (seq, layer): src holds n_kv_heads blocks
 * back to back, head 0 first (src_nbytes = n_kv_heads * sjk_cache_block_nbytes). The
 * layer must hold exactly 128 * block positions, all final (nothing staged; else
 * SJK_ERR_RANGE). The bytes are checked first (SJK_ERR_CORRUPT for a non-finite fp16
 * sink or f16 row value or record scale field: bytes this cache never writes); a
 * rejected block changes nothing. The sink's last block also sets the ring center.
 * Never allocates. */
sjk_status sjk_cache_block_import(sjk_cache *c, uint32_t seq, uint32_t layer, uint32_t block,
                                  const void *src, size_t src_nbytes);

#ifdef __cplusplus
}
#endif
#endif /* SJKVARN_H */
