/* model.h — the loaded model (weights are views into the mapped GGUF) and the session
 * internals shared by model.c, forward.c and kv.c. */
#ifndef SJKH_MODEL_H
#define SJKH_MODEL_H

#include "kv.h"
#include "sjkhost.h"

typedef struct sjkh_layer_w {
    const sjkh_tensor *wq, *wk, *wv, *wo;       /* [n_embd -> n_head*hd], [-> n_kv*hd] x2, [n_head*hd -> n_embd] */
    const sjkh_tensor *w_gate, *w_up, *w_down;  /* [n_embd -> n_ff] x2, [n_ff -> n_embd] */
    float *attn_norm;       /* [n_embd] */
    float *ffn_norm;        /* [n_embd] */
    float *bq, *bk, *bv;    /* qwen2: [n_head*hd], [n_kv*hd] x2 (added after the projections) */
    float *q_norm, *k_norm; /* gemma3: [hd] */
    float *post_attn_norm;  /* gemma3: [n_embd] */
    float *post_ffw_norm;   /* gemma3: [n_embd] */
    int global;             /* full attention (cache grows with the context) */
    float rope_base;
} sjkh_layer_w;

struct sjkh_model {
    sjkh_gguf *g;
    sjkh_model_info info;
    char arch_name[16];
    const sjkh_tensor *tok_embd;  /* [n_vocab][n_embd] */
    const sjkh_tensor *output;    /* [n_vocab][n_embd]: tok_embd when tied */
    float *output_norm;           /* [n_embd] */
    sjkh_layer_w *layers;         /* [n_layers] */
    float *norm_arena;            /* all f32 norm vectors */
    float attn_scale;             /* 1/sqrt(hd) */
};

struct sjkh_session {
    const sjkh_model *m;
    sjkh_session_params p;
    char kv_str[128];
    int32_t bad_layer; /* feed: the layer whose output held NaN/Inf (n_layers: output), or -1 */
    sjk_pool *pool;
    sjkh_kv *kv;
    uint32_t n_past;
    sjk_status failed;            /* SJK_OK, or the status of a feed that failed in the middle
                                     of a chunk: its layers then hold different lengths, so
                                     feed and save refuse until reset or a successful load */
    uint32_t B;                   /* n_batch */
    /* activations for one chunk of B tokens */
    float *x;      /* [B][n_embd] residual stream */
    float *xb;     /* [B][n_embd] normed input of a sub-block */
    float *xb2;    /* [B][n_embd] sub-block output */
    float *q;      /* [B][n_head][hd] */
    float *k;      /* [B][n_kv][hd] */
    float *v;      /* [B][n_kv][hd] */
    float *att;    /* [B][n_head][hd] attention output */
    float *hb;     /* [B][n_ff] gate */
    float *hb2;    /* [B][n_ff] up */
    float *rope_cos, *rope_sin; /* [2][B][hd/2]: local base, global base */
    uint8_t *xq;   /* [B][max row in dot type] quantized activations */
    size_t xq_row_nbytes;
    uint32_t xq_type;            /* dot type currently in xq (for reuse) */
    const float *xq_src;
    size_t xq_n_in;
    int xq_expanded;              /* xr holds xq expanded back to f32 */
    uint8_t *xp;   /* [B][xq_row_nbytes] xq as vec_dotn takes it (sjkh_dotn_prepare) */
    int xp_ready;                 /* xp holds the current xq prepared */
    float *xr;     /* act_quant 1, B >= exact_min_tok: [B][max row] the quantized activations
                      as f32 (d * q), input of the panel kernel for prefill chunks */
    float *xd;     /* with xr: [B][max row / 32] Q8_1 blocks' fp16(s) - d * sum(q) (forward.c) */
    float *wdq;    /* act_quant 0: [n_threads][MM_WDQ_ROWS][max row] weight rows and panel (forward.c) */
    size_t wdq_per_thread;        /* floats per thread */
    uint32_t blk_win_lo, blk_win_hi; /* window blocks imported so far, [lo, hi) (session_block.c) */
    uint32_t exact_min_tok;       /* act_quant 1: chunks of >= this many tokens run the f32
                                     panel matmul on rounded activations (forward.c matmul;
                                     UINT32_MAX: never; wdq and xr exist when B >= it) */
    int decode_rows;              /* the pass is a decode batch (sjkh_session_decode_batch):
                                     act_quant 1 keeps the integer dots at any row count, so
                                     each row's logits are those of its session alone */
};

#endif
