/* eval_internal.h — the study's storage, shared by eval_study.c (which fills it) and the
 * writers eval_report.c and eval_svg.c (which only read it). */
#ifndef SJK_EVAL_INTERNAL_H
#define SJK_EVAL_INTERNAL_H

#include <stddef.h>

#include "sjkeval.h"

/* libsjkeval depends on the public headers of libsjkvarn only (the Makefile's INCS_EVAL),
 * so it keeps its own copies of these two lines: *out = a op b, 0 on overflow. */
static inline int eval_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int eval_add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

#define SJK_EVAL_MAX_CONFIGS 64
#define SJK_EVAL_NAME_MAX 128 /* SJKH_KV_STR_MAX + 1: a name is a --kv string */

typedef struct eval_col {
    char name[SJK_EVAL_NAME_MAX];
    size_t n, cap;        /* scored positions, capacity of every array below */
    double *kl;           /* [n] KL(p ‖ q) in nats */
    uint8_t *same;        /* [n] argmax q == argmax p */
    uint32_t *doc;        /* [n] document index */
    uint32_t *pos;        /* [n] absolute position in the context */
    double *bpv_occ;      /* [n] bits per value, occupied, at that moment */
    double *bpv_alloc;    /* [n] bits per value, allocated */
    uint64_t kv_bytes;    /* largest allocation seen */
    uint64_t tokens;      /* tokens fed */
    double seconds;       /* time spent feeding them */
} eval_col;

typedef struct eval_needle {
    uint32_t cfg, doc, distance, planned;
    double kl;
    uint8_t q_gold, p_gold;
} eval_needle;

struct sjk_eval_study {
    size_t n_configs, n_docs;
    char reference[SJK_EVAL_NAME_MAX]; /* the reference configuration's name */
    eval_col *cols;                 /* [n_configs] */
    char **doc_names;               /* [n_docs] */
    eval_needle *needles;           /* [n_needles] */
    size_t n_needles, needle_cap;
    int finished;
    sjk_eval_config_result *res;    /* [n_configs], valid after finish */
    sjk_eval_pair *pairs;           /* [n_pairs], (a, b) with a < b, row by row */
    size_t n_pairs;
};

size_t eval_pair_index(size_t nc, size_t a, size_t b);

#endif
