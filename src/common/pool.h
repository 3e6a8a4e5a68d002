/* pool.h — the one worker pool: the one a cache handle owns (created at sjk_cache_create
 * inside the cache's block, joined at sjk_cache_free) and the one sjk_pool_create makes
 * for a host (include/sjkvarn.h, "Thread pool"; libsjkhost's matmuls and attention).
 *
 * One job at a time: sjk_pool_run hands items 0..n_items-1 to the caller's thread
 * (worker 0) and the n_threads − 1 workers, and returns when all items are done. Items are
 * claimed from one atomic counter, so uneven items balance. A job is published by bumping
 * `gen` under the mutex; each worker runs items until the counter passes n_items, then
 * decrements `busy`; the caller takes items too and then waits for busy == 0, so every
 * worker has left the job before the next one is published (no worker can miss a
 * generation or run a stale one). With spin > 0, a worker that finished a job polls for
 * the next one, and the caller for the job's end, `spin` pause iterations before sleeping
 * on a condition variable (for back-to-back jobs microseconds apart: the host's matmuls);
 * with spin = 0 both sleep at once (the cache's seals and attention). No allocation after
 * init (pthread_create itself may take a stack from the OS at init time). */
#ifndef SJK_POOL_H
#define SJK_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sjkvarn.h" /* sjk_pool, sjk_pool_fn, sjk_pool_run */

typedef struct sjk_pool_worker {
    struct sjk_pool *pool;
    uint32_t id;
    pthread_t th;
} sjk_pool_worker;

struct sjk_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint32_t n_threads;         /* including the caller */
    uint32_t n_started;         /* workers actually running */
    uint32_t spin;              /* pause iterations before sleeping (0: sleep at once) */
    sjk_pool_worker *workers;   /* [n_threads - 1]: the cache's block, or sjk_pool_create's */
    int owned;                  /* 1: made by sjk_pool_create (sjk_pool_free frees it) */
    sjk_pool_fn fn;
    void *arg;
    uint32_t n_items;
    atomic_uint next;
    atomic_uint busy;           /* workers still inside the current job */
    atomic_uint gen;            /* job generation */
    atomic_int stop;
};

/* Starts n_threads − 1 workers; workers points at n_threads − 1 slots. 0 on success; on a
 * failure every started worker is joined again and -1 is returned. */
int sjk_pool_init(sjk_pool *p, uint32_t n_threads, uint32_t spin, sjk_pool_worker *workers);
/* sjk_pool_run with everything on the caller's thread when max_threads <= 1. */
void sjk_pool_run_limited(sjk_pool *p, sjk_pool_fn fn, void *arg, uint32_t n_items,
                          uint32_t max_threads);
/* Joins the workers (the memory stays the caller's). */
void sjk_pool_destroy(sjk_pool *p);

#endif
