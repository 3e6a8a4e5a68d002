/* redis_proc.c — see redis_proc.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_proc.h"

int redis_available(void)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char buf[4096];
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && n < sizeof buf - 16) {
            snprintf(buf, sizeof buf, "%.*s/redis-server", (int)n, p);
            if (access(buf, X_OK) == 0) return 1;
        }
        p += n + (e ? 1 : 0);
    }
    return 0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int redis_proc_inline(int port, const char *cmd, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char line[1024];
        int n = snprintf(line, sizeof line, "%s\r\n", cmd);
        if (write(fd, line, (size_t)n) == n) {
            size_t got = 0;
            while (got + 1 < cap) {
                ssize_t r = read(fd, buf + got, 1);
                if (r <= 0) break;
                if (buf[got] == '\n') break;
                got++;
            }
            buf[got] = 0;
            if (got && buf[got - 1] == '\r') buf[got - 1] = 0;
            ok = got > 0;
        }
    }
    close(fd);
    return ok;
}

int redis_proc_start(redis_proc *r, const char *const *extra)
{
    memset(r, 0, sizeof *r);
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = free_port();
        if (!port) continue;
        snprintf(r->dir, sizeof r->dir, "/tmp/sjk_redis_XXXXXX");
        if (!mkdtemp(r->dir)) return 0;
        char port_s[16];
        snprintf(port_s, sizeof port_s, "%d", port);
        const char *argv[64] = {"redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", r->dir, "--logfile", "redis.log",
                                "--protected-mode", "no"};
        int n = 15;
        for (int i = 0; extra && extra[i] && n < 62; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        pid_t pid = fork();
        if (pid < 0) return 0;
        if (pid == 0) {
            int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) { dup2(devnull, 1); dup2(devnull, 2); }
            execvp("redis-server", (char *const *)argv);
            _exit(127);
        }
        r->pid = pid;
        r->port = port;
        for (int i = 0; i < 100; i++) {
            char buf[64];
            if (redis_proc_inline(port, "PING", buf, sizeof buf) && !strcmp(buf, "+PONG")) return 1;
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) { r->pid = 0; break; } /* exited: port taken? */
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        redis_proc_stop(r);
    }
    return 0;
}

void redis_proc_stop(redis_proc *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGCONT); /* a test may have stopped it */
        kill(r->pid, SIGTERM);
        int st;
        for (int i = 0; i < 100; i++) {
            if (waitpid(r->pid, &st, WNOHANG) == r->pid) { r->pid = 0; break; }
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (r->pid > 0) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &st, 0);
        }
        r->pid = 0;
    }
    if (r->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
        if (system(cmd)) { /* best effort */ }
        r->dir[0] = 0;
    }
}
