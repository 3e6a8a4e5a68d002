/* gguf_writer.c — see gguf_writer.h. */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>

void gw_bytes(gw_buf *w, const void *src, size_t n)
{
    if (w->n + n > w->cap) {
        size_t nc = (w->n + n) * 2 + 1024;
        uint8_t *p = realloc(w->p, nc);
        if (!p) {
            fprintf(stderr, "gguf_writer: out of memory growing to %zu bytes\n", nc);
            abort();
        }
        w->p = p;
        w->cap = nc;
    }
    memcpy(w->p + w->n, src, n);
    w->n += n;
}
