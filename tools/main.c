/* main.c — the CLI entry point: dispatches `sjkvarn <command> ...`. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "sjkvarn.h"

static const sjk_cli_cmd commands[] = {
    {"bench", "benchmarks: codec, attn, trellis, balance, run (`sjkvarn bench --help`)", sjk_cmd_bench},
    {"run", "generate text with a GGUF model through a chosen KV cache", sjk_cmd_run},
    {"eval", "the KL study: caches vs an fp16 reference on real texts", sjk_cmd_eval},
    {"plan", "KV memory per cache configuration, budgets and the auto tier", sjk_cmd_plan},
    {"inspect", "what a GGUF, session or cache file is and whether it is intact", sjk_cmd_inspect},
    {"serve", "an OpenAI-compatible HTTP server: sessions, streaming, batched decode", sjk_cmd_serve},
    {"train-codebook", "train the trellis codebooks (writes src/codec/trellis_codebooks.c)", sjk_cmd_train},
    {"capture-tiles", "write the balanced K/V tiles a trellis cache codes on real texts (for codebooks)",
     sjk_cmd_capture},
};

static void usage(FILE *f)
{
    fprintf(f, "sjkvarn %s — SJ-KVaRN KV-cache codec\n\nusage: sjkvarn <command> [options]\n\ncommands:\n",
            sjk_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-8s %s\n", "version", "print the version");
    fprintf(f, "\n`sjkvarn <command> --help` describes each command.\n");
}

/* Every command's results go to stdout: a write error there (a full disk behind `>`,
 * /dev/full, a closed pipe with SIGPIPE ignored) must not end in exit 0 with the output
 * lost. rc unless stdout failed; then the error is said and the status is at least 1. */
static int finish_stdout(int rc)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "sjkvarn: writing standard output failed%s%s: the output is incomplete\n", errno ? ": " : "",
            errno ? strerror(errno) : "");
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    /* Past a file-size limit (ulimit -f) a write raises SIGXFSZ, which would kill the
     * process mid-save with no message and a temporary left behind; ignored, the write
     * fails with EFBIG and the save reports it and cleans up (docs/RELIABILITY.md). */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("sjkvarn %s\n", sjk_version());
        return finish_stdout(0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return finish_stdout(commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "sjkvarn: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
