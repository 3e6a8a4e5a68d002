/* sjkeval.h — the KL study behind `sjkvarn eval` (docs/DESIGN.md §4, docs/EVAL.md), as a small library
 * inside libsjkhost. Dependencies point one way: the CLI uses this, this uses the host
 * through a table of callbacks (sjk_eval_backend), the host uses libsjkvarn.
 *
 *   reference (fp16 cache) ─ greedy ─> token stream ─┬─> candidate 1 ─ logits q1 ─┐
 *        │ logits p                                  ├─> candidate 2 ─ logits q2 ─┤
 *        └────────────── KL(p ‖ q_c) per generated position, in lockstep ─────────┘
 *
 * Pieces, each usable alone:
 *  - sjk_eval_compare_logits: KL(p ‖ q) in nats from two logit vectors (log-softmax in
 *    double, max-subtracted), and both argmaxes.
 *  - sjk_eval_summarize / sjk_eval_pair_compare: per-configuration summaries and paired
 *    ratios of mean KL with bootstrap 95% intervals (positions stratified by document, and
 *    documents), seeded, so the same input gives the same numbers on every run.
 *  - sjk_eval_study: collects scored positions (and needle answers) for a set of
 *    configurations, then writes a terminal table, CSV, JSON and SVG plots.
 *  - sjk_eval_run_doc / sjk_eval_run_needles: the lockstep driver over any backend.
 *
 * Nothing here calls exit() or abort(); every fallible call returns an sjk_status. The
 * study and the driver allocate (this is evaluation, not the cache's hot path). Handles
 * are not thread-safe; distinct handles are independent.
 */
#ifndef SJKEVAL_H
#define SJKEVAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sjkvarn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------
 * KL of two next-token distributions
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_eval_cmp {
    double kl;      /* KL(p ‖ q) in nats, >= 0 (rounding below 0 is clamped to 0) */
    uint32_t top_p; /* argmax of p's logits (first index of the maximum) */
    uint32_t top_q; /* argmax of q's logits */
} sjk_eval_cmp;

/* KL(p ‖ q) where p = softmax(p_logits), q = softmax(q_logits), both [n_vocab], computed
 * in double with max subtraction: KL = Σ_i p_i (log p_i − log q_i). Exact (no cut-off, no
 * u16 storage as llama-perplexity has, docs/BACKGROUND.md, "Engine facts"). SJK_ERR_PARAM for
 * n_vocab = 0 or NULL pointers; SJK_ERR_RANGE if any logit is NaN or +Inf (−Inf is a
 * token with probability 0; KL is +Inf when q gives 0 to a token p does not). Never
 * allocates; thread-safe. */
sjk_status sjk_eval_compare_logits(const float *p_logits, const float *q_logits,
                                   size_t n_vocab, sjk_eval_cmp *out);

/* The same comparison against one reference distribution and many candidates: prepare
 * the reference once (its normaliser, argmax and probabilities, written into the caller's
 * prob buffer [n_vocab]), then compare each candidate with a single exp pass over its
 * logits. Results equal sjk_eval_compare_logits's up to rounding (~1e-12 relative). The
 * reference's logits and prob must outlive r. Never allocates. */
typedef struct sjk_eval_ref {
    const float *logits;  /* [n_vocab] the reference's logits */
    const double *prob;   /* [n_vocab] p_i */
    size_t n_vocab;
    double log_z;         /* max + log Σ exp(logit − max) */
    uint32_t top;         /* argmax (first index of the maximum) */
} sjk_eval_ref;
sjk_status sjk_eval_ref_prepare(sjk_eval_ref *r, const float *logits, size_t n_vocab,
                                double *prob);
sjk_status sjk_eval_compare_ref(const sjk_eval_ref *r, const float *q_logits,
                                sjk_eval_cmp *out);

/* ------------------------------------------------------------------------------------
 * Summaries and paired comparisons
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_eval_summary {
    size_t n;          /* scored positions */
    double mean, median, p90, p99, max; /* of KL in nats; percentiles interpolate linearly
                                           at f·(n−1) of the sorted values, as llama.cpp */
    double same_top;   /* fraction of positions where argmax q == argmax p */
} sjk_eval_summary;

/* Summary of n KL values and n same-top flags (same_top may be NULL: then 0). n = 0 gives
 * an all-zero summary. Allocates a sorted copy (SJK_ERR_NOMEM if that fails). */
sjk_status sjk_eval_summarize(const double *kl, const uint8_t *same_top, size_t n,
                              sjk_eval_summary *out);

typedef struct sjk_eval_pair {
    double ratio;        /* mean KL of a ÷ mean KL of b (NaN if b's mean is 0) */
    double ci_low, ci_high;         /* 95% bootstrap interval, positions resampled within
                                       each document (stratified, paired) */
    double doc_ci_low, doc_ci_high; /* 95% bootstrap interval, documents resampled (each
                                       drawn document brings all its positions) */
    uint32_t docs_won;   /* documents where a's mean KL < b's */
    uint32_t n_docs;     /* documents with at least one position */
    size_t positions_won; /* positions where a's KL < b's */
    size_t n;            /* paired positions */
    uint32_t n_docs_partial; /* documents both configurations have but on different
                                position sets (a merge of runs with different -n or
                                --ctx): only their common positions are paired */
} sjk_eval_pair;

/* Paired comparison of configurations a and b over the same n positions: kl_a[i] and
 * kl_b[i] were measured at the same position, which belongs to document doc[i] (< n_docs).
 * n_boot resamples (0 = no intervals: they are NaN), drawn from a PRNG seeded with seed,
 * so results are identical run to run. Percentile intervals (2.5%, 97.5%). Allocates
 * O(n + n_boot + n_docs) scratch. */
sjk_status sjk_eval_pair_compare(const double *kl_a, const double *kl_b, const uint32_t *doc,
                                 size_t n, uint32_t n_docs, uint32_t n_boot, uint64_t seed,
                                 sjk_eval_pair *out);

/* ------------------------------------------------------------------------------------
 * A study: positions and needle answers for a set of configurations
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_eval_study sjk_eval_study;

/* Memory of one configuration's cache, as its memory report gives it. */
typedef struct sjk_eval_mem {
    double bpv_occupied;   /* bits per cached K/V value over the occupied cache */
    double bpv_allocated;  /* bits per value over what is allocated (rings at full size) */
    uint64_t kv_bytes;     /* bytes of KV cache allocated at this moment */
} sjk_eval_mem;

/* Creates a study of n_configs configurations (names copied, each < 64 bytes) and
 * n_docs documents (names copied). NULL on bad arguments or allocation failure. */
sjk_eval_study *sjk_eval_study_create(size_t n_configs, const char *const *config_names,
                                      size_t n_docs, const char *const *doc_names);
void sjk_eval_study_free(sjk_eval_study *st);

size_t sjk_eval_study_n_configs(const sjk_eval_study *st);
size_t sjk_eval_study_n_docs(const sjk_eval_study *st);
const char *sjk_eval_study_config_name(const sjk_eval_study *st, size_t cfg);

/* Records one scored position of configuration cfg: document doc, absolute position pos
 * in the context (of the token whose next-token distribution was compared), the
 * comparison, and the cache's memory at that moment (mem may be NULL). Pairs match
 * positions by the key (doc, pos), so configurations may cover different documents or
 * positions (a merged study does); a key may be added once per configuration. The order
 * of adding matters only to the bootstrap's draws: the driver adds in lockstep, the same
 * order for every configuration. Allocates as the arrays grow. */
sjk_status sjk_eval_study_add(sjk_eval_study *st, size_t cfg, size_t doc, uint32_t pos,
                              const sjk_eval_cmp *cmp, const sjk_eval_mem *mem);

/* Records a needle answer token of configuration cfg: look-back distance in tokens from
 * the answer to the planted fact, KL at that answer token, whether q's top token is the
 * gold token and whether p's is (the reference's own recall). */
sjk_status sjk_eval_study_add_needle(sjk_eval_study *st, size_t cfg, size_t doc,
                                     uint32_t distance, uint32_t planned_distance,
                                     double kl, int q_top_is_gold, int p_top_is_gold);

/* Names the reference configuration in the outputs (default "f16"; < 64 bytes). */
sjk_status sjk_eval_study_set_reference(sjk_eval_study *st, const char *name);

/* Adds to configuration cfg's throughput counters: tokens fed and seconds spent. */
void sjk_eval_study_add_time(sjk_eval_study *st, size_t cfg, uint64_t tokens, double seconds);

/* Computes summaries and all pairs (i < j: ratio = config i ÷ config j) with n_boot
 * resamples from seed. Each configuration's summary covers all its positions; a pair
 * covers the (doc, pos) keys both configurations have, in i's order (documents only one
 * has are left out of that pair's n, n_docs and intervals). SJK_ERR_PARAM if a
 * configuration has a key twice. Call once after the last add; the writers need it. */
sjk_status sjk_eval_study_finish(sjk_eval_study *st, uint32_t n_boot, uint64_t seed);

/* Per-configuration results after finish (NULL before finish or for a bad index). */
typedef struct sjk_eval_config_result {
    const char *config;
    sjk_eval_summary s;
    double bpv_occupied, bpv_allocated; /* means over the scored positions (0 if unknown) */
    uint64_t kv_bytes;                  /* largest KV allocation seen (final context) */
    double tokens_per_s;                /* 0 if no time was recorded */
    /* needle study (n_needle = 0 if none): answer tokens */
    size_t n_needle;
    double needle_mean_kl, needle_gold_top, needle_ref_gold_top;
} sjk_eval_config_result;
const sjk_eval_config_result *sjk_eval_study_result(const sjk_eval_study *st, size_t cfg);
/* Pair (a, b) with a < b, after finish; NULL otherwise. */
const sjk_eval_pair *sjk_eval_study_pair(const sjk_eval_study *st, size_t a, size_t b);

/* Writers (after finish). They return SJK_ERR_IO if a write fails, SJK_ERR_PARAM before
 * finish. Non-finite numbers are written as "nan"/"inf" in the table, empty fields in CSV
 * and null in JSON.
 *  - table: fixed-width terminal table of configurations, then pairs, then needles.
 *  - csv_configs: header + one row per configuration.
 *  - csv_pairs: header + one row per pair.
 *  - csv_positions: header + one row per scored position per configuration.
 *  - json: {"configs": [...], "pairs": [...], "needles": [...]} with at least the keys
 *    config, mean_kl, median_kl, p99_kl, same_top, bits_per_value, kv_bytes per
 *    configuration and a, b, ratio, ci_low, ci_high per pair.
 *  - svg_frontier: mean KL (log axis) against bits per value, one labelled point per
 *    configuration: the quality-per-bit frontier; sj configurations filled, the others
 *    (comparators) hollow, with the comparators' staircase (best KL at those bits or
 *    fewer) dashed. svg_frontier_allocated: the same against allocated bits per value.
 *  - svg_positions: mean KL (log axis) along the position axis, one line per
 *    configuration, positions binned into at most 64 bins. */
sjk_status sjk_eval_write_table(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_csv_configs(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_csv_pairs(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_csv_positions(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_json(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_svg_frontier(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_svg_frontier_allocated(const sjk_eval_study *st, FILE *f);
sjk_status sjk_eval_write_svg_positions(const sjk_eval_study *st, FILE *f);

/* ------------------------------------------------------------------------------------
 * Merging runs from their CSV outputs (`sjkvarn eval --merge`)
 *
 * A long study is run in pieces (a document, or a batch of configurations, per command)
 * so that partial results survive; this loads the pieces back as one study, whose
 * summaries, pairs (document-level intervals, documents won) and outputs are those of one
 * run over the union.
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_eval_merge_info {
    size_t n_files;          /* runs read */
    size_t n_rows;           /* position rows read, over all files */
    size_t n_rows_repeated;  /* rows of a (config, document) an earlier file already had,
                                identically: counted once */
    size_t n_needle_dropped; /* (file, config) rows with needle_n > 0: needle answers are
                                not in the CSVs, so the merged study has none */
} sjk_eval_merge_info;

/* Loads n_paths runs, each written by `sjkvarn eval --csv FILE`: FILE (one row per
 * configuration) and BASE-positions.csv beside it (BASE = FILE without ".csv"), and builds
 * one unfinished study in *out (the caller may set the reference's name, then finishes
 * and frees it). Configurations and documents are named as in the files, ordered by first
 * appearance (file order, then row order); each configuration's positions are the union
 * of its (document, position) rows over the files, in file order.
 *
 *  - The same (config, document) in two files: accepted once if the rows are identical,
 *    else SJK_ERR_MISMATCH naming both files.
 *  - bits per value (occupied) per position, from the positions files, as a run records
 *    it; allocated bits per value: each position takes its run's mean (runs record only
 *    the mean), so the merged value is the mean over positions; KV bytes: the largest any
 *    run saw (as one run reports the largest allocation over its documents).
 *  - tokens per second: all tokens fed over all seconds, both rebuilt per run and
 *    configuration (tokens of a document = its last scored position + 1, as the driver
 *    feeds them; seconds = tokens / the run's rate). Exact unless a run had --needle,
 *    whose extra tokens the CSVs do not record.
 *  - needles: left out (the CSVs keep only their means); info->n_needle_dropped says so.
 *
 * Errors, with a message naming the file and line in err (err_cap bytes, may be 0):
 * SJK_ERR_IO a file cannot be read; SJK_ERR_FORMAT a wrong header, a malformed line, a
 * field that is not a finite number in range, a repeated row or configuration;
 * SJK_ERR_MISMATCH a positions file whose configurations or counts differ from its main
 * file, or conflicting duplicates; SJK_ERR_RANGE more than 64 configurations in all;
 * SJK_ERR_PARAM bad arguments; SJK_ERR_NOMEM. *out is NULL on any error. info may be NULL.
 * Reads whole files and allocates; thread-safe on distinct arguments. */
sjk_status sjk_eval_study_merge_csv(const char *const *paths, size_t n_paths,
                                    sjk_eval_study **out, sjk_eval_merge_info *info,
                                    char *err, size_t err_cap);

/* ------------------------------------------------------------------------------------
 * Progress bar on stderr (only when stderr is a terminal, or when forced)
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_eval_progress {
    FILE *f;          /* NULL: silent */
    uint64_t total, done;
    double t0;        /* monotonic seconds at start */
    double last_draw;
    char label[48];
} sjk_eval_progress;

/* Starts a bar of `total` units on f if f is a terminal (or force != 0); silent otherwise. */
void sjk_eval_progress_start(sjk_eval_progress *p, FILE *f, int force, uint64_t total,
                             const char *label);
/* Advances by n units and redraws at most 10 times a second: bar, percent, counts, rate,
 * elapsed and ETA. */
void sjk_eval_progress_add(sjk_eval_progress *p, uint64_t n);
/* Draws the final state and ends the line. */
void sjk_eval_progress_end(sjk_eval_progress *p);
/* Formats the ETA for done of total after elapsed seconds into buf ("1m23s", "?"). */
void sjk_eval_format_eta(char *buf, size_t cap, uint64_t done, uint64_t total, double elapsed);
/* Monotonic clock in seconds. */
double sjk_eval_now(void);

/* ------------------------------------------------------------------------------------
 * The lockstep driver
 *
 * A backend is a model that can run several independent contexts, each with its own KV
 * cache configuration. The host provides one (tools/cmd_eval.c binds it); tests provide a
 * synthetic one.
 * ---------------------------------------------------------------------------------- */
typedef struct sjk_eval_backend {
    void *user;
    size_t n_vocab;
    size_t n_ctx_max;       /* the model's context length */
    /* Tokenizes text (n bytes). add_bos: prepend BOS if the model uses one. Writes at
     * most cap tokens, sets *n_out to the number the text needs (may exceed cap). */
    sjk_status (*tokenize)(void *user, const char *text, size_t n, int add_bos,
                           int32_t *tokens, size_t cap, size_t *n_out);
    /* Creates a context of n_ctx positions whose KV cache has configuration kv (a
     * configuration string such as "f16", "q8_0/q4_0", "sj:4/4"). */
    sjk_status (*ctx_create)(void *user, const char *kv, size_t n_ctx, void **ctx);
    void (*ctx_free)(void *user, void *ctx);
    /* Appends n tokens at the context's next positions and writes the logits after the
     * last one to logits [n_vocab]. */
    sjk_status (*ctx_feed)(void *user, void *ctx, const int32_t *tokens, size_t n,
                           float *logits);
    /* The cache's memory report (may be NULL: then bits per value and bytes are 0). */
    sjk_status (*ctx_memory)(void *user, void *ctx, sjk_eval_mem *out);
    /* Last error message of the backend for diagnostics (may be NULL). */
    const char *(*last_error)(void *user);
} sjk_eval_backend;

typedef struct sjk_eval_opts {
    size_t n_ctx;          /* context of every run (prompt + generation) */
    size_t n_gen;          /* generated (scored) tokens per document */
    size_t prefill_chunk;  /* tokens per ctx_feed call during the prompt (0 = all at once) */
    sjk_eval_progress *progress; /* advanced by one per token per configuration (may be NULL) */
    const char *reference; /* the reference's cache configuration; NULL = "f16" */
} sjk_eval_opts;

/* Cuts a document's prompt to fit: tokens of text are taken as the prompt, except that
 * when text contains a form feed (0x0C) the part after the last one is a query that is
 * always kept whole and the part before it (the haystack) is cut at its end so that
 * haystack + query <= n_prompt tokens. The result starts with BOS if the model uses one.
 * *tokens is allocated (free() it); *n_tokens its length. */
sjk_status sjk_eval_prompt_tokens(const sjk_eval_backend *be, const char *text, size_t n,
                                  size_t n_prompt, int32_t **tokens, size_t *n_tokens);

/* Runs one document: the reference (opts->reference, default "f16") is fed the prompt and generates
 * opts->n_gen tokens greedily; each of the study's configurations is fed the same tokens
 * in lockstep, and KL(p ‖ q) at each generated position is added to the study (document
 * index doc). Contexts are created and freed inside. If gen_out is not NULL it receives
 * the generated tokens (n_gen). */
sjk_status sjk_eval_run_doc(const sjk_eval_backend *be, sjk_eval_study *st, size_t doc,
                            const int32_t *prompt, size_t n_prompt, const sjk_eval_opts *opts,
                            int32_t *gen_out);

/* Needle study on one document: plants SJK_EVAL_NEEDLES facts in the haystack (the text
 * before any form feed) at planned look-back distances spread geometrically up to the
 * context, then asks for each; answer tokens are teacher-forced and scored (KL, gold top
 * token) into the study's needle records. seed picks the facts. */
#define SJK_EVAL_NEEDLES 8
sjk_status sjk_eval_run_needles(const sjk_eval_backend *be, sjk_eval_study *st, size_t doc,
                                const char *text, size_t n, const sjk_eval_opts *opts,
                                uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* SJKEVAL_H */
