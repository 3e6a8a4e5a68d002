/* pool.c — see pool.h. Workers sleep on cv_work between jobs; a job is published by
 * bumping `gen`, items are claimed with one atomic counter, and the last worker out
 * signals cv_done. The caller claims items too, so n_threads = 1 starts no thread. */
#include "cache/pool.h"

static void drain(sjk_pool *p, uint32_t worker)
{
    for (;;) {
        unsigned i = atomic_fetch_add_explicit(&p->next, 1u, memory_order_relaxed);
        if (i >= p->n_items) break;
        p->fn(p->arg, i, worker);
    }
}

static void *worker_main(void *arg)
{
    sjk_pool_worker *w = arg;
    sjk_pool *p = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        drain(p, w->id);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int sjk_pool_init(sjk_pool *p, uint32_t n_threads, sjk_pool_worker *workers)
{
    p->n_threads = n_threads ? n_threads : 1;
    p->n_started = 0;
    p->workers = workers;
    p->fn = NULL;
    p->arg = NULL;
    p->n_items = 0;
    atomic_init(&p->next, 0u);
    p->busy = 0;
    p->gen = 0;
    p->stop = 0;
    if (pthread_mutex_init(&p->mu, NULL)) return -1;
    if (pthread_cond_init(&p->cv_work, NULL)) { pthread_mutex_destroy(&p->mu); return -1; }
    if (pthread_cond_init(&p->cv_done, NULL)) {
        pthread_cond_destroy(&p->cv_work);
        pthread_mutex_destroy(&p->mu);
        return -1;
    }
    for (uint32_t i = 0; i + 1 < p->n_threads; i++) {
        workers[i].pool = p;
        workers[i].id = i + 1;
        if (pthread_create(&workers[i].th, NULL, worker_main, &workers[i])) {
            sjk_pool_destroy(p);
            return -1;
        }
        p->n_started++;
    }
    return 0;
}

void sjk_pool_run(sjk_pool *p, sjk_pool_fn fn, void *arg, uint32_t n_items)
{
    sjk_pool_run_limited(p, fn, arg, n_items, p->n_threads);
}

void sjk_pool_run_limited(sjk_pool *p, sjk_pool_fn fn, void *arg, uint32_t n_items,
                          uint32_t max_threads)
{
    if (p->n_started == 0 || n_items <= 1 || max_threads <= 1) {
        for (uint32_t i = 0; i < n_items; i++) fn(arg, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_items = n_items;
    atomic_store_explicit(&p->next, 0u, memory_order_relaxed);
    p->busy = p->n_started;
    p->gen++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void sjk_pool_destroy(sjk_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n_started; i++) pthread_join(p->workers[i].th, NULL);
    p->n_started = 0;
    pthread_cond_destroy(&p->cv_done);
    pthread_cond_destroy(&p->cv_work);
    pthread_mutex_destroy(&p->mu);
}
