/* test_doc_tables.c — the tables of docs/benchmarks/, RESULTS.md, studies/ and STORE.md are what
 * scripts/render-doc-tables makes of the CSV files in docs/results, so a number in the documents
 * cannot drift from its CSV (the record that scripts/bench-results and scripts/kl-study
 * rewrite). Also checks that the check can fail: a changed digit in a copy of a document,
 * or in a copy of a CSV, is reported. Runs from the repository root (as make test does);
 * needs python3 (standard library only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char dir[256];

static int sh(const char *cmd)
{
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static int have_python(void)
{
    return sh("python3 -c 'import csv, re' >/dev/null 2>&1") == 0;
}

static int ready(void)
{
    return access("scripts/render-doc-tables", R_OK) == 0 && access("docs/results", R_OK) == 0;
}

/* Replaces the first occurrence of `from` after the line containing `after` in the file. */
static int edit_file(const char *path, const char *after, const char *from, const char *to)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char buf[1 << 20], out[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *a = strstr(buf, after);
    char *p = a ? strstr(a, from) : NULL;
    if (!p) return 0;
    size_t pre = (size_t)(p - buf);
    if (n - strlen(from) + strlen(to) >= sizeof out) return 0;
    memcpy(out, buf, pre);
    strcpy(out + pre, to);
    strcpy(out + pre + strlen(to), p + strlen(from));
    f = fopen(path, "wb");
    if (!f) return 0;
    fputs(out, f);
    return fclose(f) == 0;
}

TEST(test_doc_tables_match_their_csv)
{
    if (!ready()) SKIP("not run from the repository root (no scripts/render-doc-tables)");
    if (!have_python()) SKIP("python3 not found");
    CHECKF(sh("python3 scripts/render-doc-tables --check") == 0,
           "a table in docs/ differs from docs/results/*.csv: run scripts/render-doc-tables");
}

TEST(test_doc_tables_check_catches_an_edited_number)
{
    if (!ready()) SKIP("not run from the repository root (no scripts/render-doc-tables)");
    if (!have_python()) SKIP("python3 not found");
    char cmd[1024], path[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/docs && cp -r docs/benchmarks docs/RESULTS.md docs/STORE.md docs/studies %s/docs/ && "
             "cp -r docs/results %s/results", dir, dir, dir);
    CHECK(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "python3 scripts/render-doc-tables --check --docs %s/docs --results %s/results", dir, dir);
    CHECK(sh(cmd) == 0); /* the copies agree */

    /* a digit of the headline ratio changed in the document */
    snprintf(path, sizeof path, "%s/docs/studies/gemma3-16k.md", dir);
    CHECK(edit_file(path, "<!-- table kl-gemma3-16k-pairs", "| 0.468 |", "| 0.368 |"));
    snprintf(cmd, sizeof cmd, "python3 scripts/render-doc-tables --check --docs %s/docs --results %s/results "
             "2>/dev/null", dir, dir);
    CHECK(sh(cmd) == 1);

    /* the document restored, a value changed in the CSV instead */
    snprintf(cmd, sizeof cmd, "cp docs/studies/gemma3-16k.md %s/docs/studies/", dir);
    CHECK(sh(cmd) == 0);
    snprintf(path, sizeof path, "%s/results/bench-attn.csv", dir);
    /* (the row's µs/token gains a leading digit, whatever the measured numbers are) */
    CHECK(edit_file(path, "gemma3,sj:4/4,32768,1,", "gemma3,sj:4/4,32768,1,", "gemma3,sj:4/4,32768,1,9"));
    snprintf(cmd, sizeof cmd, "python3 scripts/render-doc-tables --check --docs %s/docs --results %s/results "
             "2>/dev/null", dir, dir);
    CHECK(sh(cmd) == 1);

    /* a table marker without its end is an error, not a silently unchecked table */
    snprintf(cmd, sizeof cmd, "cp docs/results/bench-attn.csv %s/results/ && "
             "grep -v '^<!-- end table split-weights -->$' docs/benchmarks/attention.md >%s/docs/benchmarks/attention.md",
             dir, dir);
    CHECK(sh(cmd) == 0);
    snprintf(cmd, sizeof cmd, "python3 scripts/render-doc-tables --check --docs %s/docs --results %s/results "
             "2>/dev/null", dir, dir);
    CHECK(sh(cmd) == 1);
}

/* scripts/kl-positions on the committed positions of qwen1.5b-32k-keys reproduces the
 * analysis docs/studies/qwen2.5-coder-1.5b.md quotes ("The peak guard at 32K: code-0":
 * 1.24x by the mean, 0.80 and 0.83 without the 2 and 3 largest positions, 32743 the
 * largest difference), and refuses a configuration the files do not have. */
TEST(test_kl_positions_reproduces_the_quoted_analysis)
{
    if (!have_python()) SKIP("python3 not found");
    if (access("scripts/kl-positions", R_OK) != 0) SKIP("not run from the repository root");
    const char *csvs = "docs/results/kl-raw/qwen1.5b-32k-keys/code-0-b1-positions.csv "
                       "docs/results/kl-raw/qwen1.5b-32k-keys/code-0-b2-positions.csv";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 scripts/kl-positions %s --pair kvarn:4/4:tail=1024 "
             "sj:4/4t:tail=1024:stage=q8_0 --top 1", csvs);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    static char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK(pclose(p) == 0);
    CHECKF(strstr(out, "B / A: 1.242; B below A at 134 of 256 positions") != NULL, "output:\n%s", out);
    CHECKF(strstr(out, "without the 2 position(s) of largest max(A, B): 0.7972") != NULL, "output:\n%s", out);
    CHECKF(strstr(out, "without the 3 position(s) of largest max(A, B): 0.8334") != NULL, "output:\n%s", out);
    CHECKF(strstr(out, "code-0            32743") != NULL, "output:\n%s", out);
    snprintf(cmd, sizeof cmd, "python3 scripts/kl-positions %s --pair kvarn:4/4:tail=1024 sj:9/9 >/dev/null 2>&1", csvs);
    CHECK(sh(cmd) == 1);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/sjk_doc_tables_%d", (int)getpid());
    RUN(test_doc_tables_match_their_csv);
    RUN(test_doc_tables_check_catches_an_edited_number);
    RUN(test_kl_positions_reproduces_the_quoted_analysis);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (sh(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_summary();
}
