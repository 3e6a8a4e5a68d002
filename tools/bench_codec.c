/* bench_codec.c — `sjkvarn bench codec`: placeholder until the codec benchmark lands. */
#include <stdio.h>

int sjk_bench_codec(int argc, char **argv);
int sjk_bench_codec(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "sjkvarn bench codec: not built yet\n");
    return 1;
}
