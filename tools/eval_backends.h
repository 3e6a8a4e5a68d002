/* eval_backends.h — the backends `sjkvarn eval` can drive (see sjkeval.h's
 * sjk_eval_backend): the real host (a GGUF model through libsjkhost, one session per cache
 * configuration) and a synthetic self-test that needs no model. */
#ifndef SJK_EVAL_BACKENDS_H
#define SJK_EVAL_BACKENDS_H

#include "sjkeval.h"

/* Opens model_path with the host and fills *be. n_threads per session. On failure
 * returns the host's status (SJK_ERR_UNSUPPORTED: an architecture or tensor type the host
 * does not run) and writes one line into err. *state is freed by sjk_eval_host_close. */
sjk_status sjk_eval_host_open(const char *model_path, unsigned n_threads, sjk_eval_backend *be,
                              void **state, char *err, size_t err_cap);
void sjk_eval_host_close(void *state);
/* Activation mode of the sessions created from now on (sjkh_session_params.act_quant):
 * 0 exact f32 activations (the default here: logits continuous in K/V), 1 llama.cpp-like
 * 8-bit activations. */
void sjk_eval_host_set_act_quant(void *state, unsigned act_quant);
/* Storage of the sliding-window layers of the sessions created from now on, the
 * reference's included (sjkh_session_params.window_type; default f16). */
void sjk_eval_host_set_window(void *state, uint32_t window_type);
/* One line describing the loaded model ("gemma3, 18 layers (3 global), ..."). */
const char *sjk_eval_host_describe(void *state);

/* The synthetic backend: a byte tokenizer, logits that are a fixed function of the recent
 * tokens, and "caches" that add noise of size 2^-bits (bits from the configuration
 * string). It exercises the whole pipeline (driver, statistics, every output) in
 * milliseconds; its numbers say nothing about any real cache. */
void sjk_eval_synthetic_open(sjk_eval_backend *be);

#endif
