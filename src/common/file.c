/* file.c — see file.h. */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sjk_file_open_regular(const char *path, uint64_t *nbytes)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -2;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (nbytes) *nbytes = (uint64_t)sb.st_size;
    return fd;
}

const char *sjk_file_target_problem(const char *path)
{
    if (!path || !*path) return "empty path";
    size_t n = strlen(path);
    if (n >= PATH_MAX - 16) return "path too long";
    if (path[n - 1] == '/') return "is a directory";
    const char *slash = strrchr(path, '/');
    if (strlen(slash ? slash + 1 : path) > NAME_MAX) return "file name too long";
    struct stat sb;
    if (stat(path, &sb) != 0) return NULL; /* missing (or unreadable: the save says why) */
    if (S_ISDIR(sb.st_mode)) return "is a directory";
    if (!S_ISREG(sb.st_mode)) return "is not a regular file (a device, FIFO or socket): refusing to replace it";
    return NULL;
}

int sjk_file_fsync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == path) strcpy(dir, "/");
    else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) { errno = ENAMETOOLONG; return -1; }
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

