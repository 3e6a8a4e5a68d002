/* test_alloc_fail.c — allocation-failure injection (src/common/alloc_hook.h): for every
 * create and load path, the n-th allocation fails for n = 1, 2, ... until the call
 * succeeds. Each failed call must return a clean status (SJK_ERR_NOMEM, or the status the
 * path documents for it), leave *out NULL and free everything it took (the hook's live
 * count is back where it was; `make asan` and `make valgrind` check the same with
 * LeakSanitizer / memcheck). Cache restore must not allocate at all.
 *
 * The model paths need the real model files (SKIP without them). They make many
 * allocations (~300 per model load, each attempt a fresh load); SJK_ALLOC_FAIL_STRIDE
 * (default 1: every n) thins them out for slow runs, and under SJK_TEST_LIGHT (`make
 * valgrind`, where one load costs about a second) the model paths take every 8th n from
 * n = 1 (both models, model load and session create), the rest every n.
 *
 * pthread_create is injected the same way (sjk_thread_fail_nth): the cache's and the host
 * pool's thread starts, alone and inside a session, fail at every n; each create must
 * return SJK_ERR_NOMEM, leak nothing and join every thread it had started. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SJK_ALLOC_HOOK_DECLS_ONLY /* this file's own allocations are not counted */
#include "common/alloc_hook.h"
#include "harness.h"
#include "support/files.h"
#include "sjkhost.h"
#include "sjkvarn.h"
#include "support/models.h"

typedef sjk_status (*attempt_fn)(void *ctx, void **obj);

/* Each test needs libraries built with the hook (ALLOC_HOOK=1, as `make test` builds
 * them); elsewhere no allocation is counted and every check would pass without testing. */
#define REQUIRE_HOOK()                                                                \
    do {                                                                              \
        if (!sjk_alloc_hook_built())                                                  \
            SKIP("libraries built without the allocation hook (build with ALLOC_HOOK=1)"); \
    } while (0)

static long g_light_stride; /* > 0: take every g_light_stride-th n from n = 1 (model paths) */
typedef void (*release_fn)(void *obj);

/* Runs attempt with the n-th allocation failing, for every n until it succeeds. Returns
 * the number of failure points exercised (-1 on a violation). */
static long every_failure_point(const char *what, attempt_fn attempt, release_fn release, void *ctx)
{
    long stride = getenv("SJK_ALLOC_FAIL_STRIDE") ? atol(getenv("SJK_ALLOC_FAIL_STRIDE")) : 1;
    if (stride < 1) stride = 1;
    long first = 64; /* every n below this, then every stride-th */
    if (g_light_stride > 0) stride = g_light_stride, first = 1;
    for (long n = 1; n < 1000000; n += (n < first ? 1 : stride)) {
        long live = sjk_alloc_live();
        void *obj = NULL;
        sjk_alloc_fail_nth(n, 0);
        sjk_status st = attempt(ctx, &obj);
        int failed = sjk_alloc_failed();
        sjk_alloc_fail_nth(0, 0);
        if (!failed) {
            CHECKF(st == SJK_OK && obj, "%s: no injected failure at n = %ld but status %s", what, n, sjk_status_str(st));
            if (obj) release(obj);
            CHECKF(sjk_alloc_live() == live, "%s: leak after success", what);
            if (getenv("SJK_TEST_VERBOSE"))
                fprintf(stderr, "  %s: %ld failure points%s, all clean\n", what, n - 1,
                        stride > 1 ? " (thinned: SJK_ALLOC_FAIL_STRIDE or SJK_TEST_LIGHT)" : "");
            return n - 1;
        }
        if (st == SJK_OK) {
            /* A failure the path may absorb (an optional cache); it must still be whole. */
            if (obj) release(obj);
        } else {
            CHECKF(obj == NULL, "%s: n = %ld: *out set on failure", what, n);
            CHECKF(st == SJK_ERR_NOMEM || st == SJK_ERR_IO || st == SJK_ERR_UNSUPPORTED || st == SJK_ERR_FORMAT,
                   "%s: n = %ld: status %s", what, n, sjk_status_str(st));
        }
        if (sjk_alloc_live() != live) {
            CHECKF(0, "%s: n = %ld: %ld blocks leaked", what, n, sjk_alloc_live() - live);
            return -1;
        }
    }
    return -1;
}

/* ---- cache --------------------------------------------------------------------- */

static sjk_cache_params cache_params(sjk_layer_config *lay)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = 3;
    p.n_kv_heads = 2;
    p.n_q_heads = 4;
    p.head_dim = 128;
    p.max_pos = 1024;
    p.n_threads = 3;
    sjk_cache_config_parse("sj:3/2t", 1, &lay[0], NULL, 0);
    sjk_cache_config_parse("kvarn:4/4", 1, &lay[1], NULL, 0);
    sjk_cache_config_parse("q8_0/q4_0:rot", 1, &lay[2], NULL, 0);
    p.layers = lay;
    return p;
}

static sjk_status try_cache_create(void *ctx, void **obj)
{
    sjk_cache *c = NULL;
    sjk_status st = sjk_cache_create(ctx, &c);
    *obj = c;
    return st;
}
static void rel_cache(void *o) { sjk_cache_free(o); }

TEST(test_alloc_fail_cache_create)
{
    REQUIRE_HOOK();
    sjk_layer_config lay[3];
    sjk_cache_params p = cache_params(lay);
    long n = every_failure_point("sjk_cache_create", try_cache_create, rel_cache, &p);
    CHECK(n >= 1);
}

TEST(test_alloc_fail_cache_restore_never_allocates)
{
    REQUIRE_HOOK();
    sjk_layer_config lay[3];
    sjk_cache_params p = cache_params(lay);
    sjk_cache *a = NULL, *b = NULL;
    CHECK(sjk_cache_create(&p, &a) == SJK_OK && sjk_cache_create(&p, &b) == SJK_OK);
    if (!a || !b) { sjk_cache_free(a); sjk_cache_free(b); return; }
    static float k[2 * 128], v[2 * 128];
    for (int i = 0; i < 300; i++) {
        for (int j = 0; j < 256; j++) { k[j] = (float)((i * 7 + j) % 13) - 6; v[j] = (float)((i + j) % 5); }
        for (uint32_t l = 0; l < 3; l++) CHECK(sjk_cache_append(a, 0, l, k, v, 1) == SJK_OK);
    }
    char path[] = "/tmp/sjk_alloc_fail_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(sjk_cache_save(a, path, NULL, NULL, 0) == SJK_OK);
    sjk_alloc_fail_nth(1, 1); /* every allocation fails */
    char err[200];
    sjk_status st = sjk_cache_restore(b, path, NULL, err, sizeof err);
    long count = sjk_alloc_count();
    st = st == SJK_OK ? sjk_cache_save(b, path, NULL, err, sizeof err) : st;
    count += sjk_alloc_count();
    sjk_alloc_fail_nth(0, 0);
    CHECKF(st == SJK_OK, "%s", err);
    CHECK(count == 0);
    unlink(path);
    sjk_cache_free(a);
    sjk_cache_free(b);
}

/* ---- GGUF and tokenizers ------------------------------------------------------- */

typedef struct mem { const uint8_t *p; size_t n; const char *path; } mem;

static sjk_status try_gguf_memory(void *ctx, void **obj)
{
    mem *m = ctx;
    sjkh_gguf *g = NULL;
    sjk_status st = sjkh_gguf_open_memory(m->p, m->n, &g, NULL, 0);
    *obj = g;
    return st;
}
static sjk_status try_gguf_file(void *ctx, void **obj)
{
    mem *m = ctx;
    sjkh_gguf *g = NULL;
    sjk_status st = sjkh_gguf_open(m->path, &g, NULL, 0);
    *obj = g;
    return st;
}
static void rel_gguf(void *o) { sjkh_gguf_close(o); }

static sjk_status try_tok_gguf(void *ctx, void **obj)
{
    sjkh_tokenizer *t = NULL;
    sjk_status st = sjkh_tokenizer_from_gguf(ctx, &t, NULL, 0);
    *obj = t;
    return st;
}
static void rel_tok(void *o) { sjkh_tokenizer_free(o); }

TEST(test_alloc_fail_gguf_open_and_tokenizers)
{
    REQUIRE_HOOK();
    static const char *seeds[] = {"fuzz/corpus/gguf/spm-vocab", "fuzz/corpus/gguf/bpe-vocab"};
    for (int i = 0; i < 2; i++) {
        mem m = {NULL, 0, seeds[i]};
        uint8_t *b = (uint8_t *)test_read_file(seeds[i], &m.n);
        if (!b) SKIP("%s not found (run from the repository root)", seeds[i]);
        m.p = b;
        CHECK(every_failure_point("sjkh_gguf_open_memory", try_gguf_memory, rel_gguf, &m) >= 1);
        CHECK(every_failure_point("sjkh_gguf_open", try_gguf_file, rel_gguf, &m) >= 1);
        sjkh_gguf *g = NULL;
        CHECK(sjkh_gguf_open_memory(m.p, m.n, &g, NULL, 0) == SJK_OK);
        if (g) {
            long n = every_failure_point("sjkh_tokenizer_from_gguf", try_tok_gguf, rel_tok, g);
            CHECKF(n >= 1, "%s: %ld", seeds[i], n);
            sjkh_gguf_close(g);
        }
        free(b);
    }
}

/* ---- model and session --------------------------------------------------------- */

static sjk_status try_model(void *ctx, void **obj)
{
    sjkh_model *m = NULL;
    sjk_status st = sjkh_model_load(ctx, &m, NULL, 0);
    *obj = m;
    return st;
}
static void rel_model(void *o) { sjkh_model_free(o); }

typedef struct sess_ctx { const sjkh_model *m; sjkh_session_params p; } sess_ctx;
static sjk_status try_session(void *ctx, void **obj)
{
    sess_ctx *s = ctx;
    sjkh_session *ss = NULL;
    sjk_status st = sjkh_session_create(s->m, &s->p, &ss, NULL, 0);
    *obj = ss;
    return st;
}
static void rel_session(void *o) { sjkh_session_free(o); }

TEST(test_alloc_fail_model_load_and_session)
{
    REQUIRE_HOOK();
    if (test_light()) {
        g_light_stride = 8;
        printf("  SJK_TEST_LIGHT: every 8th allocation-failure point of model load and session create\n");
    }
    const char *files[] = {"SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"};
    int ran = 0;
    for (int i = 0; i < 2; i++) {
        const char *path = test_model_path(files[i]);
        FILE *f = fopen(path, "rb");
        if (!f) {
            SKIP_PART("%s missing (scripts/fetch-model): its load and session paths not exercised", files[i]);
            continue;
        }
        fclose(f);
        ran++;
        long n = every_failure_point("sjkh_model_load", try_model, rel_model, (void *)path);
        CHECKF(n >= 1, "%s: %ld", files[i], n);
        sjkh_model *m = NULL;
        CHECK(sjkh_model_load(path, &m, NULL, 0) == SJK_OK);
        if (!m) continue;
        sess_ctx s = {m, sjkh_session_params_default()};
        s.p.n_ctx = 512;
        s.p.n_batch = 32;
        s.p.n_threads = 2;
        s.p.kv = "sj:3/3t";
        n = every_failure_point("sjkh_session_create", try_session, rel_session, &s);
        CHECKF(n >= 1, "%s session: %ld", files[i], n);
        sjkh_model_free(m);
    }
    g_light_stride = 0;
    if (!ran) SKIP("no model files in SJK_MODEL_DIR / ~/.cache/sjkvarn/models (scripts/fetch-model)");
}

/* ---- thread creation ----------------------------------------------------------- */

/* Threads of this process now (entries of /proc/self/task); -1 if unreadable. */
static int n_tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The process's thread count once it has settled to at most want: pthread_join returns
 * when the thread has cleared its tid, which is before the kernel removes it from
 * /proc/self/task, so a thread joined a moment ago may still be listed. Polls for up to
 * 2 s; a thread that was never joined and still runs stays listed, above want. */
static int n_tasks_settled(int want)
{
    int n = n_tasks();
    for (int i = 0; i < 200 && n > want; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        n = n_tasks();
    }
    return n;
}

/* Runs attempt with the n-th pthread_create failing, for every n until it succeeds. A
 * failed create must return SJK_ERR_NOMEM with *out NULL, free every block and join every
 * thread it had started (the process's thread count is back where it was). Returns the
 * number of failure points (-1 on a violation). With persistent, every creation from the
 * n-th on fails (so n = 1: no thread can be started at all). */
static long every_thread_failure_point(const char *what, attempt_fn attempt, release_fn release, void *ctx,
                                       int persistent)
{
    for (long n = 1; n < 1000; n++) {
        long live = sjk_alloc_live();
        long threads = sjk_thread_live();
        int tasks = n_tasks();
        void *obj = NULL;
        sjk_thread_fail_nth(n, persistent);
        sjk_status st = attempt(ctx, &obj);
        int failed = sjk_thread_failed();
        long made = sjk_thread_count();
        sjk_thread_fail_nth(0, 0);
        if (!failed) {
            CHECKF(st == SJK_OK && obj, "%s: no injected thread failure at n = %ld but status %s", what, n,
                   sjk_status_str(st));
            if (obj) release(obj);
            CHECKF(sjk_alloc_live() == live, "%s: leak after success", what);
            CHECKF(sjk_thread_live() == threads, "%s: %ld threads not joined after free", what,
                   sjk_thread_live() - threads);
            int now = n_tasks_settled(tasks);
            CHECKF(now <= tasks, "%s: %d threads left after free", what, now - tasks);
            if (getenv("SJK_TEST_VERBOSE"))
                fprintf(stderr, "  %s: %ld thread-creation failure points%s, all clean\n", what, n - 1,
                        persistent ? " (persistent)" : "");
            return n - 1;
        }
        CHECKF(st == SJK_ERR_NOMEM && obj == NULL, "%s: thread %ld of %ld failed: status %s, out %p", what, n, made,
               sjk_status_str(st), obj);
        if (obj) release(obj);
        CHECKF(sjk_alloc_live() == live, "%s: thread %ld failed: %ld blocks leaked", what, n, sjk_alloc_live() - live);
        CHECKF(sjk_thread_live() == threads, "%s: thread %ld failed: %ld threads not joined", what, n,
               sjk_thread_live() - threads);
        int now = n_tasks_settled(tasks);
        CHECKF(now <= tasks, "%s: thread %ld failed: %d threads left in the process", what, n, now - tasks);
        if (sjk_alloc_live() != live || sjk_thread_live() != threads || now > tasks) return -1;
    }
    return -1;
}

typedef struct pool_ctx { uint32_t n_threads; } pool_ctx;
static sjk_status try_host_pool(void *ctx, void **obj)
{
    sjk_pool *p = NULL;
    sjk_status st = sjk_pool_create(((pool_ctx *)ctx)->n_threads, 2000, &p);
    *obj = p;
    return st;
}
static void rel_host_pool(void *o) { sjk_pool_free(o); }

TEST(test_thread_fail_cache_create)
{
    REQUIRE_HOOK();
    sjk_layer_config lay[3];
    sjk_cache_params p = cache_params(lay); /* 3 threads: 2 started, the caller is the third */
    CHECK(every_thread_failure_point("sjk_cache_create", try_cache_create, rel_cache, &p, 0) == 2);
    CHECK(every_thread_failure_point("sjk_cache_create", try_cache_create, rel_cache, &p, 1) == 2);
    p.n_threads = 8;
    CHECK(every_thread_failure_point("sjk_cache_create (8 threads)", try_cache_create, rel_cache, &p, 0) == 7);
}

TEST(test_thread_fail_host_pool_create)
{
    REQUIRE_HOOK();
    pool_ctx c = {5};
    CHECK(every_thread_failure_point("sjk_pool_create", try_host_pool, rel_host_pool, &c, 0) == 4);
    CHECK(every_thread_failure_point("sjk_pool_create", try_host_pool, rel_host_pool, &c, 1) == 4);
}

/* A session starts the host pool's threads and then the cache's: a failure at any of them
 * must unwind both (needs a model file; the session itself is small). */
TEST(test_thread_fail_session_create)
{
    REQUIRE_HOOK();
    const char *path = test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    sjkh_model *m = NULL;
    if (access(path, R_OK) != 0)
        SKIP("%s not found (scripts/fetch-model): session thread failures not exercised", path);
    CHECK(sjkh_model_load(path, &m, NULL, 0) == SJK_OK);
    if (!m) return;
    sess_ctx s = {m, sjkh_session_params_default()};
    s.p.n_ctx = 256;
    s.p.n_batch = 16;
    s.p.n_threads = 3;
    s.p.kv = "sj:3/3t";
    long n = every_thread_failure_point("sjkh_session_create", try_session, rel_session, &s, 0);
    CHECKF(n >= 3, "%ld thread-creation failure points", n); /* 2 host workers + the cache's */
    CHECK(every_thread_failure_point("sjkh_session_create", try_session, rel_session, &s, 1) == n);
    sjkh_model_free(m);
}

int main(void)
{
    RUN(test_alloc_fail_cache_create);
    RUN(test_alloc_fail_cache_restore_never_allocates);
    RUN(test_alloc_fail_gguf_open_and_tokenizers);
    RUN(test_alloc_fail_model_load_and_session);
    RUN(test_thread_fail_cache_create);
    RUN(test_thread_fail_host_pool_create);
    RUN(test_thread_fail_session_create);
    return test_summary();
}
