/* job.c — a completion request in flight, shared by the HTTP thread (which sends its
 * output) and the engine (which writes it), and the byte buffer both use.
 *
 * Lifetime: a reference each for the connection's request state, the slot while the
 * engine runs the job, and a streamed response's reader; the last unref frees it.
 * Hand-off: the engine appends under j->mu and, if the HTTP side suspended the
 * connection waiting for output, resumes it (libmicrohttpd allows resume from any
 * thread); the HTTP side suspends only under j->mu after seeing nothing to send, so no
 * wake-up is lost. */
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

double srv_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int srv_buf_add(srv_buf *b, const void *data, size_t n)
{
    if (n > ((size_t)-1) / 2 - b->n - 1) return -1;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int srv_buf_addf(srv_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof small) return srv_buf_add(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int r = srv_buf_add(b, big, (size_t)n);
    free(big);
    return r;
}

void srv_buf_free(srv_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

srv_job *srv_job_new(void)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    atomic_init(&j->refs, 1);
    atomic_init(&j->cancelled, 0);
    pthread_mutex_init(&j->mu, NULL);
    j->created = (long long)time(NULL);
    j->t_queued = srv_now();
    j->t_out = j->t_queued;
    return j;
}

void srv_job_ref(srv_job *j) { atomic_fetch_add(&j->refs, 1); }

void srv_job_unref(srv_job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    pthread_mutex_destroy(&j->mu);
    free(j->prompt);
    for (size_t i = 0; i < j->n_stops; i++) free(j->stops[i]);
    srv_buf_free(&j->out);
    srv_buf_free(&j->text);
    free(j);
}

/* Under j->mu. */
static void wake(srv_job *j)
{
    if (j->suspended && j->conn) {
        j->suspended = 0;
        MHD_resume_connection(j->conn);
    }
}

void srv_job_push(srv_job *j, const char *data, size_t n)
{
    pthread_mutex_lock(&j->mu);
    if (srv_buf_add(&j->out, data, n)) atomic_store(&j->cancelled, 1); /* out of memory: give up */
    j->t_out = srv_now();
    wake(j);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_keepalive(srv_job *j, double now, double every)
{
    static const char ping[] = ": ping\n\n";
    pthread_mutex_lock(&j->mu);
    if (j->stream && !j->done && j->conn && now - j->t_out >= every) {
        if (!srv_buf_add(&j->out, ping, sizeof ping - 1)) j->t_out = now;
        wake(j);
    }
    pthread_mutex_unlock(&j->mu);
}

void srv_job_finish(srv_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    j->t_done = srv_now();
    wake(j);
    pthread_mutex_unlock(&j->mu);
}
