/* tmpfile.h — the temporary files of atomic saves (sjk_cache_save and the host's session
 * files) and the sweep that removes the ones a killed writer left behind.
 *
 *   PATH                 the saved file; replaced only by rename(2)
 *   PATH.tmp-XXXXXX      a save in progress: created by mkostemp beside PATH, flock(LOCK_EX)ed
 *                        by its writer from creation until after the rename
 *
 * A writer killed mid-save (SIGKILL, power loss after a partial write) leaves its
 * PATH.tmp-XXXXXX behind; PATH itself is the previous file, intact. The kernel drops a
 * dead process's flock, so "the lock can be taken" means "the writer is gone": after each
 * successful save of PATH, sjk_tmp_sweep removes every PATH.tmp-XXXXXX it can lock, and
 * leaves alone the ones a live writer (another thread or process saving the same PATH)
 * still holds. A writer whose file is swept between mkostemp and flock notices (link
 * count 0) and makes another. Neither allocates: the directory is read with getdents64
 * into a stack buffer. */
#ifndef SJK_COMMON_TMPFILE_H
#define SJK_COMMON_TMPFILE_H

#include <stddef.h>

/* Creates and locks PATH.tmp-XXXXXX; tmp (tmp_cap bytes) receives its name. Returns the
 * descriptor (O_CLOEXEC, mode 0600), or -1 with errno set: ENAMETOOLONG if the name does
 * not fit, EISDIR / EINVAL for a target that is a directory / not a regular file
 * (common/file.h: sjk_file_target_problem says it in words; call it first for the
 * message). Keep it open until the rename is done: closing it drops the lock.
 * When PATH's base name is so long that base + ".tmp-XXXXXX" would exceed NAME_MAX, the
 * temporary is named after the first bytes of the base name + "~" + 8 hex digits of its
 * CRC-32C instead (and the sweep looks for that name). */
int sjk_tmp_create(const char *path, char *tmp, size_t tmp_cap);

/* Creates a temporary for PATH and removes it at once: 0 if a save of PATH could start
 * now (the directory exists and is writable, the name fits), else -1 with errno. For
 * checking a save target before long work. */
int sjk_tmp_probe(const char *path);

/* Removes the PATH.tmp-XXXXXX files (exactly six [A-Za-z0-9] after "tmp-", regular files)
 * whose writers are gone. Best effort: errors are ignored. Returns the number removed. */
int sjk_tmp_sweep(const char *path);

#endif
