/* gguf_writer.h — a growing byte buffer for tests that build GGUF files in memory
 * (little-endian host assumed, as everywhere in these tests). Out of memory aborts: a test
 * cannot go on without its input. */
#ifndef SJK_TEST_GGUF_WRITER_H
#define SJK_TEST_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct gw_buf {
    uint8_t *p;    /* [cap] bytes, n written; free() when done */
    size_t n, cap;
    uint64_t n_kv; /* for writers that patch the key count in at the end */
} gw_buf;

void gw_bytes(gw_buf *w, const void *src, size_t n);
static inline void gw_u32(gw_buf *w, uint32_t v) { gw_bytes(w, &v, 4); }
static inline void gw_u64(gw_buf *w, uint64_t v) { gw_bytes(w, &v, 8); }
static inline void gw_f32(gw_buf *w, float v) { gw_bytes(w, &v, 4); }
/* A GGUF string: u64 length, then the bytes (no terminator). */
static inline void gw_str(gw_buf *w, const char *s)
{
    gw_u64(w, strlen(s));
    gw_bytes(w, s, strlen(s));
}

/* GGUF metadata value types used by the test writers (GGUF v3: uint32 4, float32 6,
 * string 8). Each key-value writer below also counts the pair in n_kv. */
enum { GW_UINT32 = 4, GW_FLOAT32 = 6, GW_STRING = 8 };
static inline void gw_kv_u32(gw_buf *w, const char *key, uint32_t v)
{
    gw_str(w, key);
    gw_u32(w, GW_UINT32);
    gw_u32(w, v);
    w->n_kv++;
}
static inline void gw_kv_f32(gw_buf *w, const char *key, float v)
{
    gw_str(w, key);
    gw_u32(w, GW_FLOAT32);
    gw_f32(w, v);
    w->n_kv++;
}
static inline void gw_kv_str(gw_buf *w, const char *key, const char *v)
{
    gw_str(w, key);
    gw_u32(w, GW_STRING);
    gw_str(w, v);
    w->n_kv++;
}

#endif
