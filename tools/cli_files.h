/* cli_files.h — how the sjkvarn commands write files: every file a command writes (eval's
 * CSV, JSON-free outputs and SVG plots, train-codebook's table) goes through
 * sjk_cli_write_set, the same atomic path as the library's cache and session files
 * (src/common/tmpfile.h): each file is written to PATH.tmp-XXXXXX beside its target,
 * flushed and fsynced, and only when every file of the set is complete are they renamed
 * over their targets (then the directories are fsynced and stale temporaries swept). A
 * full disk, a read-only directory or any write error leaves every previous file of the
 * set as it was and removes the temporaries. A target that exists and is not a regular
 * file (a device node, FIFO, socket or directory) is refused before anything is written.
 * The renames of a set are separate system calls: a crash between two of them can leave
 * an older and a newer file side by side, each whole. */
#ifndef SJK_CLI_FILES_H
#define SJK_CLI_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sjk_cli_out {
    const char *path;
    int (*write)(void *ctx, FILE *f); /* writes the whole file; 0 on success */
    void *ctx;
} sjk_cli_out;

/* Writes the n files of outs as one set (above). Returns 1, or prints why and returns 0
 * with nothing changed. At most 16 files. */
int sjk_cli_write_set(const char *prog, const sjk_cli_out *outs, size_t n);

/* Before long work: 1 if a later sjk_cli_write_set (or session save) of path can start
 * (the target is missing or a regular file, the directory exists and is writable, the
 * name fits), else prints "PROG: FLAG PATH: why" and returns 0. */
int sjk_cli_check_target(const char *prog, const char *flag, const char *path);

/* Reads a whole file (a regular file or a pipe) into a NUL-terminated buffer; *n = its
 * length. A file holding a NUL byte is refused (the prompt would end there), as is a
 * path that is a directory. Prints why and returns NULL on failure. */
char *sjk_cli_read_text(const char *prog, const char *path, size_t *n);

/* The one way the commands tokenize (run, bench run): into a buffer that starts at the
 * typical size and grows to the count sjkh_tokenizer_encode reports on SJK_ERR_BUFFER, so
 * no vocabulary's ratio of tokens to bytes can refuse a valid text. Returns the ids
 * (free()) with *n_ids, or prints "PROG: cannot tokenize WHAT: reason" and returns NULL. */
struct sjkh_tokenizer;
int32_t *sjk_cli_tokenize(const char *prog, const char *what, const struct sjkh_tokenizer *tok, const char *text,
                          size_t n, unsigned flags, size_t *n_ids);

#endif
