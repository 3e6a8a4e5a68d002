/* alloc_hook.h — allocation-failure injection (test builds only). With ALLOC_HOOK=1
 * (`make test`, `make asan`, `make ubsan`, `make valgrind`) the Makefile defines
 * SJK_ALLOC_HOOK and force-includes this header (`-include`) into every translation unit
 * of the libraries, so every malloc / calloc / realloc / aligned_alloc / strdup / free in
 * them goes through the counters below: one relaxed atomic load per allocation while
 * disarmed. A plain `make` includes it nowhere; the functions below still exist but see
 * no allocation (sjk_alloc_hook_built() says which build this is).
 *
 * A test arms it with sjk_alloc_fail_nth(n): the n-th allocation from then on returns
 * NULL (once; or every one from the n-th on with persistent = 1). Running a create/load
 * path for n = 1, 2, ... until it succeeds exercises every failure branch (SQLite's
 * technique); tests/test_alloc_fail.c does that, and `make asan` / `make valgrind` check
 * that each failed attempt frees everything. The counters are the one piece of mutable
 * process-wide state in the library; they exist for tests and change nothing unless armed.
 *
 * pthread_create goes through the same kind of hook with its own counter:
 * sjk_thread_fail_nth(n) makes the n-th thread creation from then on fail with EAGAIN (as
 * when the process is out of threads or stack), so the cache's and the host pool's
 * create paths can be run for every failure point too (tests/test_alloc_fail.c). */
#ifndef SJK_ALLOC_HOOK_H
#define SJK_ALLOC_HOOK_H

#include <pthread.h> /* before the pthread_create macro below */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void *sjk_hook_malloc(size_t n);
void *sjk_hook_calloc(size_t n, size_t m);
void *sjk_hook_realloc(void *p, size_t n);
void *sjk_hook_aligned_alloc(size_t a, size_t n);
char *sjk_hook_strdup(const char *s);
char *sjk_hook_strndup(const char *s, size_t n);
void sjk_hook_free(void *p);

/* Arms the hook: the n-th allocation from now fails (n >= 1); n = 0 disarms. With
 * persistent, every allocation from the n-th on fails. Resets the counters. */
void sjk_alloc_fail_nth(long n, int persistent);
/* Allocations attempted since the last sjk_alloc_fail_nth, and whether one was failed. */
long sjk_alloc_count(void);
int sjk_alloc_failed(void);
/* Live blocks allocated through the hook (allocations minus frees, process lifetime). */
long sjk_alloc_live(void);
/* 1 if the libraries were built with the hook (ALLOC_HOOK=1), else 0: then nothing is
 * counted or failed, and a test of failure paths has nothing to test. */
int sjk_alloc_hook_built(void);

int sjk_hook_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
int sjk_hook_pthread_join(pthread_t th, void **ret);
/* Arms the thread hook: the n-th pthread_create from now fails with EAGAIN (n >= 1; with
 * persistent, every one from the n-th on); n = 0 disarms. Resets its counters. */
void sjk_thread_fail_nth(long n, int persistent);
/* Thread creations attempted since the last sjk_thread_fail_nth, and whether one failed. */
long sjk_thread_count(void);
int sjk_thread_failed(void);
/* Threads the libraries started and have not joined yet (process lifetime). Exact, unlike
 * /proc/self/task: a joined thread can stay listed there for a moment while the kernel
 * reaps it. */
long sjk_thread_live(void);

/* The macros route the libraries' allocations through the hook. Its implementation
 * (SJK_ALLOC_HOOK_IMPL) and the tests that arm it (SJK_ALLOC_HOOK_DECLS_ONLY, defined
 * before the include: their own allocations are not counted) take the declarations only. */
#if !defined(SJK_ALLOC_HOOK_IMPL) && !defined(SJK_ALLOC_HOOK_DECLS_ONLY)
#define malloc(n) sjk_hook_malloc(n)
#define calloc(n, m) sjk_hook_calloc(n, m)
#define realloc(p, n) sjk_hook_realloc(p, n)
#define aligned_alloc(a, n) sjk_hook_aligned_alloc(a, n)
#define strdup(s) sjk_hook_strdup(s)
#define strndup(s, n) sjk_hook_strndup(s, n)
#define free(p) sjk_hook_free(p)
#define pthread_create(th, attr, fn, arg) sjk_hook_pthread_create(th, attr, fn, arg)
#define pthread_join(th, ret) sjk_hook_pthread_join(th, ret)
#endif

#endif
