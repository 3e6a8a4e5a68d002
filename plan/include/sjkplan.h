/* sjkplan.h — capacity planning for libsjkhost: how much KV memory a model needs at a
 * context, for any cache configuration, and which configuration to use under a memory
 * budget (docs/DESIGN.md §5; docs/BACKGROUND.md, "The serving study").
 *
 * Two parts:
 *
 *  1. The size model. A model's attention geometry is read from GGUF metadata only (no
 *     weights are touched): block count, head counts (scalar or per layer), head size,
 *     the sliding window and which layers use it, and which layers are recurrent (no
 *     KV at all). The bytes are NOT re-derived here: the growing layers are priced by
 *     sjk_cache_estimate() with exactly the parameters a host session passes to
 *     sjk_cache_create(), and the sliding-window layers by the host's own window-cache
 *     function (sjkh_kv_host_layer_nbytes), so for every model the host can run the
 *     estimate IS the allocation (tests/test_plan.c creates the real caches and checks).
 *     Recurrent layers hold a constant-size state (llama.cpp's f32 conv + SSM state
 *     formula, from the ssm.* keys) that is counted once per session, like windows.
 *
 *  2. The automatic tier. Given a context, a budget and a quality-floor table (mean KL
 *     per model and configuration, measured by `sjkvarn eval`), walk the ladder
 *     f16 -> q8_0/q8_0 -> sj:6/6 -> q8_0/q4_0 -> sj:6/4 -> sj:4/4 -> sj:4/4 (q8_0 tail) -> sj:4/4t
 *     -> sj:4/3t (q8_0 tail) -> sj:4/3t -> sj:3/2t (the sj rungs after sj:4/4 with short
 *     rings or tails, and real-data twins: sjkh_plan_ladder) and take the first
 *     rung that keeps the whole cache resident and is allowed by the floor. The format
 *     of the table and the rule for rungs without a measurement are in docs/PLAN.md.
 *
 * Budgets cover the KV memory of the sessions only (the configured cache of the growing
 * layers, with its scratch, plus window caches and recurrent states), not the weights
 * or the activation buffers. Everything here is thread-safe (no shared state) and
 * allocates only where it says so. */
#ifndef SJKPLAN_H
#define SJKPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "sjkhost.h"
#include "sjkvarn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SJKH_PLAN_MAX_LAYERS 4096 /* the cache's own limit on layers */

typedef enum sjkh_plan_layer_kind {
    SJKH_PLAN_LAYER_FULL = 0,  /* full attention: its cache grows with the context */
    SJKH_PLAN_LAYER_WINDOW,    /* sliding-window attention: bounded (host fp16 window) */
    SJKH_PLAN_LAYER_RECURRENT  /* no attention: a constant-size recurrent state */
} sjkh_plan_layer_kind;

/* The attention geometry of one model. Plain data (about 20 KiB): fill it from a GGUF
 * with sjkh_plan_model_from_gguf, or by hand for a hypothetical model. */
typedef struct sjkh_plan_model {
    char arch[32];                 /* general.architecture */
    char name[64];                 /* general.name, or "" */
    uint32_t n_layers;
    uint32_t head_dim;             /* K and V head size (must be equal for a cache) */
    uint32_t n_ctx_train;          /* the model's context length (0 = unknown) */
    uint32_t sliding_window;       /* window of WINDOW layers (0 = none) */
    uint64_t recurrent_state_nbytes; /* per RECURRENT layer and session (0 = unknown) */
    uint64_t weights_nbytes;       /* tensor bytes listed in the file (information only) */
    uint8_t kind[SJKH_PLAN_MAX_LAYERS];        /* sjkh_plan_layer_kind per layer */
    uint16_t n_kv_heads[SJKH_PLAN_MAX_LAYERS]; /* per layer (0 for RECURRENT) */
    uint16_t n_q_heads[SJKH_PLAN_MAX_LAYERS];  /* per layer (0 for RECURRENT) */
    char note[256];                /* assumptions made while reading, or "" */
} sjkh_plan_model;

/* Reads the geometry from GGUF metadata (keys "<arch>.block_count",
 * ".attention.head_count[_kv]" (scalars or per-layer arrays; a 0 entry = a layer without
 * attention), ".attention.key_length/value_length" (default embedding_length /
 * head_count), ".attention.sliding_window" with ".attention.sliding_window_pattern"
 * (an int P: layer il slides iff il % P < P - 1; or a per-layer bool array) or the
 * architecture's built-in pattern (gemma3: 6, gemma2: 2, cohere2: 4), ".full_attention_
 * interval" (hybrids: layer il has attention iff (il + 1) % interval == 0), ".ssm.*"
 * (recurrent state)). SJK_ERR_FORMAT with err naming the key for missing or implausible
 * metadata. Never allocates. */
sjk_status sjkh_plan_model_from_gguf(const sjkh_gguf *g, sjkh_plan_model *m, char *err, size_t err_cap);
/* Opens path (a mapping, released before returning) and reads it as above. */
sjk_status sjkh_plan_model_open(const char *path, sjkh_plan_model *m, char *err, size_t err_cap);

/* Layer counts by kind. */
uint32_t sjkh_plan_model_count(const sjkh_plan_model *m, sjkh_plan_layer_kind kind);

typedef struct sjkh_plan_params {
    uint32_t n_ctx;      /* positions per session, >= 1 */
    uint32_t n_batch;    /* prefill chunk of the sessions (run/eval: 512) */
    uint32_t n_threads;  /* threads per session (the cache keeps scratch per thread) */
    uint32_t n_sessions; /* sessions, each with its own caches, >= 1 */
    uint32_t window_type; /* sjkh_window_type of the sliding-window layers (as
                             sjkh_session_params.window_type; default f16) */
} sjkh_plan_params;

/* n_ctx 4096, n_batch 512, n_threads 1, n_sessions 1, window_type f16. */
sjkh_plan_params sjkh_plan_params_default(void);

typedef struct sjkh_plan_size {
    size_t total_nbytes;     /* n_sessions * session_nbytes */
    size_t session_nbytes;   /* one session: growing + window + recurrent (what
                                sjkh_session_kv_report's total_nbytes reports) */
    size_t growing_nbytes;   /* one session: the configured cache of the growing layers */
    size_t window_nbytes;    /* one session: sliding-window caches (bounded) */
    size_t recurrent_nbytes; /* one session: recurrent states (bounded) */
    double token_nbytes;     /* bytes per added position at long context, one session,
                                summed over the growing layers (the "KiB per token") */
    double f16_token_nbytes; /* the same for an f16 cache (the 100% reference) */
    double bits_per_value;   /* 8 * token_nbytes / (2 * K/V values per position) */
    size_t kv_alloc_nbytes;  /* one session, growing layers: the K/V regions (sink, record
                                slots, the whole ring, uniform rows) + the scratch only
                                compressed layers need (seal_scratch_nbytes): what
                                `sjkvarn eval` counts as allocated (docs/EVAL.md) */
    double bits_per_value_allocated; /* 8 * kv_alloc_nbytes / (n_ctx * K/V values per
                                        position of the growing layers) */
    uint32_t n_full, n_window, n_recurrent;
} sjkh_plan_size;
/* (window_nbytes uses p->window_type; a q8_0 window at a head size that is not a
 * multiple of 32 is SJK_ERR_UNSUPPORTED, as sjkh_session_create says.) */

/* Memory of p->n_sessions sessions of model m at p->n_ctx with cache configuration kv
 * ("host-f16" or any libsjkvarn configuration string) for the growing layers.
 * SJK_ERR_PARAM (bad params or configuration; err says which), SJK_ERR_UNSUPPORTED (the
 * configuration cannot hold this geometry, e.g. a 128-value format at head size 64, or a
 * head size the cache does not support), SJK_ERR_NOMEM (sizes overflow size_t).
 * Never allocates. */
sjk_status sjkh_plan_estimate(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p,
                              sjkh_plan_size *out, char *err, size_t err_cap);

/* The largest context (<= max_ctx) at which p->n_sessions sessions fit in budget_nbytes
 * (p->n_ctx is ignored). *n_ctx = 0 when not even one position fits. Binary search over
 * sjkh_plan_estimate (the total is non-decreasing in the context). */
sjk_status sjkh_plan_max_ctx(const sjkh_plan_model *m, const char *kv, const sjkh_plan_params *p,
                             size_t budget_nbytes, uint32_t max_ctx, uint32_t *n_ctx);

/* Sizes as text (parsing them is the CLI's: tools/cli_parse.h sjk_cli_parse_size).
 * "1.50 GiB", "512.0 MiB", "12.0 KiB", "100 B" into dst. */
void sjkh_format_size(size_t n, char *dst, size_t cap);

/* ------------------------------------------------------------------------------------
 * Quality floor: a table of measured mean KL (nats, vs the f16 reference) per model,
 * context and configuration (docs/quality-floor.csv; format in docs/PLAN.md):
 *
 *   model,context,config,mean_kl,source
 *   gemma3-270m,16384,q8_0/q8_0,1.76e-4,docs/results/kl-gemma3-16k.csv: ...
 *   qwen2.5-1.5b,*,sj:4/4,unmeasured,sjkvarn eval -m qwen2.5-1.5b --kv sj:4/4 ...
 *
 * model is the name `sjkvarn run -m` takes (or a GGUF file's base name, or "*" for any
 * model); context the context the study measured at (tokens), or "*" for none stated;
 * config any configuration string (compared in canonical form); mean_kl a number or
 * "unmeasured"; source (the rest of the line, commas allowed) the command or study that
 * measured it. A (model, config) may have several rows: one per context and study. The
 * first version of the table, headed model,config,mean_kl,source, is still read (every
 * row of context "*"). '#' lines and blank lines are comments.
 * ---------------------------------------------------------------------------------- */
typedef struct sjkh_floor_row {
    char model[64];
    uint32_t context;  /* the context the KL was measured at; 0: not stated ("*") */
    char config[64];   /* canonical (sjk_layer_config_str) */
    double mean_kl;    /* < 0: unmeasured */
    char source[256];
} sjkh_floor_row;

typedef struct sjkh_quality_floor {
    size_t n_rows;
    sjkh_floor_row *rows;
    char path[512];    /* where it was read from, or "" */
} sjkh_quality_floor;

/* Parses a table from text (allocates; free with sjkh_quality_floor_free). SJK_ERR_FORMAT
 * with err naming the line for a malformed row. */
sjk_status sjkh_quality_floor_parse(const char *text, size_t n, sjkh_quality_floor **out, char *err,
                                    size_t err_cap);
/* Reads path and parses it. SJK_ERR_IO if it cannot be read. */
sjk_status sjkh_quality_floor_load(const char *path, sjkh_quality_floor **out, char *err, size_t err_cap);
void sjkh_quality_floor_free(sjkh_quality_floor *f);
/* The first row for (model, config) in table order, at any context: the model's own row,
 * else a "*" row. NULL when there is none. A row may still be unmeasured (mean_kl < 0). */
const sjkh_floor_row *sjkh_quality_floor_find(const sjkh_quality_floor *f, const char *model,
                                              const char *config);
/* The rows for (model, config) that speak for a plan at context n_ctx: the model's own
 * rows (else the "*" model's) measured at the context nearest to n_ctx, nearest by ratio
 * (8K and 32K are equally near 16K; a tie goes to the longer context), in table order;
 * rows of no stated context stand in only where the configuration has no row that states
 * one, and unmeasured rows only where it has no measured one. Writes up to cap row
 * pointers and returns how many there are (0: no row). */
size_t sjkh_quality_floor_rows(const sjkh_quality_floor *f, const char *model, const char *config, uint32_t n_ctx,
                               const sjkh_floor_row **rows, size_t cap);

/* ------------------------------------------------------------------------------------
 * Automatic tier
 * ---------------------------------------------------------------------------------- */

/* The ladder, least compression first: "f16", "q8_0/q8_0",
 * "sj:6/6:tail_min=256:tail_max=512:stage=q8_0", "q8_0/q4_0",
 * "sj:6/4:tail_min=256:tail_max=512:stage=q8_0", "sj:4/4", then the 4-bit rungs with a
 * q8_0 tail, "sj:4/4t:tail_min=256:tail_max=512", "sj:4/3t:...", "sj:3/2t:..." and their
 * twins (plan_tier.c has the whole list). *n receives its length. */
const char *const *sjkh_plan_ladder(size_t *n);

typedef struct sjkh_tier_request {
    const char *kv;            /* NULL or "auto": choose; anything else is explicit and
                                  always respected (only checked against the budget) */
    size_t budget_nbytes;      /* KV budget of all sessions; 0 = no budget (explicit kv
                                  only; auto needs one) */
    const sjkh_quality_floor *floor; /* may be NULL (no measurements) */
    const char *model_key;     /* the model's name in the floor table */
    double max_kl;             /* a rung is allowed if its measured mean KL <= max_kl;
                                  < 0: no floor (every rung allowed) */
} sjkh_tier_request;

typedef enum sjkh_rung_verdict {
    SJKH_RUNG_FITS = 0,        /* allowed, fits: chosen if first */
    SJKH_RUNG_TOO_BIG,         /* allowed, does not fit */
    SJKH_RUNG_UNMEASURED,      /* no measured mean KL for this model: not allowed */
    SJKH_RUNG_BELOW_FLOOR,     /* measured mean KL > max_kl: not allowed */
    SJKH_RUNG_UNSUPPORTED,     /* the configuration cannot hold this geometry */
    SJKH_RUNG_DOMINATED        /* allowed, fits, but another allowed rung that fits is no
                                  larger and has a measured mean KL no higher */
} sjkh_rung_verdict;

typedef struct sjkh_tier_choice {
    char kv[64];               /* the chosen configuration ("" when nothing fits) */
    int explicit_kv;           /* 1: the request named it */
    int fits;                  /* 1: the whole cache is resident within the budget */
    sjkh_plan_size size;       /* of the chosen configuration */
    char reason[3072];         /* one line: what was chosen and why, or what would fit */
    size_t n_rungs;            /* the ladder as evaluated */
    struct {
        const char *kv;
        sjkh_rung_verdict verdict;
        size_t nbytes;         /* total at the requested context (0 if unsupported) */
        double mean_kl;        /* < 0: unmeasured */
        uint32_t kl_context;   /* the context mean_kl was measured at (0: not stated) */
    } rungs[24];
} sjkh_tier_choice;

/* Chooses the configuration for sessions p of model m under r (see the top of this
 * file). SJK_OK with out->kv set (explicit kv: even when it does not fit; out->fits
 * says). SJK_ERR_RANGE when no allowed rung fits: out->reason then says what would fit
 * (the largest context at the cheapest allowed rung, and the budget this context needs).
 * SJK_ERR_PARAM for a bad request (err-free: out->reason says). Never allocates. */
sjk_status sjkh_plan_choose_tier(const sjkh_plan_model *m, const sjkh_plan_params *p,
                                 const sjkh_tier_request *r, sjkh_tier_choice *out);

#ifdef __cplusplus
}
#endif
#endif /* SJKPLAN_H */
