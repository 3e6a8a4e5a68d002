/* cmd_bench.c — `sjkvarn bench <what>`: dispatches to the benchmark families. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int sjk_bench_codec(int argc, char **argv);
int sjk_bench_balance(int argc, char **argv);
int sjk_bench_attn(int argc, char **argv);
int sjk_bench_trellis(int argc, char **argv);
int sjk_bench_run(int argc, char **argv);

int sjk_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: sjkvarn bench codec [--json] [options]   formats and record bodies\n"
                "       sjkvarn bench balance [--quick]          balancing rules (docs/BALANCING.md)\n"
                "       sjkvarn bench attn [--json] [--quick]    attention over the cache vs f16\n"
                "       sjkvarn bench trellis [--quick] [--speed] trellis body design measurements\n"
                "       sjkvarn bench run [--json] [--quick]      end to end tokens/s vs llama.cpp\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "codec")) return sjk_bench_codec(argc - 1, argv + 1);
    if (!strcmp(argv[1], "balance")) return sjk_bench_balance(argc - 1, argv + 1);
    if (!strcmp(argv[1], "attn")) return sjk_bench_attn(argc - 1, argv + 1);
    if (!strcmp(argv[1], "trellis")) return sjk_bench_trellis(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run")) return sjk_bench_run(argc - 1, argv + 1);
    fprintf(stderr, "sjkvarn bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
}
