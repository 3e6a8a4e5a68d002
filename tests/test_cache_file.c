/* test_cache_file.c — cache save/restore (include/sjkvarn.h "Cache files"): a restored
 * cache attends bit-identically; a file for another model, configuration, geometry or
 * version is refused with its own status; 1,000 random bit flips are all detected and
 * never change the target cache; truncation at every structural boundary is detected; a
 * writer killed mid-save never damages the previous file, and the temporary file it left
 * is removed by the next save of the same path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/rng.h"
#include "harness.h"
#include "sjkvarn.h"

#define D 128
#define NKV 2
#define NQ 4
#define NL 3
#define NS 2
#define MAXPOS 2048

static uint8_t g_fp[SJK_FINGERPRINT_NBYTES] = "model-fingerprint-for-tests.....";

static sjk_cache_params make_params(sjk_layer_config *lay)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = NL;
    p.n_kv_heads = NKV;
    p.n_q_heads = NQ;
    p.head_dim = D;
    p.max_pos = MAXPOS;
    p.n_seqs = NS;
    p.max_q_rows = 4;
    CHECK(sjk_cache_config_parse("sj:3/3t:tail=256", 1, &lay[0], NULL, 0) == SJK_OK);
    lay[0].tail_max = 512;
    CHECK(sjk_cache_config_parse("kvarn:4/4", 1, &lay[1], NULL, 0) == SJK_OK);
    CHECK(sjk_cache_config_parse("q8_0/q4_0", 1, &lay[2], NULL, 0) == SJK_OK);
    p.layers = lay;
    return p;
}

/* Appends n positions of random rows to every layer of seq. */
static void fill(sjk_cache *c, uint32_t seq, uint32_t n, uint64_t seed)
{
    static float k[64 * NKV * D], v[64 * NKV * D];
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    for (uint32_t done = 0; done < n;) {
        uint32_t m = n - done < 64 ? n - done : 64;
        for (size_t i = 0; i < (size_t)m * NKV * D; i++) {
            k[i] = (float)sjk_rng_normal(&r) + (i % D == 3 ? 4.f : 0.f);
            v[i] = (float)sjk_rng_normal(&r);
        }
        for (uint32_t l = 0; l < NL; l++) CHECK(sjk_cache_append(c, seq, l, k, v, m) == SJK_OK);
        done += m;
    }
}

/* Attention of one fixed query against every (seq, layer) into out[NS][NL][NQ*D]. */
static void probe(sjk_cache *c, float *out)
{
    float q[NQ * D];
    sjk_rng r;
    sjk_rng_seed(&r, 99);
    for (int i = 0; i < NQ * D; i++) q[i] = (float)sjk_rng_normal(&r);
    for (uint32_t s = 0; s < NS; s++)
        for (uint32_t l = 0; l < NL; l++) {
            uint32_t n;
            sjk_cache_length(c, s, l, &n, NULL);
            float *o = out + ((size_t)s * NL + l) * NQ * D;
            if (n == 0) { memset(o, 0, NQ * D * sizeof *o); continue; }
            CHECK(sjk_cache_attend(c, s, l, q, 1, 0.088f, o) == SJK_OK);
        }
}

static sjk_cache *make_filled(void)
{
    sjk_layer_config lay[NL];
    sjk_cache_params p = make_params(lay);
    sjk_cache *c = NULL;
    CHECK(sjk_cache_create(&p, &c) == SJK_OK);
    if (!c) return NULL;
    /* past the sink, sealed groups, ring wrap-around (700 under SJK_TEST_LIGHT: valgrind) */
    fill(c, 0, getenv("SJK_TEST_LIGHT") ? 700 : 1300, 1);
    fill(c, 1, 77, 2);   /* inside the sink only */
    return c;
}

static uint8_t *save_mem(sjk_cache *c, size_t *n)
{
    CHECK(sjk_cache_save_memory(c, g_fp, NULL, 0, n) == SJK_OK);
    uint8_t *b = malloc(*n);
    CHECK(b && sjk_cache_save_memory(c, g_fp, b, *n, n) == SJK_OK);
    return b;
}

TEST(test_cache_file_roundtrip_bit_identical)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    char path[] = "/tmp/sjk_cache_file_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char err[256];
    CHECK(sjk_cache_save(a, path, g_fp, err, sizeof err) == SJK_OK);
    sjk_layer_config lay[NL];
    sjk_cache_params p = make_params(lay);
    p.n_threads = 2;   /* may differ */
    p.max_q_rows = 8;  /* may differ */
    sjk_cache *b = NULL;
    CHECK(sjk_cache_create(&p, &b) == SJK_OK);
    CHECKF(sjk_cache_restore(b, path, g_fp, err, sizeof err) == SJK_OK, "%s", err);
    static float oa[NS * NL * NQ * D], ob[NS * NL * NQ * D];
    probe(a, oa);
    probe(b, ob);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    for (uint32_t s = 0; s < NS; s++)
        for (uint32_t l = 0; l < NL; l++) {
            uint32_t n1, b1, n2, b2;
            sjk_cache_length(a, s, l, &n1, &b1);
            sjk_cache_length(b, s, l, &n2, &b2);
            CHECK(n1 == n2 && b1 == b2);
        }
    CHECK(sjk_cache_check(b, NULL, 0) == SJK_OK);
    /* the restored cache keeps going exactly like the original */
    fill(a, 0, 300, 5);
    fill(b, 0, 300, 5);
    probe(a, oa);
    probe(b, ob);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    size_t na, nb;
    uint8_t *fa = save_mem(a, &na), *fb = save_mem(b, &nb);
    CHECK(na == nb && memcmp(fa, fb, na) == 0);
    struct stat stt;
    CHECK(stat(path, &stt) == 0 && (stt.st_mode & 0777) == 0600);
    free(fa);
    free(fb);
    unlink(path);
    sjk_cache_free(a);
    sjk_cache_free(b);
}

/* Rewrites the header CRC after a deliberate header edit. */
static void reseal_header(uint8_t *f)
{
    uint32_t c = sjk_crc32c(0, f, 124);
    f[124] = (uint8_t)c; f[125] = (uint8_t)(c >> 8); f[126] = (uint8_t)(c >> 16); f[127] = (uint8_t)(c >> 24);
}

TEST(test_cache_file_refuses_other_model_config_version)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    size_t n;
    uint8_t *f = save_mem(a, &n);
    char err[256];
    uint8_t other[SJK_FINGERPRINT_NBYTES] = "another-model";
    CHECK(sjk_cache_restore_memory(a, f, n, other, err, sizeof err) == SJK_ERR_MISMATCH);
    CHECK(strstr(err, "another model") != NULL);
    CHECK(sjk_cache_restore_memory(a, f, n, NULL, err, sizeof err) == SJK_ERR_MISMATCH);

    sjk_layer_config lay[NL];
    sjk_cache_params p = make_params(lay);
    lay[0].tail_min = 128; /* another configuration */
    sjk_cache *b = NULL;
    CHECK(sjk_cache_create(&p, &b) == SJK_OK);
    CHECK(sjk_cache_restore_memory(b, f, n, g_fp, err, sizeof err) == SJK_ERR_MISMATCH);
    CHECKF(strstr(err, "layer 0") && strstr(err, "tail_min"), "%s", err);
    sjk_cache_free(b);
    p = make_params(lay);
    p.max_pos = MAXPOS + 128; /* another geometry */
    CHECK(sjk_cache_create(&p, &b) == SJK_OK);
    CHECK(sjk_cache_restore_memory(b, f, n, g_fp, err, sizeof err) == SJK_ERR_MISMATCH);
    CHECKF(strstr(err, "max_pos") != NULL, "%s", err);
    sjk_cache_free(b);

    uint8_t *g = malloc(n);
    memcpy(g, f, n);
    g[8] = SJK_CACHE_FILE_VERSION + 1; /* a newer file version */
    reseal_header(g);
    CHECK(sjk_cache_restore_memory(a, g, n, g_fp, err, sizeof err) == SJK_ERR_FORMAT);
    char want[32];
    snprintf(want, sizeof want, "version %d", SJK_CACHE_FILE_VERSION + 1);
    CHECKF(strstr(err, want) != NULL, "%s", err);
    g[8] = 1; /* v1 (uncentered rings): refused too */
    reseal_header(g);
    CHECK(sjk_cache_restore_memory(a, g, n, g_fp, err, sizeof err) == SJK_ERR_FORMAT);
    CHECKF(strstr(err, "version 1") != NULL, "%s", err);
    memcpy(g, f, n);
    g[0] = 'X';
    CHECK(sjk_cache_restore_memory(a, g, n, g_fp, err, sizeof err) == SJK_ERR_FORMAT);
    CHECK(sjk_cache_restore_memory(a, g, 3, g_fp, err, sizeof err) == SJK_ERR_FORMAT);
    CHECK(sjk_cache_restore(a, "/nonexistent/dir/x.sjkc", g_fp, err, sizeof err) == SJK_ERR_IO);
    CHECK(sjk_cache_save(a, "/nonexistent/dir/x.sjkc", g_fp, err, sizeof err) == SJK_ERR_IO);
    free(g);
    free(f);
    sjk_cache_free(a);
}

TEST(test_cache_file_1000_bit_flips_all_detected)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    size_t n;
    uint8_t *f = save_mem(a, &n);
    uint8_t *g = malloc(n);
    /* the target holds other content; a refused file must leave it untouched */
    sjk_layer_config lay[NL];
    sjk_cache_params p = make_params(lay);
    sjk_cache *t = NULL;
    CHECK(sjk_cache_create(&p, &t) == SJK_OK);
    fill(t, 0, 700, 42);
    static float before[NS * NL * NQ * D], after[NS * NL * NQ * D];
    probe(t, before);
    sjk_rng r;
    sjk_rng_seed(&r, 2026);
    /* 1,000 in the suite; SJK_TEST_LIGHT (set by `make valgrind`) runs 100 */
    int detected = 0, trials = getenv("SJK_TEST_LIGHT") ? 100 : 1000;
    for (int i = 0; i < trials; i++) {
        memcpy(g, f, n);
        int flips = i < trials * 4 / 5 ? 1 : 1 + (int)(sjk_rng_u64(&r) % 8);
        for (int j = 0; j < flips; j++) {
            /* half the flips land in the first 4 KiB (header, CONF, STAT, early DATA) */
            size_t pos = (size_t)(sjk_rng_u64(&r) % (i & 1 ? n : (n < 4096 ? n : 4096)));
            g[pos] ^= (uint8_t)(1u << (sjk_rng_u64(&r) % 8));
        }
        if (!memcmp(f, g, n)) { detected++; continue; } /* two flips cancelled: nothing changed */
        char err[256];
        sjk_status st = sjk_cache_restore_memory(t, g, n, g_fp, err, sizeof err);
        if (st == SJK_ERR_CORRUPT || st == SJK_ERR_FORMAT || st == SJK_ERR_MISMATCH) detected++;
    }
    CHECKF(detected == trials, "%d of %d detected", detected, trials);
    probe(t, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    CHECK(sjk_cache_check(t, NULL, 0) == SJK_OK);
    if (getenv("SJK_TEST_VERBOSE")) fprintf(stderr, "  %d/%d bit-flipped files detected (%zu bytes each)\n", detected, trials, n);
    free(g);
    free(f);
    sjk_cache_free(t);
    sjk_cache_free(a);
}

TEST(test_cache_file_truncated_anywhere)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    size_t n;
    uint8_t *f = save_mem(a, &n);
    int bad = 0;
    for (size_t cut = 0; cut < n; cut += (cut < 2048 ? 1 : 997)) {
        char err[128];
        if (sjk_cache_restore_memory(a, f, cut, g_fp, err, sizeof err) == SJK_OK) bad++;
    }
    CHECK(bad == 0);
    CHECK(sjk_cache_restore_memory(a, f, n, g_fp, NULL, 0) == SJK_OK);
    free(f);
    sjk_cache_free(a);
}

/* A forged file with valid checksums but impossible lengths is refused by bounds. */
TEST(test_cache_file_forged_state_refused)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    size_t n;
    uint8_t *f = save_mem(a, &n);
    /* STAT payload starts after header(128) + CONF(16 + NL*32 + 4) + STAT header(16) */
    size_t st_off = 128 + 16 + NL * 32 + 4;
    uint8_t *pl = f + st_off + 16;
    pl[0] = 0xFF; pl[1] = 0xFF; pl[2] = 0xFF; pl[3] = 0x7F; /* seq 0 layer 0 length huge */
    uint32_t c = sjk_crc32c(0, f + st_off, 16 + NS * NL * 8);
    uint8_t *cp = f + st_off + 16 + NS * NL * 8;
    cp[0] = (uint8_t)c; cp[1] = (uint8_t)(c >> 8); cp[2] = (uint8_t)(c >> 16); cp[3] = (uint8_t)(c >> 24);
    char err[256];
    CHECK(sjk_cache_restore_memory(a, f, n, g_fp, err, sizeof err) == SJK_ERR_CORRUPT);
    CHECKF(strstr(err, "max_pos") != NULL, "%s", err);
    free(f);
    sjk_cache_free(a);
}

/* Issue 21: the cache part refused non-finite sink values and record scales but took any
 * bytes in uniform rows and staging rings. Every stored row is now decoded in the
 * validating pass and must be finite: an Inf forged into an f16 row, or a NaN into a
 * q8_0 block scale (checksums recomputed), is refused and the cache is unchanged. */
TEST(test_cache_file_nonfinite_row_refused)
{
    static const char *const cfgs[] = {"f16", "q8_0", "sj:4/4:sink=0:tail=128"};
    for (int ci = 0; ci < 3; ci++) {
        sjk_cache_params p = sjk_cache_params_default();
        p.n_layers = 1;
        p.n_kv_heads = 1;
        p.n_q_heads = 1;
        p.head_dim = 128;
        p.max_pos = 256;
        p.max_q_rows = 4;
        p.n_threads = 1;
        CHECK(sjk_cache_config_parse(cfgs[ci], 1, &p.layer, NULL, 0) == SJK_OK);
        sjk_cache *c = NULL;
        CHECK(sjk_cache_create(&p, &c) == SJK_OK);
        if (!c) continue;
        float row[128];
        for (int i = 0; i < 5; i++) {
            for (int d = 0; d < 128; d++) row[d] = (float)((d * 7 + i) % 13) / 13.0f - 0.5f;
            CHECK(sjk_cache_append(c, 0, 0, row, row, 1) == SJK_OK);
        }
        size_t n;
        uint8_t *f = save_mem(c, &n);
        CHECK(sjk_cache_restore_memory(c, f, n, g_fp, NULL, 0) == SJK_OK); /* the control */
        /* DATA of seq 0 layer 0: after the header, CONF and STAT sections */
        size_t data = 128 + (16 + 32 + 4) + (16 + 8 + 4), pl = data + 16;
        /* f16 rows: the first value; q8_0 rows: the first block's scale (fp16 d); sj: the
         * first staged row (tq6_0 stage: its leading fp16 scale) */
        f[pl] = 0x00, f[pl + 1] = ci == 0 ? 0x7C : 0x7E;
        size_t payload = n - pl - 4;
        uint32_t crc = sjk_crc32c(0, f + data, 16 + payload);
        f[n - 4] = (uint8_t)crc, f[n - 3] = (uint8_t)(crc >> 8), f[n - 2] = (uint8_t)(crc >> 16), f[n - 1] = (uint8_t)(crc >> 24);
        char err[256] = "";
        sjk_status st = sjk_cache_restore_memory(c, f, n, g_fp, err, sizeof err);
        CHECKF(st == SJK_ERR_CORRUPT && strstr(err, "non-finite"), "%s: %s (%s)", cfgs[ci], sjk_status_str(st), err);
        uint32_t len = 0;
        CHECK(sjk_cache_length(c, 0, 0, &len, NULL) == SJK_OK && len == 5);
        free(f);
        sjk_cache_free(c);
    }
}

/* A writer killed at a random moment leaves the old file or the new one, never a mix. */
TEST(test_cache_file_crash_mid_write_keeps_previous)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    char dir[] = "/tmp/sjk_crash_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/session.sjkc", dir);
    char err[256];
    CHECK(sjk_cache_save(a, path, g_fp, err, sizeof err) == SJK_OK);
    size_t n_old;
    uint8_t *old = save_mem(a, &n_old);
    fill(a, 0, 400, 9);
    size_t n_new;
    uint8_t *nw = save_mem(a, &n_new);
    int ok = 0;
    for (int trial = 0; trial < 6; trial++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (;;) sjk_cache_save(a, path, g_fp, NULL, 0);
        }
        usleep(2000 + 3000 * trial);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        FILE *fp = fopen(path, "rb");
        CHECK(fp != NULL);
        if (!fp) break;
        static uint8_t buf[1 << 22];
        size_t got = fread(buf, 1, sizeof buf, fp);
        fclose(fp);
        if ((got == n_old && !memcmp(buf, old, got)) || (got == n_new && !memcmp(buf, nw, got))) ok++;
    }
    CHECK(ok == 6);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    free(old);
    free(nw);
    sjk_cache_free(a);
}

static int has_file(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* PATH.tmp-XXXXXX entries in dir (the temporary files of saves of dir/session.sjkc) */
static int n_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, "session.sjkc.tmp-", 17);
    closedir(d);
    return n;
}

static void touch(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) fputs("partial save", f), fclose(f);
}

/* A save killed mid-write leaves PATH.tmp-XXXXXX behind (PATH itself is intact); the next
 * successful save of PATH removes those whose writer is gone, never one a live writer
 * holds (its flock), nor anything that is not exactly PATH.tmp-<6 alnum>, a regular file. */
TEST(test_cache_file_stale_temporaries_swept_after_kill)
{
    sjk_cache *a = make_filled();
    if (!a) return;
    char dir[] = "/tmp/sjk_sweep_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/session.sjkc", dir);
    char err[256];
    CHECK(sjk_cache_save(a, path, g_fp, err, sizeof err) == SJK_OK);
    for (int trial = 0; trial < 3; trial++) { /* real kills: leave 0 or 1 temporaries each */
        pid_t pid = fork();
        if (pid == 0)
            for (;;) sjk_cache_save(a, path, g_fp, NULL, 0);
        usleep(3000 + 4000 * trial);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    touch(dir, "session.sjkc.tmp-Abc123"); /* certainly stale */
    touch(dir, "session.sjkc.tmp-zz9ZZ9");
    /* a live writer: this open file description holds the lock the sweep must respect */
    touch(dir, "session.sjkc.tmp-live00");
    char live[128];
    snprintf(live, sizeof live, "%s/session.sjkc.tmp-live00", dir);
    int lfd = open(live, O_RDONLY);
    CHECK(lfd >= 0 && flock(lfd, LOCK_EX) == 0);
    /* not temporaries of this path */
    touch(dir, "session.sjkc.tmp-abc12");
    touch(dir, "session.sjkc.tmp-abc1234");
    touch(dir, "session.sjkc.tmp-ab.c12");
    touch(dir, "other.sjkc.tmp-abc123");
    touch(dir, "session.sjkc.old");
    char sub[128];
    snprintf(sub, sizeof sub, "%s/session.sjkc.tmp-dir123", dir);
    CHECK(mkdir(sub, 0700) == 0);
    int before = n_temporaries(dir); /* the 7 made here, plus what the kills left (0-3) */
    CHECK(before >= 7);
    CHECK(sjk_cache_save(a, path, g_fp, err, sizeof err) == SJK_OK);
    CHECK(!has_file(dir, "session.sjkc.tmp-Abc123") && !has_file(dir, "session.sjkc.tmp-zz9ZZ9"));
    CHECK(has_file(dir, "session.sjkc.tmp-live00"));
    CHECK(has_file(dir, "session.sjkc.tmp-abc12") && has_file(dir, "session.sjkc.tmp-abc1234"));
    CHECK(has_file(dir, "session.sjkc.tmp-ab.c12") && has_file(dir, "session.sjkc.tmp-dir123"));
    CHECK(has_file(dir, "other.sjkc.tmp-abc123") && has_file(dir, "session.sjkc.old"));
    /* live00, abc12, abc1234, ab.c12, dir123: the killed writers' files are gone too */
    CHECKF(n_temporaries(dir) == 5, "%d temporaries left (%d before)", n_temporaries(dir), before);
    /* the writer goes away: the next save takes its file */
    close(lfd);
    CHECK(sjk_cache_save(a, path, g_fp, err, sizeof err) == SJK_OK);
    CHECK(!has_file(dir, "session.sjkc.tmp-live00"));
    CHECK(n_temporaries(dir) == 4);
    sjk_layer_config lay[NL];
    sjk_cache_params p = make_params(lay);
    sjk_cache *b = NULL;
    CHECK(sjk_cache_create(&p, &b) == SJK_OK);
    if (b) CHECKF(sjk_cache_restore(b, path, g_fp, err, sizeof err) == SJK_OK, "%s", err);
    sjk_cache_free(b);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    sjk_cache_free(a);
}

int main(void)
{
    RUN(test_cache_file_roundtrip_bit_identical);
    RUN(test_cache_file_refuses_other_model_config_version);
    RUN(test_cache_file_1000_bit_flips_all_detected);
    RUN(test_cache_file_truncated_anywhere);
    RUN(test_cache_file_forged_state_refused);
    RUN(test_cache_file_nonfinite_row_refused);
    RUN(test_cache_file_crash_mid_write_keeps_previous);
    RUN(test_cache_file_stale_temporaries_swept_after_kill);
    return test_summary();
}
