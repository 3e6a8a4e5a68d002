/* harness.h — the test harness: one binary per tests/test_*.c, one function per test.
 *
 *   TEST(test_ring_wraparound) { CHECK(x == 1); CHECK_NEAR(a, b, 1e-6); }
 *   int main(void) { RUN(test_ring_wraparound); return test_summary(); }
 *
 * A test fails if any CHECK fails; SKIP("why") marks it skipped and returns;
 * SKIP_PART("why") marks it skipped and goes on (a test that checks what it can and
 * could not check a part: two models, one missing). A skipped test is never reported as
 * a pass. Under SJK_REQUIRE_ALL=1 (CI sets it) every skip is a failure (but those of
 * SKIP_HW: the CPU lacks the instructions, see below), in the binary
 * itself (its summary and exit status), so a binary run alone tells the truth too; the
 * runner (tests/run_tests.sh) does the same over all binaries. Each binary prints
 * "N passed, N failed, N skipped" last; tests/run_tests.sh adds them up. */
#ifndef SJK_TEST_HARNESS_H
#define SJK_TEST_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int t_cur_failed, t_cur_skipped, t_cur_skipped_hw, t_n_pass, t_n_fail, t_n_skip, t_n_skip_hw;
static const char *t_cur_name;
static char t_note[1024]; /* test_note(): shown after the summary counts */

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            if (t_cur_failed < 10)                                                   \
                fprintf(stderr, "  %s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, \
                        t_cur_name, #cond);                                          \
            t_cur_failed++;                                                          \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            if (t_cur_failed < 10) {                                                 \
                fprintf(stderr, "  %s:%d: %s: CHECK(%s) failed: ", __FILE__, __LINE__, \
                        t_cur_name, #cond);                                          \
                fprintf(stderr, __VA_ARGS__);                                        \
                fputc('\n', stderr);                                                 \
            }                                                                        \
            t_cur_failed++;                                                          \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                        \
    do {                                                                             \
        double t_a_ = (double)(a), t_b_ = (double)(b);                               \
        CHECKF(fabs(t_a_ - t_b_) <= (tol), "%s = %.9g, %s = %.9g, tol %g", #a, t_a_, \
               #b, t_b_, (double)(tol));                                             \
    } while (0)

#define SKIP(...)                                                                    \
    do {                                                                             \
        fprintf(stderr, "  SKIP %s: ", t_cur_name);                                  \
        fprintf(stderr, __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                         \
        t_cur_skipped = 1;                                                           \
        return;                                                                      \
    } while (0)

/* Marks the current test skipped without leaving it: the parts that could run still
 * count (a failing CHECK still fails it). */
#define SKIP_PART(...)                                                               \
    do {                                                                             \
        fprintf(stderr, "  SKIP (part) %s: ", t_cur_name);                           \
        fprintf(stderr, __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                         \
        t_cur_skipped = 1;                                                           \
    } while (0)

/* SKIP_HW / SKIP_PART_HW: skipped because this CPU lacks the instructions the code under
 * test needs (an AVX-512 kernel on an AVX2 machine, or SJK_CPU_DISABLE). No package can
 * provide them, so SJK_REQUIRE_ALL does not turn these into failures; they are still
 * skips, never passes: counted, printed as "SKIP ... (this CPU)", and summed by the
 * runner as "skipped for this CPU". A test that also skips for another reason fails under
 * SJK_REQUIRE_ALL as before. */
#define SKIP_HW(...)                                                                 \
    do {                                                                             \
        fprintf(stderr, "  SKIP (this CPU) %s: ", t_cur_name);                       \
        fprintf(stderr, __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                         \
        t_cur_skipped_hw = 1;                                                        \
        return;                                                                      \
    } while (0)

#define SKIP_PART_HW(...)                                                            \
    do {                                                                             \
        fprintf(stderr, "  SKIP (part, this CPU) %s: ", t_cur_name);                 \
        fprintf(stderr, __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                         \
        t_cur_skipped_hw = 1;                                                        \
    } while (0)

static inline int test_require_all(void)
{
    const char *e = getenv("SJK_REQUIRE_ALL");
    return e && !strcmp(e, "1");
}

/* Seconds on the monotonic clock: each test's line ends with its wall time, so that a
 * binary run alone shows which of its tests are the slow ones. */
static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void test_run_one(const char *name, void (*fn)(void))
{
    t_cur_name = name;
    t_cur_failed = 0;
    t_cur_skipped = 0;
    t_cur_skipped_hw = 0;
    double t0 = test_now();
    fn();
    double dt = test_now() - t0;
    if (t_cur_skipped && !t_cur_failed && test_require_all()) {
        t_n_fail++;
        printf("FAIL %s (skipped, and SJK_REQUIRE_ALL=1)\n", name);
    } else if ((t_cur_skipped || t_cur_skipped_hw) && !t_cur_failed) {
        t_n_skip++;
        if (!t_cur_skipped) t_n_skip_hw++;
        printf("SKIP %s%s (%.2f s)\n", name, t_cur_skipped ? "" : " (this CPU)", dt);
    } else if (t_cur_failed) {
        t_n_fail++;
        printf("FAIL %s (%d checks, %.2f s)\n", name, t_cur_failed, dt);
    } else {
        t_n_pass++;
        printf("ok   %s (%.2f s)\n", name, dt);
    }
    fflush(stdout);
}
#define RUN(name) test_run_one(#name, name)

/* A measured number for the summary line ("2 passed, 0 failed, 0 skipped; smollm2: top-1
 * 96.69%, KL 3.69e-3"): tests/run_tests.sh prints every binary's summary line, so a
 * number printed here is seen on every run, not only when the test fails. */
static inline void test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void test_note(const char *fmt, ...)
{
    size_t n = strlen(t_note);
    if (n + 3 >= sizeof t_note) return;
    n += (size_t)snprintf(t_note + n, sizeof t_note - n, "%s", n ? "; " : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_note + n, sizeof t_note - n, fmt, ap);
    va_end(ap);
}

static inline int test_summary(void)
{
    char hw[48] = "";
    if (t_n_skip_hw) snprintf(hw, sizeof hw, "; %d for this CPU", t_n_skip_hw);
    printf("%d passed, %d failed, %d skipped%s%s%s\n", t_n_pass, t_n_fail, t_n_skip, hw, t_note[0] ? "; " : "",
           t_note);
    return t_n_fail ? 1 : 0;
}

/* 1 under SJK_TEST_LIGHT (unset or "0": 0). `make asan`, `make ubsan` and `make valgrind`
 * set it (CI's sanitizer passes); `make test` with gcc or clang never does, so the plain
 * suite always runs at full size.
 *
 * The rule for a test whose cost grows with its data (model forward passes over long
 * prompts or contexts, soak positions, configurations x contexts, store runs, server
 * sessions): under test_light() it runs every code path it covers on less data (fewer
 * tokens, positions, prompts, candidates, failure points; shorter contexts that still
 * cross the same boundaries: sink, seal, ring wrap, split decode), says so in its output,
 * and asserts the same things. It never skips or returns early because of it: a path that
 * only the full size reaches must keep a light size that reaches it. tests/run_tests.sh
 * prints every binary's wall and CPU seconds, so a test that grows shows in every log;
 * docs/RELIABILITY.md ("Sanitizers and valgrind") lists what each light test does. */
static inline int test_light(void)
{
    const char *e = getenv("SJK_TEST_LIGHT");
    return e && *e && strcmp(e, "0") != 0;
}

/* 1 under SJK_TEST_BIG (unset or "0" otherwise): the real-model tests also run on the
 * models beyond `scripts/fetch-model all`, which CI does not fetch (Qwen2.5-Coder-1.5B:
 * `scripts/fetch-model every`). Without it those tests are not run and not counted. */
static inline int test_big(void)
{
    const char *e = getenv("SJK_TEST_BIG");
    return e && *e && strcmp(e, "0") != 0;
}

/* Path of a file under tests/data, resolved against SJK_TEST_DATA or the source tree. */
static inline const char *test_data_path(const char *name)
{
    static char buf[4096];
    const char *dir = getenv("SJK_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "tests/data", name);
    return buf;
}

#endif
