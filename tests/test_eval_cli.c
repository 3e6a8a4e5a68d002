/* test_eval_cli.c — `sjkvarn eval` end to end on the synthetic backend: exit codes and
 * messages for bad arguments, and well-formed JSON / CSV / SVG files from a real run of
 * the command line. Runs $BUILD/sjkvarn (tests/run_tests.sh sets BUILD). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "support/files.h"

static char cli[1024], dir[256];

/* Runs `sjkvarn eval ARGS`, stdout to dir/out, stderr to dir/err; returns the exit code. */
static int eval(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s eval %s >%s/out 2>%s/err", cli, args, dir, dir);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static char *slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return test_read_file(path, NULL);
}

static int file_has(const char *name, const char *needle)
{
    char *s = slurp(name);
    int r = s && strstr(s, needle) != NULL;
    free(s);
    return r;
}

static int setup(void)
{
    const char *b = getenv("BUILD");
    snprintf(cli, sizeof cli, "%s/sjkvarn", b && *b ? b : "build");
    if (access(cli, X_OK) != 0) return 0;
    snprintf(dir, sizeof dir, "/tmp/sjk_eval_cli_%d", (int)getpid());
    mkdir(dir, 0700);
    char path[512];
    snprintf(path, sizeof path, "%s/doc.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    for (int i = 0; i < 40; i++)
        fprintf(f, "Line %d of a small document, with words, numbers (%d) and punctuation.\n", i, i * i);
    fprintf(f, "\f\nQuestion: what is on line 3?\nAnswer:");
    fclose(f);
    return 1;
}

TEST(test_eval_cli_rejects_bad_arguments)
{
    if (!*cli) SKIP("no CLI binary");
    CHECK(eval("") == 2 && file_has("err", "-m MODEL is required"));
    CHECK(eval("--synthetic") == 2 && file_has("err", "--kv is required"));
    CHECK(eval("--synthetic --kv sj:9/4 --docs none --text /dev/null") == 2 &&
          file_has("err", "sj:9/4"));
    CHECK(eval("--synthetic --kv q8_0,q8_0 --docs none --text x") == 2 &&
          file_has("err", "given twice"));
    CHECK(eval("--synthetic --kv q8_0 --ctx 100 -n 100 --docs none --text x") == 2 &&
          file_has("err", "leaves no prompt"));
    CHECK(eval("--synthetic --kv q8_0 -n abc") == 2 && file_has("err", "-n needs an integer"));
    CHECK(eval("--synthetic --kv q8_0 -n 2.5") == 2 && file_has("err", "-n needs an integer"));
    CHECK(eval("--synthetic --kv q8_0 --frobnicate") == 2 && file_has("err", "unknown option"));
    CHECK(eval("--synthetic --kv q8_0 --docs none --text /nonexistent/file") == 2 &&
          file_has("err", "/nonexistent/file"));
    CHECK(eval("--synthetic --kv q8_0 --docs all --corpus /nonexistent") == 2 &&
          file_has("err", "fetch-corpus"));
    CHECK(eval("-m /nonexistent/model.gguf --kv q8_0") == 2 &&
          file_has("err", "/nonexistent/model.gguf"));
    CHECK(eval("--help") == 0 && file_has("out", "usage: sjkvarn eval"));
}

TEST(test_eval_cli_writes_every_output)
{
    if (!*cli) SKIP("no CLI binary");
    char args[2048];
    snprintf(args, sizeof args, "--synthetic --kv f16,q8_0/q8_0,sj:4/4 --docs none "
             "--text %s/doc.txt --text %s/doc.txt --ctx 1024 -n 24 --boot 50 --no-progress "
             "--csv %s/r.csv --svg %s/svg", dir, dir, dir, dir);
    CHECK(eval(args) == 0);
    CHECK(file_has("out", "paired ratio of mean KL"));
    CHECK(file_has("r.csv", "config,n,mean_kl"));
    CHECK(file_has("r-pairs.csv", "a,b,ratio,ci_low,ci_high"));
    CHECK(file_has("r-positions.csv", "config,doc,position,kl"));
    CHECK(file_has("svg/frontier.svg", "</svg>"));
    CHECK(file_has("svg/positions.svg", "<polyline"));
    CHECK(file_has("svg/frontier-allocated.svg", "allocated bits per value"));
    CHECK(file_has("svg/frontier-allocated.svg", "</svg>"));
    CHECK(file_has("svg/frontier.svg", "stroke-dasharray")); /* the comparators' staircase */
    /* the prompt kept the query after the form feed; the generated positions are the last
     * 24 of 1024 */
    CHECK(file_has("r-positions.csv", "f16,doc.txt,999,0,1,"));
    CHECK(file_has("r-positions.csv", "doc.txt,1022,"));
    CHECK(!file_has("r-positions.csv", "doc.txt,1023,"));
    snprintf(args, sizeof args, "--synthetic --kv q8_0/q8_0,sj:4/4 --docs none --text %s/doc.txt "
             "--ctx 512 -n 8 --boot 20 --json", dir);
    CHECK(eval(args) == 0);
    CHECK(file_has("out", "\"configs\": [") && file_has("out", "\"ci_high\": "));
    CHECK(file_has("err", "SYNTHETIC"));
}

int main(void)
{
    if (!setup()) cli[0] = 0;
    RUN(test_eval_cli_rejects_bad_arguments);
    RUN(test_eval_cli_writes_every_output);
    if (*dir) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return test_summary();
}
