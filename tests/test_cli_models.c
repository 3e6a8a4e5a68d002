/* test_cli_models.c — every model-running command resolves -m through the one table of
 * known models (tools/models.c): an unknown name lists all the known names, a known name
 * whose file is missing says how to fetch it, and --help lists the models. Runs
 * $BUILD/sjkvarn (tests/run_tests.sh sets BUILD). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *const names[] = {"gemma3-270m", "smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b"};
static const char *const cmds[] = {"run -p x", "plan", "eval --kv q8_0", "bench run --quick"};

static char cli[1024], out[256];

/* Runs `[env] sjkvarn CMD ARGS`, stdout and stderr to out; returns the exit code. */
static int sh(const char *env, const char *cmd, const char *args)
{
    char line[4096];
    snprintf(line, sizeof line, "%s %s %s %s >%s 2>&1", env, cli, cmd, args, out);
    int r = system(line);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static int out_has(const char *needle)
{
    static char buf[1 << 16];
    FILE *f = fopen(out, "rb");
    if (!f) return 0;
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    return strstr(buf, needle) != NULL;
}

static int setup(void)
{
    const char *b = getenv("BUILD");
    snprintf(cli, sizeof cli, "%s/sjkvarn", b && *b ? b : "build");
    snprintf(out, sizeof out, "/tmp/sjk_cli_models_%d.txt", (int)getpid());
    return access(cli, X_OK) == 0;
}

TEST(test_unknown_model_lists_every_known_name)
{
    if (!setup()) SKIP("no CLI binary %s", cli);
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        CHECK(sh("", cmds[c], "-m no-such-model") != 0);
        CHECK(out_has("no-such-model") && out_has("not a known model name"));
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK(out_has(names[i]));
    }
    unlink(out);
}

TEST(test_missing_known_model_says_how_to_fetch)
{
    if (!setup()) SKIP("no CLI binary %s", cli);
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char args[128], want[128];
            snprintf(args, sizeof args, "-m %s", names[i]);
            snprintf(want, sizeof want, "scripts/fetch-model %s", names[i]);
            CHECK(sh("SJK_MODEL_DIR=/nonexistent/sjk-models", cmds[c], args) != 0);
            CHECK(out_has(want) && out_has("/nonexistent/sjk-models/"));
        }
    unlink(out);
}

TEST(test_help_lists_known_models)
{
    if (!setup()) SKIP("no CLI binary %s", cli);
    const char *helps[] = {"run", "plan", "eval", "bench run"};
    for (size_t c = 0; c < sizeof helps / sizeof helps[0]; c++) {
        CHECK(sh("", helps[c], "--help") == 0);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK(out_has(names[i]));
    }
    unlink(out);
}

int main(void)
{
    RUN(test_unknown_model_lists_every_known_name);
    RUN(test_missing_known_model_says_how_to_fetch);
    RUN(test_help_lists_known_models);
    return test_summary();
}
