/* test_reliability_inputs.c — what a hostile or unlucky user did to the commands and the
 * libraries (issue 21), each test named after what it prevents:
 *
 *   save targets that are device nodes, FIFOs, sockets or directories; long file names;
 *   a set of output files that fails half-way; FIFOs where a file belongs; a session
 *   file refused after it had overwritten the live session; non-finite values in a
 *   session's host rows; a vocabulary whose prompt needs more than 2 ids per byte;
 *   lax numbers and configuration strings; a --llama-cpp path pasted into a shell; a
 *   prompt file with a NUL byte; --save errors reported only after the generation.
 *
 * The library and CLI helpers are called directly; the commands are run as
 * $BUILD/sjkvarn (tests/run_tests.sh sets BUILD). The session and CLI parts need
 * SmolLM2-135M and Gemma 3 270M (scripts/fetch-model): without them those parts SKIP. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_files.h"
#include "cli_parse.h"
#include "common/crc32c.h"
#include "common/file.h"
#include "common/tmpfile.h"
#include "harness.h"
#include "support/session.h"
#include "support/files.h"
#include "sjkeval.h"
#include "sjkhost.h"
#include "sjkplan.h"
#include "sjkvarn.h"
#include "support/models.h"

static char g_dir[256], g_cli[1024];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/sjk_rel_inputs_%d", (int)getpid());
    mkdir(g_dir, 0700);
    const char *b = getenv("BUILD");
    snprintf(g_cli, sizeof g_cli, "%s/sjkvarn", b && *b ? b : "build");
}

static const char *in_dir(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", g_dir, name);
    return p;
}

#define SMOL "SmolLM2-135M-Instruct.Q4_1.gguf"
#define GEMMA "gemma-3-270m-q4_k_m.gguf"

/* Runs `sjkvarn ARGS` with stdout to out, stderr to err (files in g_dir); exit status. */
static int cli(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s >%s/out 2>%s/err </dev/null", g_cli, args, g_dir, g_dir);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static int file_has(const char *name, const char *needle)
{
    char *s = test_read_file(in_dir(name), NULL);
    int r = s && strstr(s, needle) != NULL;
    if (!r) fprintf(stderr, "  (%s does not contain '%s': %s)\n", name, needle, s ? s : "(unreadable)");
    free(s);
    return r;
}

static int write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* Temporaries PATH.tmp-* (or any "*.tmp-*") left in g_dir. */
static int n_temporaries(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '\\.tmp-'", g_dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

static sjk_cache *small_cache(void)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = 1;
    p.n_kv_heads = 1;
    p.n_q_heads = 1;
    p.head_dim = 64;
    p.max_pos = 64;
    p.max_q_rows = 4;
    p.n_threads = 1;
    if (sjk_cache_config_parse("q8_0", 1, &p.layer, NULL, 0) != SJK_OK) return NULL;
    sjk_cache *c = NULL;
    if (sjk_cache_create(&p, &c) != SJK_OK) return NULL;
    float row[64];
    for (int i = 0; i < 64; i++) row[i] = (float)i / 64.0f;
    for (int i = 0; i < 5; i++) sjk_cache_append(c, 0, 0, row, row, 1);
    return c;
}

/* ---- save targets ------------------------------------------------------------------- */

/* Issue 21 item 2: `--save /dev/null` (as root) replaced the system's /dev/null with a
 * regular file, as rename(2) replaces any name. Every atomic save refuses a target that
 * exists and is not a regular file, and leaves it as it was. (The test makes its own
 * FIFO, socket and, as root, character device; it never touches /dev.) */
TEST(test_save_refuses_device_node_fifo_socket_and_directory)
{
    const char *fifo = in_dir("fifo"), *sock = in_dir("sock"), *chr = in_dir("chr"), *dir = in_dir("adir");
    unlink(fifo), unlink(sock), unlink(chr), rmdir(dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(mkdir(dir, 0700) == 0);
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {0};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    CHECK(sfd >= 0 && bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    int have_chr = mknod(chr, S_IFCHR | 0600, makedev(1, 3)) == 0; /* /dev/null's numbers, as root */
    if (!have_chr) SKIP_PART("cannot mknod a character device here (not root): FIFO, socket, directory checked");
    const char *targets[] = {fifo, sock, dir, have_chr ? chr : fifo};
    const mode_t kinds[] = {S_IFIFO, S_IFSOCK, S_IFDIR, have_chr ? S_IFCHR : S_IFIFO};
    sjk_cache *c = small_cache();
    CHECK(c != NULL);
    for (size_t i = 0; i < 4 && c; i++) {
        char err[512] = "";
        CHECKF(sjk_cache_save(c, targets[i], NULL, err, sizeof err) == SJK_ERR_PARAM, "%s: %s", targets[i], err);
        CHECKF(strstr(err, "not a regular file") || strstr(err, "directory"), "%s", err);
        CHECK(sjkh_session_save_check(targets[i], err, sizeof err) == SJK_ERR_PARAM);
        CHECK(sjk_file_target_problem(targets[i]) != NULL);
        struct stat sb;
        CHECKF(lstat(targets[i], &sb) == 0 && (sb.st_mode & S_IFMT) == kinds[i], "%s was replaced", targets[i]);
    }
    CHECK(n_temporaries() == 0);
    /* a regular file and a missing path are fine */
    if (c) {
        CHECK(sjk_cache_save(c, in_dir("cache.bin"), NULL, NULL, 0) == SJK_OK);
        CHECK(sjk_file_target_problem(in_dir("cache.bin")) == NULL);
        CHECK(sjk_file_target_problem(in_dir("missing")) == NULL);
    }
    sjk_cache_free(c);
    if (sfd >= 0) close(sfd);
    unlink(fifo), unlink(sock), unlink(chr), rmdir(dir), unlink(in_dir("cache.bin"));
}

/* Issue 21 item 10: a legal 250-byte file name failed with an empty message, because
 * name + ".tmp-XXXXXX" exceeded NAME_MAX. The temporary is then named after a prefix and
 * a hash of the name, saves succeed, and a stale one of those is swept like any other. */
TEST(test_save_long_file_name_succeeds_and_sweeps)
{
    char name[251];
    memset(name, 'n', 250);
    name[250] = 0;
    const char *path = in_dir(name);
    sjk_cache *c = small_cache();
    CHECK(c != NULL);
    if (!c) return;
    char err[512] = "";
    CHECKF(sjk_cache_save(c, path, NULL, err, sizeof err) == SJK_OK, "%s", err);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    /* a writer killed mid-save leaves its temporary: make one and drop its lock */
    char tmp[4096];
    int fd = sjk_tmp_create(path, tmp, sizeof tmp);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    const char *base = strrchr(tmp, '/');
    CHECKF(base && strlen(base + 1) <= 255, "temporary name %zu bytes", base ? strlen(base + 1) : 0);
    CHECK(n_temporaries() == 1);
    CHECKF(sjk_cache_save(c, path, NULL, err, sizeof err) == SJK_OK, "%s", err);
    CHECK(n_temporaries() == 0);
    CHECK(sjkh_session_save_check(path, err, sizeof err) == SJK_OK);
    /* a name too long for the file system says so */
    char huge[300];
    memset(huge, 'h', 299);
    huge[299] = 0;
    err[0] = 0;
    CHECK(sjk_cache_save(c, in_dir(huge), NULL, err, sizeof err) == SJK_ERR_PARAM && strstr(err, "too long"));
    unlink(path);
    sjk_cache_free(c);
}

/* ---- sets of output files ------------------------------------------------------------ */

typedef struct wctx { const char *text; int fail; } wctx;
static int wtext(void *ctx, FILE *f)
{
    const wctx *w = ctx;
    fputs(w->text, f);
    return w->fail ? -1 : 0;
}

/* Issue 21 item 3: `eval --csv` wrote its three files in place, so a full disk lost the
 * previous study and left a new main CSV beside a truncated positions CSV. Every file the
 * tools write goes through one atomic set: a failure anywhere leaves every previous file
 * as it was and no temporary behind. */
TEST(test_output_set_failure_keeps_previous_files)
{
    const char *p[3] = {in_dir("s.csv"), in_dir("s-pairs.csv"), in_dir("s-positions.csv")};
    wctx old[3] = {{"old main\n", 0}, {"old pairs\n", 0}, {"old positions\n", 0}};
    sjk_cli_out outs[3];
    for (int i = 0; i < 3; i++) outs[i] = (sjk_cli_out){p[i], wtext, &old[i]};
    CHECK(sjk_cli_write_set("test", outs, 3) == 1);
    /* the third file fails after the first two were written in full */
    wctx neu[3] = {{"new main\n", 0}, {"new pairs\n", 0}, {"new positi", 1}};
    for (int i = 0; i < 3; i++) outs[i].ctx = &neu[i];
    CHECK(sjk_cli_write_set("test", outs, 3) == 0);
    CHECK(file_has("s.csv", "old main") && file_has("s-pairs.csv", "old pairs") &&
          file_has("s-positions.csv", "old positions"));
    CHECK(n_temporaries() == 0);
    /* a target that is a directory is refused before anything is written */
    mkdir(in_dir("s-pairs.csv.d"), 0700);
    outs[1].path = in_dir("s-pairs.csv.d");
    neu[2].fail = 0;
    CHECK(sjk_cli_write_set("test", outs, 3) == 0);
    CHECK(file_has("s.csv", "old main"));
    rmdir(in_dir("s-pairs.csv.d"));
    /* a real ENOSPC: the writer's stream is the only thing that sees it, through
     * /dev/full standing in for the file system (fflush fails) */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        fputs("x", full);
        CHECK(fflush(full) != 0 && errno == ENOSPC);
        fclose(full);
    } else {
        SKIP_PART("/dev/full missing: ENOSPC not demonstrated");
    }
    outs[1].path = p[1];
    CHECK(sjk_cli_write_set("test", outs, 3) == 1);
    CHECK(file_has("s.csv", "new main") && file_has("s-positions.csv", "new positi"));
    for (int i = 0; i < 3; i++) unlink(p[i]);
}

/* The same with a real full disk: a small tmpfs (root only; SKIP otherwise) holds a
 * study's CSV set and a session file, is filled up, and `eval --csv` and `run --save`
 * over them fail with "No space left on device", leaving both as they were. */
TEST(test_full_disk_keeps_previous_outputs)
{
    const char *mnt = in_dir("smallfs");
    mkdir(mnt, 0700);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=2m tmpfs %s 2>/dev/null", mnt);
    if (system(cmd) != 0) {
        rmdir(mnt);
        SKIP("cannot mount a small tmpfs here (not root, or no mount): ENOSPC not exercised");
    }
    char args[2048], fill[1200], csv[1200], sess[1200];
    snprintf(csv, sizeof csv, "%s/s.csv", mnt);
    snprintf(sess, sizeof sess, "%s/s.sjks", mnt);
    snprintf(fill, sizeof fill, "%s/filler", mnt);
    snprintf(args, sizeof args, "eval --synthetic --kv q8_0 --csv %s", csv);
    CHECK(cli(args) == 0);
    size_t n_before = 0, n_after = 0;
    char *before = test_read_file(csv, &n_before);
    int have_model = access(test_model_path(SMOL), R_OK) == 0;
    char *sbefore = NULL;
    size_t ns_before = 0, ns_after = 0;
    if (have_model) {
        snprintf(args, sizeof args, "run -m smollm2-135m -p 'The history of' -n 2 -c 64 -t 1 --temp 0 --save %s", sess);
        CHECK(cli(args) == 0);
        sbefore = test_read_file(sess, &ns_before);
    } else {
        SKIP_PART("%s missing: run --save on a full disk not exercised", SMOL);
    }
    /* fill it: dd stops at ENOSPC */
    snprintf(cmd, sizeof cmd, "dd if=/dev/zero of=%s bs=4k 2>/dev/null; true", fill);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, "eval --synthetic --kv q8_0,sj:4/4 --csv %s", csv);
    CHECK(cli(args) == 1 && file_has("err", "No space left on device") && file_has("err", "nothing written"));
    char *after = test_read_file(csv, &n_after);
    CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
    if (have_model) {
        snprintf(args, sizeof args, "run -m smollm2-135m -p 'The history of the river and' -n 4 -c 64 -t 1 --temp 0 --save %s",
                 sess);
        CHECK(cli(args) == 1 && file_has("err", "No space left on device"));
        char *safter = test_read_file(sess, &ns_after);
        CHECK(sbefore && safter && ns_before == ns_after && memcmp(sbefore, safter, ns_before) == 0);
        free(safter);
    }
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '\\.tmp-' || true", mnt);
    FILE *p = popen(cmd, "r");
    int n_tmp = -1;
    if (p) {
        if (fscanf(p, "%d", &n_tmp) != 1) n_tmp = -1;
        pclose(p);
    }
    CHECKF(n_tmp == 0, "%d temporaries left on the full disk", n_tmp);
    free(before), free(after), free(sbefore);
    snprintf(cmd, sizeof cmd, "umount %s", mnt);
    CHECK(system(cmd) == 0);
    rmdir(mnt);
}

/* ---- FIFOs where a file belongs ------------------------------------------------------ */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "  test_fifo_inputs_never_hang: a FIFO open blocked for 20 s\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

/* Issue 21 item 6: a FIFO as -m or --load hung forever (opened before the regular-file
 * check). Every file that must be regular is opened without blocking and refused. */
TEST(test_fifo_inputs_never_hang)
{
    const char *fifo = in_dir("ff");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    signal(SIGALRM, on_alarm);
    alarm(20);
    uint64_t n = 0;
    CHECK(sjk_file_open_regular(fifo, &n) == -2);
    char err[512] = "";
    sjkh_gguf *g = NULL;
    CHECK(sjkh_gguf_open(fifo, &g, err, sizeof err) == SJK_ERR_IO && strstr(err, "not a regular file"));
    sjkh_model *m = NULL;
    CHECK(sjkh_model_load(fifo, &m, err, sizeof err) == SJK_ERR_IO && !m);
    sjk_cache *c = small_cache();
    if (c) CHECK(sjk_cache_restore(c, fifo, NULL, err, sizeof err) == SJK_ERR_IO);
    sjk_cache_free(c);
    sjkh_quality_floor *fl = NULL;
    CHECK(sjkh_quality_floor_load(fifo, &fl, err, sizeof err) != SJK_OK && !fl);
    /* eval --merge FILE.csv: a FIFO for the main file */
    const char *paths[] = {fifo};
    sjk_eval_study *st = NULL;
    CHECK(sjk_eval_study_merge_csv(paths, 1, &st, NULL, err, sizeof err) != SJK_OK && !st);
    if (access(test_model_path(SMOL), R_OK) == 0) {
        CHECK(sjkh_model_load(test_model_path(SMOL), &m, err, sizeof err) == SJK_OK);
        sjkh_session_params sp = sjkh_session_params_default();
        sp.n_ctx = 64;
        sjkh_session *s = NULL;
        if (m) CHECK(sjkh_session_create(m, &sp, &s, err, sizeof err) == SJK_OK);
        if (s) CHECK(sjkh_session_load(s, fifo, NULL, err, sizeof err) == SJK_ERR_IO && strstr(err, "regular"));
        sjkh_session_free(s);
        sjkh_model_free(m);
        char args[1200];
        snprintf(args, sizeof args, "run -m %s -p hi -n 1", fifo);
        CHECK(cli(args) != 0 && file_has("err", "not a regular file"));
        snprintf(args, sizeof args, "run -m smollm2-135m -c 64 -t 1 -n 1 --load %s", fifo);
        CHECK(cli(args) != 0 && file_has("err", "not a regular file"));
    } else {
        SKIP_PART("%s missing: the session load and `run` FIFO checks did not run", SMOL);
    }
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    unlink(fifo);
}

/* ---- session files ------------------------------------------------------------------ */

static sjkh_session *mk_session(const sjkh_model *m, const char *kv)
{
    return test_session_new(m, kv, 256, 32, 2);
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24); }

/* Issue 21 item 4: a session file whose cache part is valid but holds another length
 * than its host part (checksums recomputed) was refused only after the cache had been
 * restored, and the live session was reset to 0 positions. Load validates everything
 * first: the refused file leaves the session exactly as it was, and it continues
 * bit-identically. */
TEST(test_load_refused_file_keeps_session)
{
    if (access(test_model_path(SMOL), R_OK)) SKIP("%s missing (scripts/fetch-model)", SMOL);
    char err[512] = "";
    sjkh_model *m = NULL;
    CHECK(sjkh_model_load(test_model_path(SMOL), &m, err, sizeof err) == SJK_OK);
    if (!m) return;
    const uint32_t V = sjkh_model_get_info(m)->n_vocab;
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = 300 + (i * 37) % 5000;
    sjkh_session *a = mk_session(m, "q8_0"), *live = mk_session(m, "q8_0"), *ref = mk_session(m, "q8_0");
    float *la = malloc(V * sizeof *la), *lb = malloc(V * sizeof *lb);
    if (a && live && ref && la && lb) {
        const char *fa = in_dir("a.sjks"), *fb = in_dir("b.sjks"), *forged = in_dir("forged.sjks");
        CHECK(sjkh_session_feed(a, ids, 40, NULL, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_save(a, fa, -1, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_feed(a, ids + 40, 10, NULL, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_save(a, fb, -1, err, sizeof err) == SJK_OK);
        size_t na = 0, nb = 0;
        uint8_t *A = (uint8_t *)test_read_file(fa, &na), *B = (uint8_t *)test_read_file(fb, &nb);
        CHECK(A && B);
        if (A && B) {
            /* A's header and host part (n_past 40), B's cache part (50 positions) */
            uint64_t ha = rd32(A + 40), hb = rd32(B + 40);
            size_t ca = na - 256 - ha, cb = nb - 256 - hb;
            uint8_t *F = malloc(256 + ha + cb);
            memcpy(F, A, 256 + ha);
            memcpy(F + 256 + ha, B + 256 + hb, cb);
            wr32(F + 48, (uint32_t)cb);
            wr32(F + 52, 0);
            wr32(F + 252, sjk_crc32c(0, F, 252));
            CHECK(ca != cb);
            CHECK(write_bytes(forged, F, 256 + ha + cb));
            free(F);
        }
        free(A), free(B);
        CHECK(sjkh_session_feed(live, ids, 30, NULL, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_feed(ref, ids, 30, NULL, 0, err, sizeof err) == SJK_OK);
        sjk_status st = sjkh_session_load(live, forged, NULL, err, sizeof err);
        CHECKF(st == SJK_ERR_CORRUPT && strstr(err, "holds 50 positions"), "%s: %s", sjk_status_str(st), err);
        CHECKF(sjkh_session_n_past(live) == 30, "n_past %u after a refused load", sjkh_session_n_past(live));
        int32_t next = 4242;
        CHECK(sjkh_session_feed(live, &next, 1, la, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_feed(ref, &next, 1, lb, 0, err, sizeof err) == SJK_OK);
        CHECK(memcmp(la, lb, V * sizeof *la) == 0);
        /* a pending token outside the vocabulary is refused too */
        size_t n = 0;
        uint8_t *P = (uint8_t *)test_read_file(fa, &n);
        if (P) {
            wr32(P + 32, V + 5);
            wr32(P + 252, sjk_crc32c(0, P, 252));
            CHECK(write_bytes(forged, P, n));
            CHECK(sjkh_session_load(live, forged, NULL, err, sizeof err) == SJK_ERR_CORRUPT);
            CHECK(sjkh_session_n_past(live) == 31);
            free(P);
        }
        unlink(fa), unlink(fb), unlink(forged);
    }
    free(la), free(lb);
    sjkh_session_free(a), sjkh_session_free(live), sjkh_session_free(ref);
    sjkh_model_free(m);
}

/* Issue 21 item 5: non-finite values in a session file's sliding-window rows were
 * accepted (garbage text followed) while the cache part refused non-finite sink values.
 * Every restored value is checked the same way: fp16 rows and q8_0 block scales. */
TEST(test_load_refuses_nonfinite_window_rows)
{
    if (access(test_model_path(GEMMA), R_OK)) SKIP("%s missing (scripts/fetch-model)", GEMMA);
    char err[512] = "";
    sjkh_model *m = NULL;
    CHECK(sjkh_model_load(test_model_path(GEMMA), &m, err, sizeof err) == SJK_OK);
    if (!m) return;
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = 1000 + i * 91;
    static const uint32_t wtypes[] = {SJKH_WINDOW_F16, SJKH_WINDOW_Q8_0};
    for (int w = 0; w < 2; w++) {
        sjkh_session_params p = sjkh_session_params_default();
        p.n_ctx = 128;
        p.n_batch = 16;
        p.n_threads = 2;
        p.kv = "f16";
        p.window_type = wtypes[w];
        sjkh_session *a = NULL, *b = NULL;
        CHECK(sjkh_session_create(m, &p, &a, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_create(m, &p, &b, err, sizeof err) == SJK_OK);
        if (!a || !b) {
            sjkh_session_free(a), sjkh_session_free(b);
            continue;
        }
        const char *f = in_dir("w.sjks");
        CHECK(sjkh_session_feed(a, ids, 20, NULL, 0, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_save(a, f, -1, err, sizeof err) == SJK_OK);
        CHECK(sjkh_session_feed(b, ids, 5, NULL, 0, err, sizeof err) == SJK_OK);
        size_t n = 0;
        uint8_t *S = (uint8_t *)test_read_file(f, &n);
        CHECK(S != NULL);
        if (S) {
            uint64_t h = rd32(S + 40);
            CHECK(h > 8);
            /* the first host layer's first K value (f16) or first block scale (q8_0):
             * fp16 NaN, then the host section's CRC recomputed */
            uint8_t *v = S + 256 + 4;
            v[0] = 0x00, v[1] = 0x7E;
            wr32(S + 256 + h - 4, sjk_crc32c(0, S + 256, h - 4));
            CHECK(write_bytes(f, S, n));
            sjk_status st = sjkh_session_load(b, f, NULL, err, sizeof err);
            CHECKF(st == SJK_ERR_CORRUPT && strstr(err, "non-finite"), "window %s: %s (%s)",
                   sjkh_window_type_name(wtypes[w]), sjk_status_str(st), err);
            CHECK(sjkh_session_n_past(b) == 5);
            free(S);
        }
        unlink(f);
        sjkh_session_free(a), sjkh_session_free(b);
    }
    sjkh_model_free(m);
}

/* ---- tokenizing ------------------------------------------------------------------- */

/* Issue 21 item 8: `run` sized the prompt's ids as 2 x bytes + 2 and never retried, so a
 * SentencePiece vocabulary without "▁" (each space: 3 byte-fallback ids) refused a valid
 * prompt. The one tokenize helper grows to the count the tokenizer reports. */
TEST(test_tokenize_grows_past_two_ids_per_byte)
{
    static char names[256][8];
    const char *toks[259];
    size_t lens[259];
    int32_t types[259];
    toks[0] = "<unk>", toks[1] = "<s>", toks[2] = "</s>";
    types[0] = SJKH_TOKEN_UNKNOWN, types[1] = types[2] = SJKH_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(names[b], sizeof names[b], "<0x%02X>", b);
        toks[3 + b] = names[b];
        types[3 + b] = SJKH_TOKEN_BYTE;
    }
    for (int i = 0; i < 259; i++) lens[i] = strlen(toks[i]);
    sjkh_tokenizer_desc d;
    sjkh_tokenizer_desc_default(&d);
    d.kind = SJKH_TOKENIZER_SPM;
    d.n_tokens = 259;
    d.tokens = toks;
    d.token_nbytes = lens;
    d.types = types;
    d.unk_id = 0, d.bos_id = 1, d.eos_id = 2;
    d.add_bos = 1;
    d.add_space_prefix = 1;
    sjkh_tokenizer *t = NULL;
    char err[256];
    CHECKF(sjkh_tokenizer_create(&d, &t, err, sizeof err) == SJK_OK, "%s", err);
    if (!t) return;
    const char text[] = "a b c d e f g h";
    size_t n = strlen(text), got = 0;
    int32_t small[2 * sizeof text + 2];
    CHECK(sjkh_tokenizer_encode(t, text, n, SJKH_TOKENIZE_ADD_SPECIAL, small, 2 * n + 2, &got) == SJK_ERR_BUFFER);
    CHECKF(got > 2 * n + 2, "%zu ids for %zu bytes", got, n);
    size_t n_ids = 0;
    int32_t *ids = sjk_cli_tokenize("test", "the text", t, text, n, SJKH_TOKENIZE_ADD_SPECIAL, &n_ids);
    CHECK(ids != NULL && n_ids == got && ids[0] == 1);
    free(ids);
    sjkh_tokenizer_free(t);
}

/* ---- strict numbers and configuration strings ----------------------------------------- */

/* Issue 21 item 12: `-n 2.7` meant 2, `--act-quant 0.5` meant 0, `tail= 128` was accepted
 * while `tail=+128` was refused. One strict parser for every number of every command. */
TEST(test_numbers_are_strict)
{
    uint64_t u;
    double d;
    size_t z;
    CHECK(sjk_cli_parse_u64("0", 0, 10, &u) && u == 0);
    CHECK(sjk_cli_parse_u64("18446744073709551615", 0, UINT64_MAX, &u) && u == UINT64_MAX);
    static const char *const bad_ints[] = {"2.7", "0.5", " 1", "1 ", "+1", "-1", "0x10", "1e3", "", "18446744073709551616", "١"};
    for (size_t i = 0; i < sizeof bad_ints / sizeof *bad_ints; i++)
        CHECKF(!sjk_cli_parse_u64(bad_ints[i], 0, UINT64_MAX, &u), "'%s' accepted", bad_ints[i]);
    CHECK(!sjk_cli_parse_u64("11", 0, 10, &u));
    CHECK(sjk_cli_parse_real("0.8", 0, 100, &d) && d == 0.8);
    CHECK(sjk_cli_parse_real(".5", 0, 1, &d) && d == 0.5);
    CHECK(sjk_cli_parse_real("1e-3", 0, 1, &d) && d == 1e-3);
    CHECK(sjk_cli_parse_real("-0.5", -1, 1, &d) && d == -0.5);
    static const char *const bad_reals[] = {"nan", "inf", "-inf", "0x1p3", " 1", "1 ", "+1", "-1", "1e", ".", "", "1e999"};
    for (size_t i = 0; i < sizeof bad_reals / sizeof *bad_reals; i++)
        CHECKF(!sjk_cli_parse_real(bad_reals[i], 0, 1e300, &d), "'%s' accepted", bad_reals[i]);
    CHECK(sjk_cli_parse_size("8GiB", &z) && z == (size_t)8 << 30);
    CHECK(!sjk_cli_parse_size("8 G", &z) && !sjk_cli_parse_size("+8G", &z));
    CHECK(sjk_cli_threads_default() >= 1 && sjk_cli_threads_default() <= SJKH_SESSION_MAX_THREADS);
}

TEST(test_config_strings_are_strict)
{
    static const char *const good[] = {"f16", "q8_0/q4_0", "q4_0:rot", "q4_0:rot=1", "sj:4/4", "sj:3/3t:tail=128",
                                       "sj:4/4:tail_min=128:tail_max=256", "kvarn:4/4:tail=1024", "sj:3/3t:edge=4/4"};
    static const char *const bad[] = {"sj:4/4:",           "sj:4/4::tail=128",    "sj:4/4:tail=128:tail=256",
                                      "sj:4/4:rot",        "kvarn:4/4:rot=1",     "sj:4/4:tail= 128",
                                      "sj:4/4:tail=+128",  "sj:4/4:tail=0x80",    "sj:4/4:tail=128:tail_min=64",
                                      "sj:4/4:sink=128:sink=256", "f16:",         "sj:4/4:tail=-1"};
    sjk_layer_config c[4];
    char err[256];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECKF(sjk_cache_config_parse(good[i], 4, c, err, sizeof err) == SJK_OK, "'%s': %s", good[i], err);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECKF(sjk_cache_config_parse(bad[i], 4, c, err, sizeof err) == SJK_ERR_PARAM && err[0], "'%s' accepted",
               bad[i]);
    }
    /* the same check for every command, with one length limit (plan accepted what run
     * and eval refused) */
    char longest[SJKH_KV_STR_MAX + 2];
    snprintf(longest, sizeof longest, "sj:4/4:tail_min=128:tail_max=256:stage=f16:center=0:sink=0:balance=reference");
    CHECK(sjk_cli_check_kv("test", "--kv", longest, 0) == 1);
    memset(longest, 'x', sizeof longest - 1);
    longest[sizeof longest - 1] = 0;
    CHECK(sjk_cli_check_kv("test", "--kv", longest, 0) == 0);
    CHECK(sjk_cli_check_kv("test", "--kv", "auto", 0) == 0 && sjk_cli_check_kv("test", "--kv", "auto", 1) == 1);
    CHECK(sjk_cli_check_kv("test", "--kv", "host-f16", 0) == 1);
    /* the study's analysis option is split off before the library's parse */
    CHECK(sjk_cli_check_kv("test", "--kv", "sj:4/4:exact=body.k+ring", 0) == 1);
    CHECK(sjk_cli_check_kv("test", "--kv", "sj:4/4:exact=bodyk", 0) == 0);
    CHECK(sjk_cli_check_kv("test", "--kv", "sj:9/4:exact=all", 0) == 0);
}

/* The commands take the same strict parse: flags of run, plan and eval. */
TEST(test_commands_refuse_lax_values_alike)
{
    if (access(g_cli, X_OK)) SKIP("%s not built", g_cli);
    static const struct { const char *args, *msg; } cases[] = {
        {"run -m smollm2-135m -p hi -n 2.7", "-n needs an integer"},
        {"run -m smollm2-135m -p hi --act-quant 0.5", "--act-quant needs an integer"},
        {"run -m smollm2-135m -p hi -t 0", "-t needs an integer in [1, 256]"},
        {"run -m smollm2-135m -p hi -t 257", "-t needs an integer in [1, 256]"},
        {"run -m smollm2-135m -p hi --temp nan", "--temp needs a number"},
        {"run -m smollm2-135m -p hi --kv sj:4/4:rot", "uniform formats"},
        {"plan -m smollm2-135m --kv sj:4/4:tail=128:tail=256", "given twice"},
        {"plan -m smollm2-135m -t 1.5", "-t needs an integer"},
        {"plan -m smollm2-135m --budget '8 G'", "--budget needs a size"},
        {"eval --synthetic --kv f16, -n 2.5", "-n needs an integer"},
        {"eval --synthetic --kv 'sj:4/4:'", "trailing"},
        {"run -m smollm2-135m -p hi --kv auto --mem-budget 1G --kl-floor 0x1", "--kl-floor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = cli(cases[i].args);
        CHECKF(rc == 2 && file_has("err", cases[i].msg), "`%s`: exit %d", cases[i].args, rc);
    }
    /* a --kv string of 100 characters: plan and run agree (both accept it) */
    const char *k100 = "sj:4/4:tail_min=128:tail_max=256:stage=f16:center=0:sink=0:balance=reference:rot_block=64";
    char args[512];
    snprintf(args, sizeof args, "plan -m smollm2-135m --kv %s", k100);
    if (access(test_model_path(SMOL), R_OK) == 0) {
        CHECKF(cli(args) == 0, "%s", args);
    } else {
        SKIP_PART("%s missing: the plan/run agreement on a long --kv did not run", SMOL);
    }
}

/* ---- the commands end to end on a real model --------------------------------------------- */

/* Issue 21 items 10 and 11: every --save error (missing or read-only directory, a
 * directory, a device) was reported only after the whole generation; a prompt file was
 * cut silently at its first NUL byte. Both are refused before the model runs: nothing is
 * printed on stdout. */
TEST(test_save_and_prompt_errors_before_generation)
{
    static const char nul_text[] = "The river\0 and the rest";
    CHECK(write_bytes(in_dir("nul.txt"), nul_text, sizeof nul_text - 1));
    size_t n = 0;
    CHECK(sjk_cli_read_text("test", in_dir("nul.txt"), &n) == NULL);
    char *ok = sjk_cli_read_text("test", "/dev/null", &n);
    CHECK(ok && n == 0);
    free(ok);
    /* an endless source is refused, not read until memory runs out: /dev/zero at its
     * first byte (NUL), an endless pipe at 256 MiB */
    CHECK(sjk_cli_read_text("test", "/dev/zero", &n) == NULL);
    if (access(test_model_path(SMOL), R_OK)) SKIP("%s missing (scripts/fetch-model)", SMOL);
    char args[2048];
    snprintf(args, sizeof args, "run -m smollm2-135m -f %s -n 2 -c 64 -t 1", in_dir("nul.txt"));
    CHECK(cli(args) == 1 && file_has("err", "NUL byte at offset 9"));
    mkdir(in_dir("savedir"), 0700);
    const char *targets[] = {"/nonexistent-dir/s.sjks", in_dir("savedir"), in_dir("fifo2")};
    const char *msgs[] = {"No such file or directory", "is a directory", "not a regular file"};
    unlink(in_dir("fifo2"));
    CHECK(mkfifo(in_dir("fifo2"), 0600) == 0);
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "run -m smollm2-135m -p 'The history of' -n 4 -c 64 -t 1 --save %s", targets[i]);
        int rc = cli(args);
        size_t out_n = 0;
        char *out = test_read_file(in_dir("out"), &out_n);
        CHECKF(rc == 1 && file_has("err", msgs[i]) && out_n == 0, "--save %s: exit %d, %zu bytes on stdout",
               targets[i], rc, out_n);
        free(out);
    }
    rmdir(in_dir("savedir"));
    unlink(in_dir("fifo2"));
    unlink(in_dir("nul.txt"));
    /* and a save that works, with a 250-byte name */
    char name[251];
    memset(name, 's', 250);
    name[250] = 0;
    snprintf(args, sizeof args, "run -m smollm2-135m -p 'The history of' -n 2 -c 64 -t 1 --temp 0 --save %s",
             in_dir(name));
    CHECK(cli(args) == 0 && file_has("err", "saved"));
    unlink(in_dir(name));
}

/* Found in round 2's own search: `run --save F` whose reader went away (`| head`) died of
 * SIGPIPE, and Ctrl-C killed it, both losing the session it was about to save. With
 * --save, SIGINT / SIGTERM / EPIPE stop the generation at the next token and the session
 * is saved (exit 128 + signal, or 1 for EPIPE); the saved file resumes. */
TEST(test_interrupted_run_still_saves)
{
    if (access(test_model_path(SMOL), R_OK)) SKIP("%s missing (scripts/fetch-model)", SMOL);
    const char *f = in_dir("int.sjks");
    char cmd[4096];
    unlink(f);
    snprintf(cmd, sizeof cmd, "(%s run -m smollm2-135m -p 'The history of the river' -n 300 -c 512 -t 1 --temp 0 "
             "--save %s 2>%s/err; echo $? > %s/rc) | head -c 30 > /dev/null", g_cli, f, g_dir, g_dir);
    CHECK(system(cmd) == 0);
    CHECK(file_has("rc", "1") && file_has("err", "stdout closed (EPIPE)") && file_has("err", "saved"));
    char args[1200];
    snprintf(args, sizeof args, "run -m smollm2-135m -n 2 -c 512 -t 1 --temp 0 --load %s", f);
    CHECK(access(f, R_OK) == 0 && cli(args) == 0 && file_has("err", "resumed"));
    /* SIGINT once the prompt is on stdout */
    unlink(f);
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]), close(pfd[1]);
        int e = open(in_dir("err"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (e >= 0) dup2(e, 2);
        execl(g_cli, g_cli, "run", "-m", "smollm2-135m", "-p", "The history of the river", "-n", "400", "-c", "512",
              "-t", "1", "--temp", "0", "--save", f, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[64];
    ssize_t got = read(pfd[0], buf, sizeof buf); /* the prompt: the run has started */
    CHECK(got > 0);
    kill(pid, SIGINT);
    while (read(pfd[0], buf, sizeof buf) > 0) {}
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT, "status %d", status);
    CHECK(file_has("err", "interrupted (SIGINT)") && access(f, R_OK) == 0);
    CHECK(cli(args) == 0 && file_has("err", "resumed"));
    unlink(f);
}

/* Found in round 2's own search: with stdout on a full disk (here /dev/full) `plan`,
 * `eval --json` and `run` exited 0 with their output lost. A failed write to stdout is
 * now said and the exit status is at least 1. */
TEST(test_stdout_write_error_is_not_success)
{
    if (access("/dev/full", W_OK)) SKIP("no /dev/full here");
    if (access(g_cli, X_OK)) SKIP("%s not built", g_cli);
    static const char *const cmds[] = {"eval --synthetic --kv q8_0 --json", "version",
                                       "plan -m smollm2-135m", "run -m smollm2-135m -p 'Hello there' -n 2 -c 64 -t 1"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (i >= 2 && access(test_model_path(SMOL), R_OK)) {
            SKIP_PART("%s missing: `%s` > /dev/full not run", SMOL, cmds[i]);
            continue;
        }
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s %s >/dev/full 2>%s/err", g_cli, cmds[i], g_dir);
        int r = system(cmd);
        CHECKF(WIFEXITED(r) && WEXITSTATUS(r) != 0, "`%s` > /dev/full: exit %d", cmds[i], WEXITSTATUS(r));
        CHECK(file_has("err", "standard output failed") || file_has("err", "writing results"));
    }
}

/* Found in round 2's own search: past a file-size limit (ulimit -f) a save was killed by
 * SIGXFSZ with no message and its temporary left behind. The CLI ignores SIGXFSZ: the
 * write fails with EFBIG, the save says "File too large", removes its temporary and the
 * previous file stays. */
TEST(test_file_size_limit_is_a_clear_error)
{
    if (access(test_model_path(SMOL), R_OK)) SKIP("%s missing (scripts/fetch-model)", SMOL);
    const char *f = in_dir("fsz.sjks");
    CHECK(write_bytes(f, "previous", 8));
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ulimit -f 20 && %s run -m smollm2-135m -p 'The history of the river' -n 2 -c 64 -t 1 "
             "--save %s >/dev/null 2>%s/err", g_cli, f, g_dir);
    int r = system(cmd);
    CHECKF(WIFEXITED(r) && WEXITSTATUS(r) == 1, "status %d", r);
    CHECK(file_has("err", "File too large"));
    CHECK(file_has("fsz.sjks", "previous") && n_temporaries() == 0);
    unlink(f);
}

/* Issue 21 item 1: with more CPUs than the cache's 64 threads, `run` failed by default.
 * The session runs -t threads and its cache min(-t, 64): -t 100 works end to end. */
TEST(test_run_with_more_threads_than_the_cache_takes)
{
    if (access(test_model_path(SMOL), R_OK)) SKIP("%s missing (scripts/fetch-model)", SMOL);
    int rc = cli("run -m smollm2-135m -p 'The history of' -n 2 -c 64 -t 100 --kv sj:4/4 --temp 0");
    CHECKF(rc == 0 && file_has("err", "threads 100"), "exit %d", rc);
}

/* Issue 21 item 7: `bench run --llama-cpp PATH` pasted PATH into a shell command inside
 * single quotes, so a path holding ' broke it and a crafted one ran commands. It is now
 * spawned with an argument vector: a fake interpreter whose path holds a quote and a
 * would-be command receives its six arguments, and nothing else runs. */
TEST(test_bench_llama_path_is_not_a_shell_command)
{
    if (access(test_model_path(SMOL), R_OK)) SKIP("%s missing (scripts/fetch-model)", SMOL);
    if (access("bench/llama_cpp_speed.py", R_OK)) SKIP("run from the repository root (bench/llama_cpp_speed.py)");
    char dir[1024], fake[1200], marker[600], argsf[600];
    snprintf(marker, sizeof marker, "%s/PWNED", g_dir);
    snprintf(argsf, sizeof argsf, "%s/fake-args", g_dir);
    setenv("SJK_PWNED", marker, 1);
    /* pasted into `'PYTHON' 'SCRIPT' ...` this would run: 'DIR/x'; touch "$SJK_PWNED"; echo '/python' ... */
    snprintf(dir, sizeof dir, "%s/x'; touch \"$SJK_PWNED\"; echo '", g_dir);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(fake, sizeof fake, "%s/python", dir);
    FILE *f = fopen(fake, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "#!/bin/sh\necho \"$#\" > '%s'\n"
               "echo '{\"engine\": \"llama.cpp\", \"prefill_s\":0.5, \"decode_s\":0.25, \"peak_rss_kib\":100, "
               "\"settings\": \"fake-interpreter\"}'\n", argsf);
    fclose(f);
    chmod(fake, 0700);
    /* the path reaches the command as one argument through an environment variable */
    setenv("SJK_FAKE_PY", fake, 1);
    char args[512];
    snprintf(args, sizeof args, "bench run -m smollm2-135m --ctx 32 --kv f16 -n 2 -t 1 --json --llama-cpp \"$SJK_FAKE_PY\"");
    int rc = cli(args);
    CHECKF(access(marker, F_OK) != 0, "the path ran a command");
    CHECKF(rc == 0 && file_has("out", "fake-interpreter"), "exit %d", rc);
    CHECK(file_has("fake-args", "6"));
    unlink(fake), unlink(argsf), unlink(marker), rmdir(dir);
}

int main(void)
{
    setup();
    RUN(test_save_refuses_device_node_fifo_socket_and_directory);
    RUN(test_save_long_file_name_succeeds_and_sweeps);
    RUN(test_output_set_failure_keeps_previous_files);
    RUN(test_full_disk_keeps_previous_outputs);
    RUN(test_fifo_inputs_never_hang);
    RUN(test_load_refused_file_keeps_session);
    RUN(test_load_refuses_nonfinite_window_rows);
    RUN(test_tokenize_grows_past_two_ids_per_byte);
    RUN(test_numbers_are_strict);
    RUN(test_config_strings_are_strict);
    RUN(test_commands_refuse_lax_values_alike);
    RUN(test_save_and_prompt_errors_before_generation);
    RUN(test_run_with_more_threads_than_the_cache_takes);
    RUN(test_interrupted_run_still_saves);
    RUN(test_stdout_write_error_is_not_success);
    RUN(test_file_size_limit_is_a_clear_error);
    RUN(test_bench_llama_path_is_not_a_shell_command);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", g_dir);
    return test_summary();
}
