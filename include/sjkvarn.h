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
    SJK_CPU_AVX512 = 1u << 1, /* AVX-512 F/BW/VL/DQ + VNNI */
};
/* The features in use (after SJK_CPU_DISABLE). Thread-safe. */
unsigned sjk_cpu_features(void);

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
 * ring, whose input is already in the Hadamard basis).
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
    /* Encode n values (a multiple of block_values) into n/block_values blocks. */
    void (*encode)(void *dst, const float *src, size_t n);
    /* Decode n values. */
    void (*decode)(float *dst, const void *src, size_t n);
} sjk_format_info;

/* Traits of a format, or NULL for an out-of-range value. Thread-safe, never allocates. */
const sjk_format_info *sjk_format_get(sjk_format f);
/* Looks a format up by name; SJK_ERR_PARAM if unknown. */
sjk_status sjk_format_from_name(const char *name, sjk_format *out);
/* Bytes for a row of n values; 0 if n is not a multiple of the block size. */
size_t sjk_format_row_nbytes(sjk_format f, size_t n);
/* Checked encode/decode of one row. SJK_ERR_PARAM for a bad n, SJK_ERR_BUFFER for a
 * small dst or short src. NaN/Inf inputs are defined per format in docs/FORMAT.md. */
sjk_status sjk_format_encode_row(sjk_format f, void *dst, size_t dst_cap,
                                 const float *src, size_t n);
sjk_status sjk_format_decode_row(sjk_format f, float *dst, size_t n,
                                 const void *src, size_t src_nbytes);

/* ------------------------------------------------------------------------------------
 * Balancing (log-domain Sinkhorn-style), per 128-token tile
 *
 * A tile is an R x C fp32 matrix whose rows are the axis quantized as one group (K: rows =
 * channels, cols = tokens; V: rows = tokens, cols = channels). Balancing finds positive
 * row and column scales so tile / (s_row (x) s_col) has near-equal row and column spreads.
 * ---------------------------------------------------------------------------------- */
typedef enum sjk_balance_mode {
    SJK_BALANCE_SJ = 0,        /* our default: 16 passes, rule chosen by measurement */
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
    SJK_BODY_TRELLIS       /* 64-state bitshift trellis, same record size */
} sjk_body;

typedef struct sjk_record_params {
    uint32_t head_dim;          /* D: 64, 128, 256 or 512 */
    uint8_t bits_k;             /* 2, 3 or 4 */
    uint8_t bits_v;             /* 2, 3 or 4 */
    uint8_t body;               /* sjk_body */
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

#ifdef __cplusplus
}
#endif
#endif /* SJKVARN_H */
