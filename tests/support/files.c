/* files.c — see files.h. */
#include "files.h"

#include <stdio.h>
#include <stdlib.h>

char *test_read_file(const char *path, size_t *n)
{
    if (n) *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    while (b) {
        len += fread(b + len, 1, cap - len - 1, f);
        if (len + 1 < cap) break; /* short read: end of file or an error */
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
        } else {
            b = nb;
            cap *= 2;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        return NULL;
    }
    b[len] = 0;
    if (n) *n = len;
    return b;
}
