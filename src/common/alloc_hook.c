/* alloc_hook.c — the counters behind alloc_hook.h (allocation- and thread-creation-
 * failure injection). */
#define SJK_ALLOC_HOOK_IMPL
#include "common/alloc_hook.h"

#undef malloc
#undef calloc
#undef realloc
#undef aligned_alloc
#undef strdup
#undef strndup
#undef free
#undef pthread_create /* a force-included header defined these before SJK_ALLOC_HOOK_IMPL */
#undef pthread_join

#include <errno.h>
#include <stdatomic.h>

static atomic_long g_fail_at;    /* 0: off; else the count at which to fail */
static atomic_long g_count;      /* allocations since arming */
static atomic_int g_persistent;
static atomic_int g_failed;
static atomic_long g_live;

void sjk_alloc_fail_nth(long n, int persistent)
{
    atomic_store(&g_count, 0);
    atomic_store(&g_failed, 0);
    atomic_store(&g_persistent, persistent);
    atomic_store(&g_fail_at, n > 0 ? n : 0);
}

long sjk_alloc_count(void) { return atomic_load(&g_count); }
int sjk_alloc_failed(void) { return atomic_load(&g_failed); }
long sjk_alloc_live(void) { return atomic_load(&g_live); }

#ifdef SJK_ALLOC_HOOK
int sjk_alloc_hook_built(void) { return 1; }
#else
int sjk_alloc_hook_built(void) { return 0; }
#endif

/* 1 if this allocation must fail. */
static int should_fail(void)
{
    long at = atomic_load_explicit(&g_fail_at, memory_order_relaxed);
    if (!at) return 0;
    long k = atomic_fetch_add(&g_count, 1) + 1;
    if (k == at || (k > at && atomic_load(&g_persistent))) {
        atomic_store(&g_failed, 1);
        return 1;
    }
    return 0;
}

static void *counted(void *p)
{
    if (p) atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    return p;
}

void *sjk_hook_malloc(size_t n) { return should_fail() ? NULL : counted(malloc(n)); }
void *sjk_hook_calloc(size_t n, size_t m) { return should_fail() ? NULL : counted(calloc(n, m)); }
void *sjk_hook_aligned_alloc(size_t a, size_t n) { return should_fail() ? NULL : counted(aligned_alloc(a, n)); }
char *sjk_hook_strdup(const char *s) { return should_fail() ? NULL : counted(strdup(s)); }
char *sjk_hook_strndup(const char *s, size_t n) { return should_fail() ? NULL : counted(strndup(s, n)); }

void *sjk_hook_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    void *q = realloc(p, n);
    if (!p) return counted(q);
    return q;
}

void sjk_hook_free(void *p)
{
    if (p) atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
    free(p);
}

/* ---- pthread_create ----------------------------------------------------------------- */

static atomic_long t_fail_at; /* 0: off; else the count at which to fail */
static atomic_long t_count;   /* thread creations since arming */
static atomic_int t_persistent;
static atomic_int t_failed;
static atomic_long t_live;    /* started minus joined */

void sjk_thread_fail_nth(long n, int persistent)
{
    atomic_store(&t_count, 0);
    atomic_store(&t_failed, 0);
    atomic_store(&t_persistent, persistent);
    atomic_store(&t_fail_at, n > 0 ? n : 0);
}

long sjk_thread_count(void) { return atomic_load(&t_count); }
int sjk_thread_failed(void) { return atomic_load(&t_failed); }
long sjk_thread_live(void) { return atomic_load(&t_live); }

int sjk_hook_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    long at = atomic_load_explicit(&t_fail_at, memory_order_relaxed);
    if (at) {
        long k = atomic_fetch_add(&t_count, 1) + 1;
        if (k == at || (k > at && atomic_load(&t_persistent))) {
            atomic_store(&t_failed, 1);
            return EAGAIN;
        }
    }
    int rc = pthread_create(th, attr, fn, arg);
    if (rc == 0) atomic_fetch_add(&t_live, 1);
    return rc;
}

int sjk_hook_pthread_join(pthread_t th, void **ret)
{
    int rc = pthread_join(th, ret);
    if (rc == 0) atomic_fetch_sub(&t_live, 1);
    return rc;
}
