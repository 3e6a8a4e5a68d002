/* cli_files.c — see cli_files.h. */
#include "cli_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"
#include "common/tmpfile.h"
#include "sjkhost.h"

#define SET_MAX 16
#define SJK_CLI_TEXT_MAX (256 << 20) /* bytes: more than the largest context holds */

int sjk_cli_write_set(const char *prog, const sjk_cli_out *outs, size_t n)
{
    if (n > SET_MAX) {
        fprintf(stderr, "%s: at most %d files at once\n", prog, SET_MAX);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char *why = sjk_file_target_problem(outs[i].path);
        if (why) {
            fprintf(stderr, "%s: %s: %s (nothing written)\n", prog, outs[i].path, why);
            return 0;
        }
    }
    static const char nothing[] = "nothing written; the previous files are as they were";
    char tmp[SET_MAX][PATH_MAX];
    FILE *f[SET_MAX] = {0};
    size_t made = 0;
    int ok = 1;
    for (; made < n && ok; made++) {
        const char *path = outs[made].path;
        int fd = sjk_tmp_create(path, tmp[made], sizeof tmp[made]); /* locked until closed */
        if (fd < 0) {
            fprintf(stderr, "%s: %s: cannot create a temporary file: %s (%s)\n", prog, path, strerror(errno), nothing);
            ok = 0;
            break;
        }
        if (!(f[made] = fdopen(fd, "w"))) {
            int e = errno;
            close(fd);
            unlink(tmp[made]);
            fprintf(stderr, "%s: %s: %s (%s)\n", prog, path, strerror(e), nothing);
            ok = 0;
            break;
        }
        errno = 0;
        int wr = outs[made].write(outs[made].ctx, f[made]);
        int fl = fflush(f[made]);
        if (wr != 0 || fl != 0 || ferror(f[made]) || fsync(fileno(f[made])) != 0) {
            int e = errno;
            fprintf(stderr, "%s: %s: write failed%s%s (%s)\n", prog, path, e ? ": " : "", e ? strerror(e) : "",
                    nothing);
            ok = 0;
            made++;
            break;
        }
    }
    for (size_t i = 0; ok && i < n; i++)
        if (rename(tmp[i], outs[i].path) != 0) {
            fprintf(stderr, "%s: %s: rename failed: %s%s\n", prog, outs[i].path, strerror(errno),
                    i ? " (the files before it in the set were replaced)" : " (nothing replaced)");
            ok = 0;
        } else {
            tmp[i][0] = 0;
        }
    for (size_t i = 0; i < made; i++) {
        if (tmp[i][0]) unlink(tmp[i]);
        if (f[i]) fclose(f[i]);
    }
    if (!ok) return 0;
    for (size_t i = 0; i < n; i++) {
        (void)sjk_file_fsync_dir_of(outs[i].path); /* best effort: the files are written */
        sjk_tmp_sweep(outs[i].path);
    }
    return 1;
}

int sjk_cli_check_target(const char *prog, const char *flag, const char *path)
{
    const char *why = sjk_file_target_problem(path);
    if (why) {
        fprintf(stderr, "%s: %s %s: %s\n", prog, flag, path, why);
        return 0;
    }
    if (sjk_tmp_probe(path) != 0) {
        fprintf(stderr, "%s: %s %s: cannot write there: %s\n", prog, flag, path, strerror(errno));
        return 0;
    }
    return 1;
}

char *sjk_cli_read_text(const char *prog, const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        fprintf(stderr, "%s: %s: is a directory\n", prog, path);
        return NULL;
    }
    /* The NUL check runs as the text arrives, and the text has a size cap, so an endless
     * source (-f /dev/zero, a pipe from `yes`) is refused, not read until memory runs out. */
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    const char *why = NULL;
    size_t nul_at = 0;
    while (buf) {
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        const char *nul = memchr(buf + len, 0, r);
        if (nul) {
            nul_at = (size_t)(nul - buf);
            why = "nul";
            break;
        }
        len += r;
        if (len + 1 < cap) break;
        if (cap >= SJK_CLI_TEXT_MAX) {
            why = "big";
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int rerr = !why && ferror(f);
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory reading %s\n", prog, path);
        return NULL;
    }
    if (why || rerr) {
        if (rerr) fprintf(stderr, "%s: %s: read error\n", prog, path);
        else if (why[0] == 'n')
            fprintf(stderr, "%s: %s holds a NUL byte at offset %zu; a prompt is text (refusing rather than cutting it "
                    "there)\n", prog, path, nul_at);
        else fprintf(stderr, "%s: %s: more than %d MiB: not a prompt\n", prog, path, SJK_CLI_TEXT_MAX >> 20);
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

int32_t *sjk_cli_tokenize(const char *prog, const char *what, const sjkh_tokenizer *tok, const char *text,
                          size_t n, unsigned flags, size_t *n_ids)
{
    size_t cap = n / 2 + 16;
    for (int attempt = 0; attempt < 3; attempt++) {
        int32_t *ids = cap <= SIZE_MAX / sizeof *ids ? malloc(cap * sizeof *ids) : NULL;
        if (!ids) {
            fprintf(stderr, "%s: cannot tokenize %s: out of memory\n", prog, what);
            return NULL;
        }
        size_t got = 0;
        sjk_status st = sjkh_tokenizer_encode(tok, text, n, flags, ids, cap, &got);
        if (st == SJK_OK) {
            *n_ids = got;
            return ids;
        }
        free(ids);
        if (st != SJK_ERR_BUFFER || got <= cap) {
            fprintf(stderr, "%s: cannot tokenize %s (%s)\n", prog, what, sjk_status_str(st));
            return NULL;
        }
        cap = got; /* the exact count: the second call fits */
    }
    fprintf(stderr, "%s: cannot tokenize %s (the count kept changing)\n", prog, what);
    return NULL;
}
