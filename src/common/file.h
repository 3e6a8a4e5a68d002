/* file.h — opening files the library reads and checking the targets of atomic saves.
 *
 * Files that are mapped or read with pread (models, cache and session files) must be
 * regular files. Opening a FIFO for reading blocks until a writer appears, so a FIFO
 * passed where a file belongs would hang the caller before any fstat could refuse it:
 * sjk_file_open_regular opens with O_NONBLOCK, checks, and only then clears it.
 *
 * An atomic save renames a temporary file over its target. rename(2) replaces whatever
 * the target name is, so a save to /dev/null (or to a FIFO or socket) would replace the
 * node with a regular file: sjk_file_target_problem refuses every target that exists
 * and is not a regular file (after following symbolic links). */
#ifndef SJK_COMMON_FILE_H
#define SJK_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Opens path read-only (O_CLOEXEC) if it is a regular file; *nbytes (may be NULL)
 * receives its size. Returns the descriptor (blocking), -1 with errno set when the OS
 * refuses, or -2 when path exists but is not a regular file (errno EINVAL). Never blocks
 * on a FIFO. */
int sjk_file_open_regular(const char *path, uint64_t *nbytes);

/* NULL if path may be the target of an atomic save (it does not exist, or it is a
 * regular file), else why not, as a phrase for "PATH: <phrase>": "is a directory",
 * "is not a regular file (a device, FIFO or socket): refusing to replace it",
 * "file name too long", "path too long". */
const char *sjk_file_target_problem(const char *path);

/* fsyncs the directory that holds path (".", "/" or the part before the last '/'), so
 * that a rename into it is on disk. 0, or -1 with errno set. */
int sjk_file_fsync_dir_of(const char *path);

#endif
