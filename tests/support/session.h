/* session.h — a session of a real model for the tests that run one. Header only, and
 * included after harness.h: a session that cannot be made is a failed CHECK of the test
 * that asked for it. */
#ifndef SJK_TEST_SESSION_H
#define SJK_TEST_SESSION_H

#include <stdint.h>

#include "harness.h"
#include "sjkhost.h"

/* A session of m with cache configuration kv, n_ctx positions, batches of n_batch and
 * n_threads threads (the other parameters their defaults); NULL after a failed CHECK
 * that names kv and the reason. */
static inline sjkh_session *test_session_new(const sjkh_model *m, const char *kv, uint32_t n_ctx,
                                             uint32_t n_batch, uint32_t n_threads)
{
    sjkh_session_params p = sjkh_session_params_default();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_threads = n_threads;
    p.kv = kv;
    sjkh_session *s = NULL;
    char err[256] = "";
    sjk_status st = sjkh_session_create(m, &p, &s, err, sizeof err);
    CHECKF(st == SJK_OK, "%s: %s", kv, err);
    return s;
}

#endif
