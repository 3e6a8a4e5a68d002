/* files.h — reading a whole file, for the tests (only libc: any test may link it). */
#ifndef SJK_TEST_FILES_H
#define SJK_TEST_FILES_H

#include <stddef.h>

/* The bytes of the file at path in a fresh buffer (the caller frees it) with a 0 byte
 * after them, so a text file is a C string; *n (when n is not NULL) = their number. NULL
 * if the file cannot be opened or read, or memory runs out (then *n is 0). */
char *test_read_file(const char *path, size_t *n);

#endif
