/* cache_internal.h — the cache handle, shared by src/cache (regions, policy) and
 * src/attention (reads). Everything below lives in the one block sjk_cache_create
 * allocates:
 *
 *   +------------------+  sjk_cache (this struct)
 *   | layers[L]        |  sjk_cache_layer: resolved configuration and offsets
 *   | state[S][L]      |  sjk_seq_layer: length N and body end B of each (seq, layer)
 *   | workers[T-1]     |  pool worker slots
 *   | scratch[T]       |  per-thread scratch (seal tiles, attention chunks)
 *   | attend buffers   |  rotated queries, per-unit partial softmax states
 *   | layer data ...   |  per layer: [n_seqs][n_kv_heads] head blocks (below)
 *   +------------------+
 *
 * One head block of a compressed (sj / kvarn) layer, for one (seq, KV head):
 *
 *   | sink K [sink][D] fp16 | sink V [sink][D] fp16 | [mu K [D] | mu V [D]] fp32 |
 *   | records [n_rec][rec_nbytes] | ring K [ring_cap][row] | ring V [ring_cap][row] |
 *                                                           (row = staging row bytes)
 * mu K / mu V exist when the layer centers its ring (cfg.center): the mean of the stored
 * fp16 sink rows 1 .. sink-1, set when the sink fills (and after a restore); ring slots
 * then hold row − mu, and every reader adds mu back (docs/FORMAT.md "Ring centering").
 *
 * of a uniform layer:  | K [max_pos][k_row] | V [max_pos][v_row] |
 *
 * Position p of a compressed layer: p < sink -> sink row p; p < B -> record
 * (p − sink) / 128, token (p − sink) % 128; else ring slot (p − sink) % ring_cap.
 * ring_cap is a multiple of 128, so a group occupies contiguous slots.
 */
#ifndef SJK_CACHE_INTERNAL_H
#define SJK_CACHE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cache/attn_layout.h"
#include "common/pool.h"
#include "codec/record.h"
#include "sjkvarn.h"

#define SJK_CACHE_ALIGN 64

struct sjk_attn_kernels; /* src/attention; the cache only holds a pointer (kern) */

typedef struct sjk_cache_layer {
    sjk_layer_config cfg;
    int compressed;           /* sj or kvarn */
    uint32_t rot_k, rot_v;    /* rotation blocks of K (and the query) and of V (and the
                                 output); 0 = stored unrotated */
    uint8_t k_fmt, v_fmt;     /* row formats: uniform K/V, or the staging format */
    size_t k_row_nbytes;      /* one stored K row (uniform or staging) */
    size_t v_row_nbytes;
    sjk_record_params rp;     /* compressed: record parameters */
    sjk_record_layout rl;     /* compressed: record layout */
    size_t rec_nbytes;
    uint32_t sink;            /* sink rows allocated (cfg.sink clamped to max_pos) */
    uint32_t n_rec;           /* record slots per head */
    uint32_t ring_cap;        /* ring rows per head (multiple of 128, or 0) */
    size_t off_sink_k, off_sink_v, off_mu, off_body, off_ring_k, off_ring_v; /* in a head block */
    size_t head_nbytes;       /* one head block */
    uint8_t *data;            /* [n_seqs][n_kv_heads] head blocks */
} sjk_cache_layer;

/* The seal trigger, the one rule that append, the invariant check, the file loader and
 * the ring's size share: a compressed layer's tail (n − b) is sealed when it reaches
 * tail_max, or, for a fixed tail (tail_max = 0), tail_min + one group. Validation bounds
 * tail_min and tail_max by 2^30, so the sum does not overflow. */
static inline uint32_t sjk_seal_trigger(const sjk_layer_config *cf)
{
    return cf->tail_max ? cf->tail_max : cf->tail_min + SJK_GROUP;
}

typedef struct sjk_seq_layer {
    uint32_t n;               /* length N */
    uint32_t b;               /* body end B (compressed: sink + 128 * sealed groups) */
} sjk_seq_layer;

struct sjk_cache {
    sjk_cache_params p;       /* copy; p.layers points at nothing (use layers[]) */
    uint32_t D, gq;           /* head dim, query heads per KV head */
    sjk_cache_layer *layers;  /* [n_layers] */
    sjk_seq_layer *state;     /* [n_seqs][n_layers] */
    sjk_pool pool;
    sjk_pool_worker *workers; /* [n_threads - 1] */
    uint8_t *scratch;         /* [n_threads][scratch_nbytes] */
    size_t scratch_nbytes;
    size_t rec_scratch_nbytes; /* a seal's part of a thread's scratch (from its start:
                                  the group's K, V, then the record encoder's scratch) */
    /* attention */
    float *q_rot;             /* [n_kv_heads][max_q_rows * gq][D] packed rotated queries */
    float *part;              /* [n_kv_heads * n_splits] units of SJK_ATTN_PART_FLOATS */
    uint32_t n_splits;        /* position splits per KV head (at most) */
    uint32_t active_threads;  /* sjk_cache_set_threads, <= p.n_threads */
    const struct sjk_attn_kernels *kern; /* attention kernels: NULL (create) is attend.c's
                                            sjk_attn_kernels_get(); tests may set another */
    size_t total_nbytes;
    size_t region_nbytes[4];  /* sink, body, ring, uniform */
};

static inline uint8_t *sjk_cache_head(const sjk_cache *c, const sjk_cache_layer *L,
                                      uint32_t seq, uint32_t head)
{
    return L->data + ((size_t)seq * c->p.n_kv_heads + head) * L->head_nbytes;
}
static inline sjk_seq_layer *sjk_cache_state(const sjk_cache *c, uint32_t seq, uint32_t layer)
{
    return &c->state[(size_t)seq * c->p.n_layers + layer];
}
static inline uint8_t *sjk_cache_thread_scratch(const sjk_cache *c, uint32_t worker)
{
    return c->scratch + (size_t)worker * c->scratch_nbytes;
}

/* Ring centering (cfg.center): mu K of a head block, then mu V; [2][D] fp32. */
static inline float *sjk_cache_mu(const sjk_cache_layer *L, uint8_t *head)
{
    return (float *)(void *)(head + L->off_mu);
}

/* Sets mu K and mu V of one head block from its full fp16 sink (no-op unless the layer
 * centers and has a sink). Deterministic: a restore recomputes the same bits. */
void sjk_cache_center_compute(const sjk_cache *c, const sjk_cache_layer *L, uint8_t *head);

#endif
