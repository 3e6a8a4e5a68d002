/* pool.c — persistent worker threads; see pool.h.
 *
 * A job is published by bumping `gen` under the mutex; each worker runs tasks until the
 * shared counter passes n_tasks, then decrements `busy`. The caller takes tasks too and
 * then waits for busy == 0, so every worker has left the job before the next one is
 * published (no worker can miss a generation or run a stale one). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_ITERS 2000

typedef struct worker_arg {
    struct sjkh_pool *pool;
    int index;
} worker_arg;

struct sjkh_pool {
    int n_threads;
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    atomic_uint gen;
    atomic_int stop;
    atomic_size_t next;
    atomic_int busy;
    sjkh_task_fn fn;
    void *ctx;
    size_t n_tasks;
};

static void run_tasks(struct sjkh_pool *p, int thread)
{
    size_t t;
    while ((t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->n_tasks)
        p->fn(p->ctx, t, thread);
}

static void *worker(void *arg)
{
    worker_arg *wa = arg;
    struct sjkh_pool *p = wa->pool;
    unsigned seen = 0;
    for (;;) {
        for (int k = 0; k < SPIN_ITERS && atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
                        !atomic_load(&p->stop); k++)
            CPU_RELAX();
        if (atomic_load_explicit(&p->gen, memory_order_acquire) == seen) {
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        run_tasks(p, wa->index);
        if (atomic_fetch_sub_explicit(&p->busy, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

sjk_status sjkh_pool_create(int n_threads, sjkh_pool **out)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 256) return SJK_ERR_PARAM;
    struct sjkh_pool *p = calloc(1, sizeof *p);
    if (!p) return SJK_ERR_NOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->busy, 0);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->args = calloc((size_t)n_threads, sizeof *p->args);
    if (!p->threads || !p->args) {
        sjkh_pool_free(p);
        return SJK_ERR_NOMEM;
    }
    for (int i = 1; i < n_threads; i++) {
        p->args[i] = (worker_arg){p, i};
        if (pthread_create(&p->threads[i], NULL, worker, &p->args[i]) != 0) {
            p->n_threads = i; /* join the ones that started */
            sjkh_pool_free(p);
            return SJK_ERR_NOMEM;
        }
    }
    *out = p;
    return SJK_OK;
}

void sjkh_pool_free(sjkh_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    if (p->threads)
        for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p->threads);
    free(p->args);
    free(p);
}

int sjkh_pool_n_threads(const sjkh_pool *p) { return p ? p->n_threads : 1; }

void sjkh_pool_run(sjkh_pool *p, sjkh_task_fn fn, void *ctx, size_t n_tasks)
{
    if (!n_tasks) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (size_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->busy, p->n_threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    for (int k = 0; k < SPIN_ITERS && atomic_load_explicit(&p->busy, memory_order_acquire) > 0; k++) CPU_RELAX();
    if (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->busy) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
