/* tmpfile.c — see tmpfile.h. */
#include "common/tmpfile.h"

#include "common/crc32c.h"
#include "common/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary's stem in the directory of path: the base name itself, or, when
 * base + ".tmp-XXXXXX" would exceed NAME_MAX, its first bytes + "~" + 8 hex digits of the
 * CRC-32C of the whole base name (so two long names that share a prefix differ). The
 * sweep matches the same stem, so long names are swept too. */
#define TMP_SUFFIX_LEN 11 /* ".tmp-XXXXXX" */
static void tmp_stem(const char *base, char *stem /* NAME_MAX + 1 */)
{
    size_t n = strlen(base);
    if (n + TMP_SUFFIX_LEN <= NAME_MAX) {
        memcpy(stem, base, n + 1);
        return;
    }
    size_t keep = NAME_MAX - TMP_SUFFIX_LEN - 9;
    memcpy(stem, base, keep);
    snprintf(stem + keep, 10, "~%08x", (unsigned)sjk_crc32c(0, base, n));
}

int sjk_tmp_create(const char *path, char *tmp, size_t tmp_cap)
{
    if (sjk_file_target_problem(path)) {
        const char *why = sjk_file_target_problem(path);
        errno = strstr(why, "too long") ? ENAMETOOLONG : strstr(why, "directory") ? EISDIR : EINVAL;
        return -1;
    }
    const char *slash = strrchr(path, '/');
    char stem[NAME_MAX + 1];
    tmp_stem(slash ? slash + 1 : path, stem);
    for (int attempt = 0; attempt < 16; attempt++) {
        if ((size_t)snprintf(tmp, tmp_cap, "%.*s%s.tmp-XXXXXX", slash ? (int)(slash + 1 - path) : 0, path, stem) >=
            tmp_cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) return -1;
        int r;
        while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {}
        /* No flock on this file system: the file is unprotected, but then no sweep can
         * lock (and so remove) it either. */
        if (r != 0) return fd;
        struct stat sb;
        if (fstat(fd, &sb) == 0 && sb.st_nlink > 0) return fd;
        close(fd); /* swept before we locked it: make another */
    }
    errno = EEXIST;
    return -1;
}

int sjk_tmp_probe(const char *path)
{
    char tmp[PATH_MAX];
    int fd = sjk_tmp_create(path, tmp, sizeof tmp);
    if (fd < 0) return -1;
    unlink(tmp);
    close(fd);
    return 0;
}

/* 1 if name is base + ".tmp-" + six [A-Za-z0-9]. */
static int is_tmp_of(const char *name, const char *base, size_t base_len)
{
    if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp-", 5) != 0) return 0;
    const char *x = name + base_len + 5;
    for (int i = 0; i < 6; i++) {
        char ch = x[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))) return 0;
    }
    return x[6] == 0;
}

int sjk_tmp_sweep(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash) strcpy(dir, ".");
    else if (slash == path) strcpy(dir, "/");
    else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) return 0;
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    if (!*base) return 0;
    char stem[NAME_MAX + 1];
    tmp_stem(base, stem);
    size_t base_len = strlen(stem);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 0;
    int removed = 0;
    /* linux_dirent64 records: u64 ino, s64 off, u16 reclen, u8 type, name[] */
    _Alignas(8) char buf[8192];
    for (;;) {
        ssize_t got = getdents64(dfd, buf, sizeof buf);
        if (got <= 0) break;
        for (ssize_t off = 0; off < got;) {
            const struct dirent64 *d = (const struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (!is_tmp_of(d->d_name, stem, base_len)) continue;
            int fd = openat(dfd, d->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
            if (fd < 0) continue;
            struct stat sb;
            /* holding the lock while unlinking: a writer that locks after us sees nlink 0 */
            struct stat now;
            if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
                fstatat(dfd, d->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == sb.st_ino &&
                now.st_dev == sb.st_dev && unlinkat(dfd, d->d_name, 0) == 0)
                removed++;
            close(fd);
        }
    }
    close(dfd);
    return removed;
}
