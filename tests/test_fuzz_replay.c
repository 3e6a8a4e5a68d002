/* test_fuzz_replay.c — every committed fuzz seed (fuzz/corpus/TARGET/ files) runs through
 * its libFuzzer entry point in the ordinary suite (and so under `make asan`, `make ubsan`
 * and `make valgrind`). The targets are the fuzz/fuzz_TARGET.c files themselves, included here with
 * FUZZ_NAME renaming each LLVMFuzzerTestOneInput. A file that crashes a target fails the
 * suite by crashing this binary; every directory must hold at least one seed. Also
 * replays findings saved by `make fuzz` under fuzz/corpus/<target>/ once committed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define FUZZ_NAME fuzz_gguf_one
#include "../fuzz/fuzz_gguf.c"
#undef FUZZ_NAME
#define FUZZ_NAME fuzz_record_one
#include "../fuzz/fuzz_record.c"
#undef FUZZ_NAME
#define FUZZ_NAME fuzz_cache_file_one
#include "../fuzz/fuzz_cache_file.c"
#undef FUZZ_NAME
#define FUZZ_NAME fuzz_tokenizer_one
#include "../fuzz/fuzz_tokenizer.c"
#undef FUZZ_NAME

static int replay_dir(const char *target, int (*fn)(const uint8_t *, size_t))
{
    char dir[256];
    snprintf(dir, sizeof dir, "fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
        size_t got = buf ? fread(buf, 1, (size_t)(len > 0 ? len : 0), f) : 0;
        fclose(f);
        if (!buf) continue;
        /* an exact-size copy, so ASan sees a read one past the end */
        uint8_t *exact = malloc(got ? got : 1);
        memcpy(exact, buf, got);
        fn(exact, got);
        free(exact);
        free(buf);
        n++;
    }
    closedir(d);
    if (getenv("SJK_TEST_VERBOSE")) fprintf(stderr, "  %s: %d seeds\n", target, n);
    return n;
}

#define REPLAY_TEST(name, target, fn)                                                       \
    TEST(name)                                                                              \
    {                                                                                       \
        int n = replay_dir(target, fn);                                                     \
        if (n < 0) SKIP("fuzz/corpus/%s not found (run from the repository root)", target); \
        CHECKF(n > 0, "no seeds in fuzz/corpus/%s", target);                                \
    }

REPLAY_TEST(test_fuzz_replay_gguf, "gguf", fuzz_gguf_one)
REPLAY_TEST(test_fuzz_replay_record, "record", fuzz_record_one)
REPLAY_TEST(test_fuzz_replay_cache_file, "cache_file", fuzz_cache_file_one)
REPLAY_TEST(test_fuzz_replay_tokenizer, "tokenizer", fuzz_tokenizer_one)

int main(void)
{
    RUN(test_fuzz_replay_gguf);
    RUN(test_fuzz_replay_record);
    RUN(test_fuzz_replay_cache_file);
    RUN(test_fuzz_replay_tokenizer);
    sjk_cache_free(fuzz_cache_file_target());
    return test_summary();
}
