/* test_formats_golden.c — the llama.cpp value formats are byte-identical to the PyPI
 * gguf package's reference quantizers (tests/data/golden_formats.txt, made by
 * scripts/gen-golden-formats.py), and decode the golden bytes to the same floats. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sjkvarn.h"

static uint64_t fnv64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Parses hex digits into bytes; returns the byte count or (size_t)-1 on bad input. */
static size_t unhex(uint8_t *dst, size_t cap, const char *s, const char **end)
{
    size_t n = 0;
    while (hexval((unsigned char)s[0]) >= 0 && hexval((unsigned char)s[1]) >= 0) {
        if (n == cap) return (size_t)-1;
        dst[n++] = (uint8_t)(hexval((unsigned char)s[0]) << 4 | hexval((unsigned char)s[1]));
        s += 2;
    }
    *end = s;
    return n;
}

typedef struct { int n_lines, n_byte_mismatch, n_decode_mismatch; } fmt_count;

TEST(test_formats_golden_bytes_match_gguf)
{
    FILE *f = fopen(test_data_path("golden_formats.txt"), "r");
    if (!f) SKIP("tests/data/golden_formats.txt not found");
    char *line = NULL;
    size_t line_cap = 0;
    enum { MAXN = 4096 };
    static float x[MAXN], dec[MAXN];
    static uint8_t want[MAXN * 4], got[MAXN * 4];
    size_t n = 0;
    char case_name[64] = "";
    fmt_count counts[SJK_FMT_COUNT];
    memset(counts, 0, sizeof counts);
    int n_cases = 0;
    while (getline(&line, &line_cap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (strncmp(line, "case ", 5) == 0) {
            CHECK(sscanf(line + 5, "%63s %zu", case_name, &n) == 2 && n <= MAXN);
            n_cases++;
            continue;
        }
        if (strncmp(line, "x ", 2) == 0) {
            const char *end;
            size_t nb = unhex(want, sizeof want, line + 2, &end);
            CHECK(nb == n * 4);
            for (size_t i = 0; i < n; i++) {
                uint32_t u = (uint32_t)want[4 * i] << 24 | (uint32_t)want[4 * i + 1] << 16 |
                             (uint32_t)want[4 * i + 2] << 8 | want[4 * i + 3];
                memcpy(&x[i], &u, 4);
            }
            continue;
        }
        char fname[32];
        int off = 0;
        if (sscanf(line, "%31s %n", fname, &off) != 1) continue;
        sjk_format fmt;
        if (sjk_format_from_name(fname, &fmt) != SJK_OK) {
            CHECKF(0, "unknown format %s", fname);
            break;
        }
        const char *end;
        size_t nb = unhex(want, sizeof want, line + off, &end);
        unsigned long long hash = 0;
        CHECK(sscanf(end, " %llx", &hash) == 1);
        const size_t row = sjk_format_row_nbytes(fmt, n);
        CHECKF(nb == row, "%s %s: %zu golden bytes, row is %zu", case_name, fname, nb, row);
        if (nb != row) continue;
        counts[fmt].n_lines++;
        CHECK(sjk_format_encode_row(fmt, got, sizeof got, x, n) == SJK_OK);
        if (memcmp(got, want, row) != 0) {
            counts[fmt].n_byte_mismatch++;
            const sjk_format_info *fi = sjk_format_get(fmt);
            for (size_t b = 0; b < row; b++) {
                if (got[b] != want[b]) {
                    size_t blk = b / fi->block_nbytes;
                    CHECKF(0, "%s %s: first differing byte %zu (block %zu): got %02x want %02x",
                           case_name, fname, b, blk, got[b], want[b]);
                    break;
                }
            }
        }
        CHECK(sjk_format_decode_row(fmt, dec, n, want, row) == SJK_OK);
        uint8_t le[MAXN * 4];
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &dec[i], 4);
            le[4 * i] = (uint8_t)u; le[4 * i + 1] = (uint8_t)(u >> 8);
            le[4 * i + 2] = (uint8_t)(u >> 16); le[4 * i + 3] = (uint8_t)(u >> 24);
        }
        if (fnv64(le, n * 4) != (uint64_t)hash) {
            counts[fmt].n_decode_mismatch++;
            CHECKF(0, "%s %s: decoded floats differ from gguf's dequantize", case_name, fname);
        }
    }
    free(line);
    fclose(f);
    CHECK(n_cases >= 15);
    static const sjk_format need[] = { SJK_FMT_F16, SJK_FMT_BF16, SJK_FMT_Q8_0, SJK_FMT_Q5_1,
                                       SJK_FMT_Q5_0, SJK_FMT_Q4_1, SJK_FMT_Q4_0 };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        const fmt_count *c = &counts[need[i]];
        CHECKF(c->n_lines >= 10 && c->n_byte_mismatch == 0 && c->n_decode_mismatch == 0,
               "%s: %d cases, %d byte mismatches, %d decode mismatches",
               sjk_format_get(need[i])->name, c->n_lines, c->n_byte_mismatch, c->n_decode_mismatch);
    }
}

/* tq6_0 staging against the public SJ-KVaRN reference codec (JakeATX/sj-kvarn-codec,
 * tests/expected_vectors.txt at ef8b3ea4, line "tq6 rows=64 n=256"): FNV-1a 64 of the
 * encoded blocks and of the decoded floats for 64 rows of 256 values. The inputs are that
 * project's integer-only generator, restated: xorshift64 (<<13, >>7, <<17; output the state
 * >> 11), seed 0xD1B54A32D192ED03; per row a token factor 1 + (next & 7); per value the
 * sum of four (next & 1023) - 512, times the factor, times 2^-12; the last row is then
 * zeroed (the zero-norm branch). Agreement shows our staging bytes are the fork's. */
static uint32_t xs_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

TEST(test_tq6_0_stage_matches_public_reference_vector)
{
    enum { ROWS = 64, N = 256 };
    static float x[ROWS * N], y[ROWS * N];
    static uint8_t q[ROWS * 196];
    uint64_t s = 0xD1B54A32D192ED03ull;
    for (int r = 0; r < ROWS; r++) {
        const int tf = 1 + (int)(xs_next(&s) & 7u);
        for (int i = 0; i < N; i++) {
            int32_t g = 0;
            for (int k = 0; k < 4; k++) g += (int32_t)(xs_next(&s) & 1023u) - 512;
            x[r * N + i] = (float)(g * tf) * (1.0f / 4096.0f);
        }
        if (r == ROWS - 1) memset(x + r * N, 0, N * sizeof *x);
    }
    CHECK(sjk_format_row_nbytes(SJK_FMT_TQ6_0_STAGE, N) == 196);
    for (int r = 0; r < ROWS; r++) {
        CHECK(sjk_format_encode_row(SJK_FMT_TQ6_0_STAGE, q + r * 196, 196, x + r * N, N) == SJK_OK);
        CHECK(sjk_format_decode_row(SJK_FMT_TQ6_0_STAGE, y + r * N, N, q + r * 196, 196) == SJK_OK);
    }
    /* that project's FNV starts from 1469598103934665603 (the usual offset basis with its
     * last digit dropped); the hashes only match with its start value */
    uint64_t he = 1469598103934665603ull, hd = he;
    for (size_t i = 0; i < sizeof q; i++) { he ^= q[i]; he *= 0x100000001B3ull; }
    const uint8_t *yb = (const uint8_t *)y; /* little-endian host, as the vector's */
    for (size_t i = 0; i < sizeof y; i++) { hd ^= yb[i]; hd *= 0x100000001B3ull; }
    CHECKF(he == 0xe2cf2c357ef8de90ull, "encode hash %016llx", (unsigned long long)he);
    CHECKF(hd == 0xde4f0c87393006e6ull, "decode hash %016llx", (unsigned long long)hd);
}

/* The encoders and decoders are chosen once per process from the CPU's features
 * (src/common/cpu.h), so one process checks one dispatch path. This runs the two tests
 * above again in child processes with SJK_CPU_DISABLE=avx512 (the AVX2 kernels) and
 * SJK_CPU_DISABLE=all (the scalar references), so a rounding bug in any path fails the
 * normal suite, not only a run with SJK_CPU_DISABLE set by hand. */
TEST(test_formats_golden_on_every_dispatch_path)
{
    static const char *const paths[] = {"avx512", "all"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "SJK_GOLDEN_ONE_PATH=1 SJK_CPU_DISABLE=%s /proc/%d/exe 2>&1", paths[i],
                 (int)getpid());
        FILE *f = popen(cmd, "r");
        CHECK(f != NULL);
        if (!f) continue;
        char line[512], last[512] = "";
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "FAIL", 4) || !strncmp(line, "  ", 2)) fputs(line, stderr);
            snprintf(last, sizeof last, "%s", line);
        }
        int st = pclose(f);
        CHECKF(st == 0 && strncmp(last, "2 passed, 0 failed", 18) == 0, "SJK_CPU_DISABLE=%s: exit %d, '%s'",
               paths[i], st, last);
        if (getenv("SJK_TEST_VERBOSE")) fprintf(stderr, "  SJK_CPU_DISABLE=%s: %s", paths[i], last);
    }
}

int main(void)
{
    RUN(test_formats_golden_bytes_match_gguf);
    RUN(test_tq6_0_stage_matches_public_reference_vector);
    if (!getenv("SJK_GOLDEN_ONE_PATH")) RUN(test_formats_golden_on_every_dispatch_path);
    return test_summary();
}
