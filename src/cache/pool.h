/* pool.h — the small worker pool a cache handle owns (created at sjk_cache_create,
 * joined at sjk_cache_free). One job at a time: sjk_pool_run hands items 0..n_items-1 to
 * the caller's thread (worker 0) and the n_threads − 1 workers, and returns when all
 * items are done. No allocation after init: the pool lives inside the cache's one block
 * (pthread_create itself may take a stack from the OS at init time). */
#ifndef SJK_POOL_H
#define SJK_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef void (*sjk_pool_fn)(void *arg, uint32_t item, uint32_t worker);

typedef struct sjk_pool_worker {
    struct sjk_pool *pool;
    uint32_t id;
    pthread_t th;
} sjk_pool_worker;

typedef struct sjk_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint32_t n_threads;         /* including the caller */
    uint32_t n_started;         /* workers actually running */
    sjk_pool_worker *workers;   /* [n_threads - 1], inside the cache block */
    sjk_pool_fn fn;
    void *arg;
    uint32_t n_items;
    atomic_uint next;
    uint32_t busy;              /* workers still inside the current job */
    uint64_t gen;               /* job generation */
    int stop;
} sjk_pool;

/* Starts n_threads − 1 workers; workers points at n_threads − 1 slots. 0 on success. */
int sjk_pool_init(sjk_pool *p, uint32_t n_threads, sjk_pool_worker *workers);
/* Runs fn(arg, item, worker) for every item; worker < n_threads. With max_threads == 1
 * everything runs on the caller's thread. */
void sjk_pool_run(sjk_pool *p, sjk_pool_fn fn, void *arg, uint32_t n_items);
void sjk_pool_run_limited(sjk_pool *p, sjk_pool_fn fn, void *arg, uint32_t n_items,
                          uint32_t max_threads);
void sjk_pool_destroy(sjk_pool *p);

#endif
