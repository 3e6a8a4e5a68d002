/* pool.h — a persistent pthread pool for the forward pass.
 *
 * sjkh_pool_run(pool, fn, ctx, n_tasks) calls fn(ctx, task, thread) once for every task in
 * [0, n_tasks), spread over the pool's threads and the caller (thread 0), and returns when
 * all are done. Tasks are handed out by an atomic counter, so uneven tasks balance.
 * Workers spin briefly after a job (the next matmul usually follows within microseconds)
 * and then sleep on a condition variable. One run at a time per pool. */
#ifndef SJKH_POOL_H
#define SJKH_POOL_H

#include <stddef.h>

#include "sjkvarn.h"

typedef struct sjkh_pool sjkh_pool;
typedef void (*sjkh_task_fn)(void *ctx, size_t task, int thread);

/* n_threads >= 1 counts the caller; n_threads - 1 workers are started. */
sjk_status sjkh_pool_create(int n_threads, sjkh_pool **out);
void sjkh_pool_free(sjkh_pool *p);
int sjkh_pool_n_threads(const sjkh_pool *p);
void sjkh_pool_run(sjkh_pool *p, sjkh_task_fn fn, void *ctx, size_t n_tasks);

#endif
