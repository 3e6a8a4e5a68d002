/* kv.h — the host's view of the KV cache: per layer, append K/V rows for the next
 * positions and attend with query rows. The forward pass is written against this and
 * nothing else, so where the rows live is a per-layer choice made at create:
 *
 *   growing layers (llama: all; gemma3: the global ones)
 *       config "host-f16": the host's own fp16 rows [n_ctx][n_kv][hd]
 *       any other string : one libsjkvarn cache (sjk_cache_*) holding all these layers
 *   window layers (gemma3 sliding-window layers): a ring of window + max_rows slots, so
 *       a prefill chunk never overwrites a row an earlier query of the same chunk still
 *       sees (query at p sees p - window + 1 … p); rows in fp16 or, with window_type
 *       SJKH_WINDOW_Q8_0, in ggml q8_0 blocks (kv.c draws both layouts).
 *
 * Shapes: k, v [n][n_kv][hd]; q, out [n_rows][n_q][hd]. Rows are post-RoPE. Query head h
 * reads KV head h / (n_q / n_kv). Append and attend never allocate. */
#ifndef SJKH_KV_H
#define SJKH_KV_H

#include "sjkhost.h"

typedef struct sjkh_kv sjkh_kv;

typedef struct sjkh_kv_params {
    uint32_t n_layers, n_kv_heads, n_q_heads, head_dim;
    uint32_t n_ctx;             /* positions per layer */
    uint32_t max_rows;          /* most rows per append/attend (the batch) */
    uint32_t n_threads;         /* for the libsjkvarn cache's own pool */
    const uint8_t *is_global;   /* [n_layers]: 1 = growing, 0 = sliding window */
    uint32_t window;            /* window of the non-global layers */
    const char *config;         /* "host-f16" or a libsjkvarn configuration string */
    uint32_t window_type;       /* sjkh_window_type of the window layers (0 = f16) */
} sjkh_kv_params;

/* The sizes of a host-held layer and the threads of the libsjkvarn cache come from the
 * public sjkh_kv_host_layer_nbytes and sjkh_kv_cache_threads (sjkhost.h): kv.c allocates
 * with the same functions that the planner (plan/src/plan.c) prices with. */

sjk_status sjkh_kv_create(const sjkh_kv_params *p, sjkh_kv **out, char *err, size_t err_cap);

void sjkh_kv_free(sjkh_kv *kv);
/* SJK_ERR_RANGE past n_ctx (nothing appended). */
sjk_status sjkh_kv_append(sjkh_kv *kv, uint32_t layer, const float *k, const float *v, size_t n);
/* The n_rows queries are the newest n_rows positions of the layer (append them first). */
sjk_status sjkh_kv_attend(sjkh_kv *kv, uint32_t layer, const float *q, size_t n_rows, float scale,
                          float *out, sjk_pool *pool);
sjk_status sjkh_kv_reset(sjkh_kv *kv);
/* Keeps the first `keep` positions of every layer, or fewer: *kept is what remains (the
 * start of a sealed record that contains `keep`; 0 when a sliding-window ring no longer
 * holds the rows the position after it would see, and then the cache is emptied). */
sjk_status sjkh_kv_truncate(sjkh_kv *kv, uint32_t keep, uint32_t *kept);
uint32_t sjkh_kv_length(const sjkh_kv *kv, uint32_t layer);
sjk_status sjkh_kv_get_report(const sjkh_kv *kv, sjkh_kv_report *r);
/* The libsjkvarn cache of the growing layers, or NULL when none (host-f16). */
sjk_cache *sjkh_kv_cache(sjkh_kv *kv);

/* Session files (host/model/session_file.c): the storage of one layer. *len points at the
 * layer's position count; for a host-held layer *k / *v are its rows (fp16 or q8_0),
 * *nbytes the bytes of each ([rows] x *row_nbytes); for a layer in the libsjkvarn cache
 * they are NULL / 0 and *cache receives that cache (else NULL). */
sjk_status sjkh_kv_layer_storage(sjkh_kv *kv, uint32_t layer, uint32_t **len, uint8_t **k, uint8_t **v,
                                 size_t *nbytes, size_t *row_nbytes, sjk_cache **cache);

#endif
