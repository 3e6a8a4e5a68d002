/* redis_proc.h — real redis-server processes for the prefix-store tests, on free
 * loopback ports, each in its own temporary directory, stopped (SIGTERM, then SIGKILL)
 * by redis_proc_stop. Only libc: any test may link it. */
#ifndef SJK_TEST_REDIS_PROC_H
#define SJK_TEST_REDIS_PROC_H

#include <sys/types.h>

typedef struct redis_proc {
    pid_t pid;
    int port;
    char dir[64];
} redis_proc;

/* 1 if redis-server is on PATH. */
int redis_available(void);
/* Starts redis-server on a free 127.0.0.1 port with no persistence plus the extra
 * arguments (NULL-terminated list, may be NULL), and waits until it answers PING (5 s).
 * 1 on success. */
int redis_proc_start(redis_proc *r, const char *const *extra);
void redis_proc_stop(redis_proc *r);
/* Sends one inline command and reads the first reply line into buf (NUL-terminated). */
int redis_proc_inline(int port, const char *cmd, char *buf, size_t cap);

#endif
