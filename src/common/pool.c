/* pool.c — the worker pool; see pool.h. */
#include <stdlib.h>

#include "common/pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

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
    unsigned seen = 0;
    for (;;) {
        for (uint32_t k = 0; k < p->spin && atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
                             !atomic_load(&p->stop); k++)
            CPU_RELAX();
        if (atomic_load_explicit(&p->gen, memory_order_acquire) == seen) {
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        drain(p, w->id);
        if (atomic_fetch_sub_explicit(&p->busy, 1u, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

int sjk_pool_init(sjk_pool *p, uint32_t n_threads, uint32_t spin, sjk_pool_worker *workers)
{
    p->n_threads = n_threads ? n_threads : 1;
    p->n_started = 0;
    p->spin = spin;
    p->workers = workers;
    p->owned = 0;
    p->fn = NULL;
    p->arg = NULL;
    p->n_items = 0;
    atomic_init(&p->next, 0u);
    atomic_init(&p->busy, 0u);
    atomic_init(&p->gen, 0u);
    atomic_init(&p->stop, 0);
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
    if (!p) {
        for (uint32_t i = 0; i < n_items; i++) fn(arg, i, 0);
        return;
    }
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
    atomic_store_explicit(&p->busy, p->n_started, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1u, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    for (uint32_t k = 0; k < p->spin && atomic_load_explicit(&p->busy, memory_order_acquire) > 0; k++) CPU_RELAX();
    if (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->busy) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void sjk_pool_destroy(sjk_pool *p)
{
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n_started; i++) pthread_join(p->workers[i].th, NULL);
    p->n_started = 0;
    pthread_cond_destroy(&p->cv_done);
    pthread_cond_destroy(&p->cv_work);
    pthread_mutex_destroy(&p->mu);
}

sjk_status sjk_pool_create(uint32_t n_threads, uint32_t spin, sjk_pool **out)
{
    if (!out) return SJK_ERR_PARAM;
    *out = NULL;
    if (n_threads < 1 || n_threads > SJK_POOL_MAX_THREADS) return SJK_ERR_PARAM;
    sjk_pool *p = calloc(1, sizeof *p);
    sjk_pool_worker *w = n_threads > 1 ? calloc(n_threads - 1, sizeof *w) : NULL;
    if (!p || (n_threads > 1 && !w)) {
        free(p);
        free(w);
        return SJK_ERR_NOMEM;
    }
    if (sjk_pool_init(p, n_threads, spin, w)) {
        free(w);
        free(p);
        return SJK_ERR_NOMEM;
    }
    p->owned = 1;
    *out = p;
    return SJK_OK;
}

void sjk_pool_free(sjk_pool *p)
{
    if (!p || !p->owned) return;
    sjk_pool_destroy(p);
    free(p->workers);
    free(p);
}

uint32_t sjk_pool_n_threads(const sjk_pool *p) { return p ? p->n_threads : 1; }
