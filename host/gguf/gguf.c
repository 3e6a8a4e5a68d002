/* gguf.c — GGUF v2/v3 reader: mmap the file, validate everything once, then hand out
 * bounds-checked views.
 *
 * The file is untrusted. Open walks it exactly once with a cursor that refuses to step
 * past the end; every count is compared with the bytes that remain before anything is
 * allocated for it (each element needs at least one byte, a string at least eight), so a
 * hostile count cannot make us allocate more than a few times the file size. Every product
 * (dimensions, block counts, byte sizes) and every sum (offsets) is overflow-checked.
 * After open, the handle is immutable: lookups are binary searches over sorted indices
 * built at open time, and all accessors re-check their index arguments.
 *
 * What is rejected (with the offending key/tensor named in the message): bad magic,
 * version other than 2/3, byte-swapped files, empty or duplicate keys, keys longer than
 * 65535 bytes, unknown value types, nested arrays, BOOL values other than 0/1, a
 * general.alignment that is not a non-zero power-of-two u32, tensor names that are empty,
 * >= 64 bytes or duplicated, n_dims outside 1..4, zero or > INT64_MAX dimensions, unknown
 * tensor types, ne[0] not a multiple of the block size, misaligned offsets, data outside
 * the file, and tensors whose data overlap. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hcommon.h"
#include "sjkhost.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as u32 LE */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_KEY 65535u
#define GGUF_MAX_NAME 63u /* ggml keeps 64 bytes including the NUL */

typedef struct gguf_kv {
    char *key;          /* NUL-terminated copy */
    uint32_t type;      /* sjkh_gguf_vtype */
    uint32_t elem_type; /* arrays */
    uint64_t count;     /* arrays: elements; strings: byte length */
    size_t val_off;     /* file offset: scalar value / string bytes / first array element */
    size_t *str_off;    /* string arrays: file offset of each element's u64 length */
} gguf_kv;

struct sjkh_gguf {
    const uint8_t *base;
    size_t size;
    int mapped;         /* 1: munmap on close */
    uint32_t version;
    uint32_t alignment;
    size_t data_start;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t *kv_sorted; /* indices sorted by key */
    int64_t n_tensors;
    sjkh_tensor *tensors;
    int64_t *t_sorted;  /* indices sorted by name */
};

/* ---- cursor ------------------------------------------------------------------------ */

typedef struct cursor {
    const uint8_t *p;
    size_t n, pos;
    char *err;
    size_t cap;
} cursor;

static size_t cur_left(const cursor *c) { return c->n - c->pos; }

static int cur_need(cursor *c, size_t k, const char *what)
{
    if (k <= cur_left(c)) return 1;
    sjkh_fail(0, c->err, c->cap, "gguf: truncated: %s needs %zu bytes at offset %zu, file has %zu",
              what, k, c->pos, c->n);
    return 0;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what)
{
    if (!cur_need(c, 4, what)) return 0;
    *v = sjkh_rd_u32(c->p + c->pos);
    c->pos += 4;
    return 1;
}

static int cur_u64(cursor *c, uint64_t *v, const char *what)
{
    if (!cur_need(c, 8, what)) return 0;
    *v = sjkh_rd_u64(c->p + c->pos);
    c->pos += 8;
    return 1;
}

/* A string: u64 length + bytes. On success *off is the file offset of the bytes. */
static int cur_str(cursor *c, uint64_t *len, size_t *off, const char *what)
{
    if (!cur_u64(c, len, what)) return 0;
    if (*len > cur_left(c)) {
        sjkh_fail(0, c->err, c->cap,
                  "gguf: %s: string length %llu at offset %zu runs past the end of the file (%zu bytes)",
                  what, (unsigned long long)*len, c->pos - 8, c->n);
        return 0;
    }
    *off = c->pos;
    c->pos += (size_t)*len;
    return 1;
}

static size_t vtype_size(uint32_t t)
{
    switch (t) {
    case SJKH_GGUF_UINT8: case SJKH_GGUF_INT8: case SJKH_GGUF_BOOL: return 1;
    case SJKH_GGUF_UINT16: case SJKH_GGUF_INT16: return 2;
    case SJKH_GGUF_UINT32: case SJKH_GGUF_INT32: case SJKH_GGUF_FLOAT32: return 4;
    case SJKH_GGUF_UINT64: case SJKH_GGUF_INT64: case SJKH_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

size_t sjkh_gguf_vtype_nbytes(uint32_t t) { return vtype_size(t); }

static const char *vtype_name(uint32_t t)
{
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < SJKH_ARRAY_LEN(names) ? names[t] : "?";
}

/* ---- sorting helpers (qsort with a context-free comparator over a snapshot) -------- */

typedef struct name_idx {
    const char *name;
    int64_t idx;
} name_idx;

static int cmp_name_idx(const void *a, const void *b)
{
    const name_idx *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Builds out[] = indices sorted by name; returns the index of a duplicate name or -1.
 * -2 on allocation failure. */
static int64_t sort_names(int64_t n, int64_t *out, const char *(*get)(const void *, int64_t),
                          const void *ctx)
{
    name_idx *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp) return -2;
    for (int64_t i = 0; i < n; i++) tmp[i] = (name_idx){get(ctx, i), i};
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_name_idx);
    int64_t dup = -1;
    for (int64_t i = 0; i < n; i++) {
        out[i] = tmp[i].idx;
        if (i && dup < 0 && !strcmp(tmp[i].name, tmp[i - 1].name)) dup = tmp[i].idx;
    }
    free(tmp);
    return dup;
}

static const char *kv_name_get(const void *ctx, int64_t i) { return ((const gguf_kv *)ctx)[i].key; }
static const char *t_name_get(const void *ctx, int64_t i) { return ((const sjkh_tensor *)ctx)[i].name; }

/* ---- parsing ----------------------------------------------------------------------- */

static sjk_status parse_kv(sjkh_gguf *g, cursor *c, int64_t i)
{
    gguf_kv *kv = &g->kv[i];
    uint64_t klen;
    size_t koff;
    char what[96];
    snprintf(what, sizeof what, "key of metadata entry %lld", (long long)i);
    if (!cur_str(c, &klen, &koff, what)) return SJK_ERR_CORRUPT;
    if (klen == 0)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: metadata entry %lld has an empty key",
                         (long long)i);
    if (klen > GGUF_MAX_KEY)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap,
                         "gguf: metadata entry %lld: key length %llu exceeds %u", (long long)i,
                         (unsigned long long)klen, GGUF_MAX_KEY);
    kv->key = malloc((size_t)klen + 1);
    if (!kv->key) return sjkh_fail(SJK_ERR_NOMEM, c->err, c->cap, "gguf: out of memory");
    memcpy(kv->key, c->p + koff, (size_t)klen);
    kv->key[klen] = 0;
    if (strlen(kv->key) != (size_t)klen)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: metadata entry %lld: key contains a NUL byte",
                         (long long)i);

    snprintf(what, sizeof what, "value type of '%.60s'", kv->key);
    if (!cur_u32(c, &kv->type, what)) return SJK_ERR_CORRUPT;
    snprintf(what, sizeof what, "value of '%.60s'", kv->key);

    if (kv->type == SJKH_GGUF_STRING) {
        uint64_t len;
        if (!cur_str(c, &len, &kv->val_off, what)) return SJK_ERR_CORRUPT;
        kv->count = len;
        return SJK_OK;
    }
    if (kv->type == SJKH_GGUF_ARRAY) {
        if (!cur_u32(c, &kv->elem_type, what) || !cur_u64(c, &kv->count, what)) return SJK_ERR_CORRUPT;
        if (kv->elem_type == SJKH_GGUF_ARRAY)
            return sjkh_fail(SJK_ERR_FORMAT, c->err, c->cap, "gguf: '%.60s': nested arrays are not supported",
                             kv->key);
        kv->val_off = c->pos;
        if (kv->elem_type == SJKH_GGUF_STRING) {
            /* each element needs at least its 8-byte length: bound the table by the file */
            if (kv->count > cur_left(c) / 8)
                return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap,
                                 "gguf: '%.60s': %llu strings cannot fit in the %zu bytes left", kv->key,
                                 (unsigned long long)kv->count, cur_left(c));
            kv->str_off = malloc((size_t)(kv->count ? kv->count : 1) * sizeof *kv->str_off);
            if (!kv->str_off) return sjkh_fail(SJK_ERR_NOMEM, c->err, c->cap, "gguf: out of memory");
            for (uint64_t e = 0; e < kv->count; e++) {
                uint64_t len;
                size_t off;
                kv->str_off[e] = c->pos;
                snprintf(what, sizeof what, "'%.60s'[%llu]", kv->key, (unsigned long long)e);
                if (!cur_str(c, &len, &off, what)) return SJK_ERR_CORRUPT;
            }
            return SJK_OK;
        }
        size_t es = vtype_size(kv->elem_type), total;
        if (!es)
            return sjkh_fail(SJK_ERR_FORMAT, c->err, c->cap, "gguf: '%.60s': unknown array element type %u",
                             kv->key, kv->elem_type);
        if (kv->count > SIZE_MAX || !sjkh_mul_ok((size_t)kv->count, es, &total) || total > cur_left(c))
            return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap,
                             "gguf: '%.60s': array of %llu %s elements runs past the end of the file",
                             kv->key, (unsigned long long)kv->count, vtype_name(kv->elem_type));
        if (kv->elem_type == SJKH_GGUF_BOOL)
            for (size_t e = 0; e < total; e++)
                if (c->p[c->pos + e] > 1)
                    return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: '%.60s'[%zu]: bool value %u",
                                     kv->key, e, c->p[c->pos + e]);
        c->pos += total;
        return SJK_OK;
    }
    size_t es = vtype_size(kv->type);
    if (!es)
        return sjkh_fail(SJK_ERR_FORMAT, c->err, c->cap, "gguf: '%.60s': unknown value type %u", kv->key,
                         kv->type);
    if (!cur_need(c, es, what)) return SJK_ERR_CORRUPT;
    kv->val_off = c->pos;
    if (kv->type == SJKH_GGUF_BOOL && c->p[c->pos] > 1)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: '%.60s': bool value %u", kv->key,
                         c->p[c->pos]);
    c->pos += es;
    return SJK_OK;
}

static sjk_status parse_tensor_info(sjkh_gguf *g, cursor *c, int64_t i)
{
    sjkh_tensor *t = &g->tensors[i];
    uint64_t nlen;
    size_t noff;
    char what[96];
    snprintf(what, sizeof what, "name of tensor %lld", (long long)i);
    if (!cur_str(c, &nlen, &noff, what)) return SJK_ERR_CORRUPT;
    if (nlen == 0 || nlen > GGUF_MAX_NAME)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: tensor %lld: name length %llu (must be 1..%u)",
                         (long long)i, (unsigned long long)nlen, GGUF_MAX_NAME);
    char *name = malloc((size_t)nlen + 1);
    if (!name) return sjkh_fail(SJK_ERR_NOMEM, c->err, c->cap, "gguf: out of memory");
    memcpy(name, c->p + noff, (size_t)nlen);
    name[nlen] = 0;
    t->name = name;
    if (strlen(name) != (size_t)nlen)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: tensor %lld: name contains a NUL byte",
                         (long long)i);

    snprintf(what, sizeof what, "dims of tensor '%s'", name);
    if (!cur_u32(c, &t->n_dims, what)) return SJK_ERR_CORRUPT;
    if (t->n_dims < 1 || t->n_dims > 4)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: tensor '%s': n_dims = %u (must be 1..4)", name,
                         t->n_dims);
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (!cur_u64(c, &t->ne[d], what)) return SJK_ERR_CORRUPT;
        if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
            return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: tensor '%s': dimension %u is %llu", name, d,
                             (unsigned long long)t->ne[d]);
    }
    snprintf(what, sizeof what, "type of tensor '%s'", name);
    if (!cur_u32(c, &t->type, what)) return SJK_ERR_CORRUPT;
    const sjkh_type_info *ti = sjkh_type_get(t->type);
    if (!ti)
        return sjkh_fail(SJK_ERR_FORMAT, c->err, c->cap, "gguf: tensor '%s': unknown tensor type %u", name,
                         t->type);
    snprintf(what, sizeof what, "offset of tensor '%s'", name);
    uint64_t off;
    if (!cur_u64(c, &off, what)) return SJK_ERR_CORRUPT;
    t->file_offset = off; /* relative for now; made absolute once data_start is known */

    uint64_t nv = 1;
    for (uint32_t d = 0; d < 4; d++)
        if (!sjkh_mul64_ok(nv, t->ne[d], &nv) || nv > (uint64_t)INT64_MAX)
            return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: tensor '%s': element count overflows",
                             name);
    t->n_values = nv;
    if (t->ne[0] % ti->block_values)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap,
                         "gguf: tensor '%s': row length %llu is not a multiple of the %s block size %u", name,
                         (unsigned long long)t->ne[0], ti->name, ti->block_values);
    uint64_t row = t->ne[0] / ti->block_values, total;
    if (!sjkh_mul64_ok(row, ti->block_nbytes, &row) || row > SIZE_MAX ||
        !sjkh_mul64_ok(row, t->ne[1], &total) || !sjkh_mul64_ok(total, t->ne[2], &total) ||
        !sjkh_mul64_ok(total, t->ne[3], &total) || total > SIZE_MAX)
        return sjkh_fail(SJK_ERR_CORRUPT, c->err, c->cap, "gguf: tensor '%s': byte size overflows", name);
    t->row_nbytes = (size_t)row;
    t->nbytes = (size_t)total;
    return SJK_OK;
}

typedef struct span {
    uint64_t lo, hi;
    int64_t idx;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static sjk_status parse(sjkh_gguf *g, char *err, size_t cap)
{
    cursor c = {g->base, g->size, 0, err, cap};
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;
    if (!cur_u32(&c, &magic, "magic")) return SJK_ERR_FORMAT;
    if (magic != GGUF_MAGIC)
        return sjkh_fail(SJK_ERR_FORMAT, err, cap, "gguf: not a GGUF file (magic %02x %02x %02x %02x)",
                         g->base[0], g->base[1], g->base[2], g->base[3]);
    if (!cur_u32(&c, &version, "version")) return SJK_ERR_FORMAT;
    if ((version & 0xFFFFu) == 0 && version != 0)
        return sjkh_fail(SJK_ERR_FORMAT, err, cap, "gguf: big-endian (byte-swapped) files are not supported");
    if (version != 2 && version != 3)
        return sjkh_fail(SJK_ERR_FORMAT, err, cap, "gguf: version %u is not supported (need 2 or 3)", version);
    g->version = version;
    if (!cur_u64(&c, &n_tensors, "tensor count") || !cur_u64(&c, &n_kv, "metadata count"))
        return SJK_ERR_CORRUPT;
    /* a kv pair needs >= 8+1+4+1 bytes, a tensor info >= 8+1+4+8+4+8 */
    if (n_kv > cur_left(&c) / 14)
        return sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: metadata count %llu cannot fit in a %zu-byte file",
                         (unsigned long long)n_kv, g->size);
    if (n_tensors > cur_left(&c) / 33)
        return sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: tensor count %llu cannot fit in a %zu-byte file",
                         (unsigned long long)n_tensors, g->size);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = calloc((size_t)(n_kv ? n_kv : 1), sizeof *g->kv);
    g->kv_sorted = malloc((size_t)(n_kv ? n_kv : 1) * sizeof *g->kv_sorted);
    g->tensors = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *g->tensors);
    g->t_sorted = malloc((size_t)(n_tensors ? n_tensors : 1) * sizeof *g->t_sorted);
    if (!g->kv || !g->kv_sorted || !g->tensors || !g->t_sorted)
        return sjkh_fail(SJK_ERR_NOMEM, err, cap, "gguf: out of memory");

    for (int64_t i = 0; i < g->n_kv; i++) {
        sjk_status st = parse_kv(g, &c, i);
        if (st) {
            g->n_kv = i + 1; /* free what was allocated so far */
            return st;
        }
    }
    int64_t dup = sort_names(g->n_kv, g->kv_sorted, kv_name_get, g->kv);
    if (dup == -2) return sjkh_fail(SJK_ERR_NOMEM, err, cap, "gguf: out of memory");
    if (dup >= 0) return sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: duplicate key '%.200s'", g->kv[dup].key);

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = sjkh_gguf_find_key(g, "general.alignment");
    if (ai >= 0) {
        const gguf_kv *kv = &g->kv[ai];
        uint32_t a = kv->type == SJKH_GGUF_UINT32 ? sjkh_rd_u32(g->base + kv->val_off) : 0;
        if (kv->type != SJKH_GGUF_UINT32 || !sjkh_is_pow2(a))
            return sjkh_fail(SJK_ERR_CORRUPT, err, cap,
                             "gguf: general.alignment must be a non-zero power-of-two u32 (type %s)",
                             vtype_name(kv->type));
        g->alignment = a;
    }

    for (int64_t i = 0; i < g->n_tensors; i++) {
        sjk_status st = parse_tensor_info(g, &c, i);
        if (st) {
            g->n_tensors = i + 1;
            return st;
        }
    }
    dup = sort_names(g->n_tensors, g->t_sorted, t_name_get, g->tensors);
    if (dup == -2) return sjkh_fail(SJK_ERR_NOMEM, err, cap, "gguf: out of memory");
    if (dup >= 0)
        return sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: duplicate tensor name '%s'", g->tensors[dup].name);

    /* data section: right after the infos, rounded up to the alignment */
    size_t ds;
    if (!sjkh_add_ok(c.pos, g->alignment - 1, &ds))
        return sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: data offset overflows");
    ds &= ~((size_t)g->alignment - 1);
    g->data_start = ds;
    if (g->n_tensors == 0) return SJK_OK;
    if (ds > g->size)
        return sjkh_fail(SJK_ERR_CORRUPT, err, cap,
                         "gguf: truncated: tensor data would start at %zu, file has %zu bytes", ds, g->size);

    span *sp = malloc((size_t)g->n_tensors * sizeof *sp);
    if (!sp) return sjkh_fail(SJK_ERR_NOMEM, err, cap, "gguf: out of memory");
    sjk_status st = SJK_OK;
    for (int64_t i = 0; i < g->n_tensors && !st; i++) {
        sjkh_tensor *t = &g->tensors[i];
        uint64_t rel = t->file_offset, abs, end;
        if (rel % g->alignment)
            st = sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: tensor '%s': offset %llu is not a multiple of %u",
                           t->name, (unsigned long long)rel, g->alignment);
        else if (!sjkh_add64_ok(rel, ds, &abs) || !sjkh_add64_ok(abs, t->nbytes, &end) || end > g->size)
            st = sjkh_fail(SJK_ERR_CORRUPT, err, cap,
                           "gguf: tensor '%s': data [%llu, +%zu) lies outside the %zu-byte file "
                           "(truncated or bad offset)",
                           t->name, (unsigned long long)rel, t->nbytes, g->size - ds);
        else {
            t->file_offset = abs;
            t->data = g->base + abs;
            sp[i] = (span){abs, end, i};
        }
    }
    if (!st) {
        qsort(sp, (size_t)g->n_tensors, sizeof *sp, cmp_span);
        for (int64_t i = 1; i < g->n_tensors && !st; i++)
            if (sp[i].lo < sp[i - 1].hi)
                st = sjkh_fail(SJK_ERR_CORRUPT, err, cap, "gguf: tensors '%s' and '%s' overlap",
                               g->tensors[sp[i - 1].idx].name, g->tensors[sp[i].idx].name);
    }
    free(sp);
    return st;
}

static sjk_status open_common(sjkh_gguf *g, sjkh_gguf **out, char *err, size_t err_cap)
{
    sjk_status st = parse(g, err, err_cap);
    if (st) {
        sjkh_gguf_close(g);
        return st;
    }
    *out = g;
    return SJK_OK;
}

sjk_status sjkh_gguf_open_memory(const void *data, size_t nbytes, sjkh_gguf **out, char *err, size_t err_cap)
{
    if (!out || (!data && nbytes)) return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "gguf: bad arguments");
    *out = NULL;
    if (nbytes < 8) return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "gguf: file too short (%zu bytes)", nbytes);
    sjkh_gguf *g = calloc(1, sizeof *g);
    if (!g) return sjkh_fail(SJK_ERR_NOMEM, err, err_cap, "gguf: out of memory");
    g->base = data;
    g->size = nbytes;
    return open_common(g, out, err, err_cap);
}

sjk_status sjkh_gguf_open(const char *path, sjkh_gguf **out, char *err, size_t err_cap)
{
    if (!out || !path) return sjkh_fail(SJK_ERR_PARAM, err, err_cap, "gguf: bad arguments");
    *out = NULL;
    uint64_t fsize = 0;
    int fd = sjk_file_open_regular(path, &fsize); /* a FIFO is refused, never waited on */
    if (fd < 0) {
        int e = errno;
        sjkh_fail(0, err, err_cap, "%s: %s", path, fd == -2 ? "not a regular file" : strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    if (fsize < 8 || fsize > SIZE_MAX) {
        close(fd);
        return sjkh_fail(SJK_ERR_FORMAT, err, err_cap, "%s: not a GGUF file (%lld bytes)", path,
                         (long long)fsize);
    }
    size_t size = (size_t)fsize;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        sjkh_fail(0, err, err_cap, "%s: mmap: %s", path, strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    sjkh_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(p, size);
        return sjkh_fail(SJK_ERR_NOMEM, err, err_cap, "gguf: out of memory");
    }
    g->base = p;
    g->size = size;
    g->mapped = 1;
    sjk_status st = open_common(g, out, err, err_cap);
    if (st && err && err_cap) { /* prefix the path */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s: %s", path, err);
        snprintf(err, err_cap, "%s", tmp);
    }
    return st;
}

void sjkh_gguf_close(sjkh_gguf *g)
{
    if (!g) return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].str_off);
        }
    if (g->tensors)
        for (int64_t i = 0; i < g->n_tensors; i++) free((void *)g->tensors[i].name);
    free(g->kv);
    free(g->kv_sorted);
    free(g->tensors);
    free(g->t_sorted);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g);
}

uint32_t sjkh_gguf_version(const sjkh_gguf *g) { return g->version; }
uint32_t sjkh_gguf_alignment(const sjkh_gguf *g) { return g->alignment; }
size_t sjkh_gguf_file_nbytes(const sjkh_gguf *g) { return g->size; }

/* ---- metadata access --------------------------------------------------------------- */

int64_t sjkh_gguf_n_kv(const sjkh_gguf *g) { return g->n_kv; }

int64_t sjkh_gguf_find_key(const sjkh_gguf *g, const char *key)
{
    int64_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->kv[g->kv_sorted[mid]].key, key);
        if (c == 0) return g->kv_sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

const char *sjkh_gguf_key(const sjkh_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

sjkh_gguf_vtype sjkh_gguf_kv_type(const sjkh_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? (sjkh_gguf_vtype)g->kv[i].type : SJKH_GGUF_VTYPE_COUNT;
}

/* Reads an integer-typed value at p as int64 (u64 values above INT64_MAX flag *big). */
static int read_int(uint32_t type, const uint8_t *p, int64_t *v, uint64_t *uv, int *is_unsigned)
{
    *is_unsigned = 0;
    switch (type) {
    case SJKH_GGUF_UINT8: case SJKH_GGUF_BOOL: *v = p[0]; break;
    case SJKH_GGUF_INT8: *v = (int8_t)p[0]; break;
    case SJKH_GGUF_UINT16: *v = sjkh_rd_u16(p); break;
    case SJKH_GGUF_INT16: *v = (int16_t)sjkh_rd_u16(p); break;
    case SJKH_GGUF_UINT32: *v = sjkh_rd_u32(p); break;
    case SJKH_GGUF_INT32: *v = (int32_t)sjkh_rd_u32(p); break;
    case SJKH_GGUF_INT64: *v = (int64_t)sjkh_rd_u64(p); break;
    case SJKH_GGUF_UINT64:
        *uv = sjkh_rd_u64(p);
        *is_unsigned = 1;
        return 1;
    default: return 0;
    }
    *uv = (uint64_t)*v;
    return 1;
}

static const gguf_kv *kv_by_key(const sjkh_gguf *g, const char *key)
{
    if (!g || !key) return NULL;
    int64_t i = sjkh_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

/* The integer value of key: SJK_ERR_RANGE if absent, SJK_ERR_FORMAT if not an integer. */
static sjk_status kv_int(const sjkh_gguf *g, const char *key, int64_t *v, uint64_t *uv, int *is_unsigned)
{
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return SJK_ERR_RANGE;
    return read_int(kv->type, g->base + kv->val_off, v, uv, is_unsigned) ? SJK_OK : SJK_ERR_FORMAT;
}

sjk_status sjkh_gguf_get_i64(const sjkh_gguf *g, const char *key, int64_t *out)
{
    int64_t v;
    uint64_t uv;
    int u;
    sjk_status st = kv_int(g, key, &v, &uv, &u);
    if (st) return st;
    if (u) {
        if (uv > (uint64_t)INT64_MAX) return SJK_ERR_FORMAT;
        v = (int64_t)uv;
    }
    *out = v;
    return SJK_OK;
}

sjk_status sjkh_gguf_get_u64(const sjkh_gguf *g, const char *key, uint64_t *out)
{
    int64_t v;
    uint64_t uv;
    int u;
    sjk_status st = kv_int(g, key, &v, &uv, &u);
    if (st) return st;
    if (!u && v < 0) return SJK_ERR_FORMAT;
    *out = uv;
    return SJK_OK;
}

sjk_status sjkh_gguf_get_u32(const sjkh_gguf *g, const char *key, uint32_t *out)
{
    uint64_t v;
    sjk_status st = sjkh_gguf_get_u64(g, key, &v);
    if (st) return st;
    if (v > UINT32_MAX) return SJK_ERR_FORMAT;
    *out = (uint32_t)v;
    return SJK_OK;
}

sjk_status sjkh_gguf_get_f32(const sjkh_gguf *g, const char *key, float *out)
{
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return SJK_ERR_RANGE;
    const uint8_t *p = g->base + kv->val_off;
    if (kv->type == SJKH_GGUF_FLOAT32) {
        *out = sjkh_rd_f32(p);
        return SJK_OK;
    }
    if (kv->type == SJKH_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        *out = (float)d;
        return SJK_OK;
    }
    int64_t v;
    uint64_t uv;
    int u;
    if (kv->type == SJKH_GGUF_BOOL || !read_int(kv->type, p, &v, &uv, &u)) return SJK_ERR_FORMAT;
    *out = u ? (float)uv : (float)v;
    return SJK_OK;
}

sjk_status sjkh_gguf_get_bool(const sjkh_gguf *g, const char *key, int *out)
{
    int64_t v;
    uint64_t uv;
    int u;
    sjk_status st = kv_int(g, key, &v, &uv, &u);
    if (st) return st;
    if (uv > 1) return SJK_ERR_FORMAT;
    *out = (int)uv;
    return SJK_OK;
}

sjk_status sjkh_gguf_get_str(const sjkh_gguf *g, const char *key, const char **s, size_t *len)
{
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return SJK_ERR_RANGE;
    if (kv->type != SJKH_GGUF_STRING) return SJK_ERR_FORMAT;
    *s = (const char *)g->base + kv->val_off;
    *len = (size_t)kv->count;
    return SJK_OK;
}

sjk_status sjkh_gguf_get_cstr(const sjkh_gguf *g, const char *key, char *buf, size_t cap)
{
    const char *s;
    size_t len;
    sjk_status st = sjkh_gguf_get_str(g, key, &s, &len);
    if (st) return st;
    if (!buf || !cap) return SJK_ERR_BUFFER;
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    /* printable: a NUL or control byte (an escape sequence) in a file's string never
     * reaches a terminal through a name this returns */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f) buf[i] = '?';
    return n == len ? SJK_OK : SJK_ERR_BUFFER;
}

sjk_status sjkh_gguf_get_arr(const sjkh_gguf *g, const char *key, sjkh_gguf_arr *out)
{
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return SJK_ERR_RANGE;
    if (kv->type != SJKH_GGUF_ARRAY) return SJK_ERR_FORMAT;
    out->elem_type = kv->elem_type;
    out->count = kv->count;
    out->data = kv->elem_type == SJKH_GGUF_STRING ? NULL : g->base + kv->val_off;
    out->g = g;
    out->kv = kv - g->kv;
    return SJK_OK;
}

int64_t sjkh_gguf_arr_i64(const sjkh_gguf_arr *a, uint64_t i)
{
    if (!a || !a->data || i >= a->count) return 0;
    size_t es = vtype_size(a->elem_type);
    int64_t v;
    uint64_t uv;
    int u;
    if (!read_int(a->elem_type, (const uint8_t *)a->data + i * es, &v, &uv, &u)) {
        if (a->elem_type == SJKH_GGUF_FLOAT32) return (int64_t)sjkh_rd_f32((const uint8_t *)a->data + i * 4);
        return 0;
    }
    return u ? (int64_t)uv : v;
}

float sjkh_gguf_arr_f32(const sjkh_gguf_arr *a, uint64_t i)
{
    if (!a || !a->data || i >= a->count) return 0;
    const uint8_t *p = a->data;
    if (a->elem_type == SJKH_GGUF_FLOAT32) return sjkh_rd_f32(p + i * 4);
    if (a->elem_type == SJKH_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p + i * 8, 8);
        return (float)d;
    }
    return (float)sjkh_gguf_arr_i64(a, i);
}

const char *sjkh_gguf_arr_str(const sjkh_gguf_arr *a, uint64_t i, size_t *len)
{
    if (!a || !a->g || a->elem_type != SJKH_GGUF_STRING || i >= a->count || a->kv < 0 || a->kv >= a->g->n_kv)
        return NULL;
    const gguf_kv *kv = &a->g->kv[a->kv];
    size_t off = kv->str_off[i];
    if (len) *len = (size_t)sjkh_rd_u64(a->g->base + off);
    return (const char *)a->g->base + off + 8;
}

/* ---- tensors ----------------------------------------------------------------------- */

int64_t sjkh_gguf_n_tensors(const sjkh_gguf *g) { return g->n_tensors; }

const sjkh_tensor *sjkh_gguf_tensor(const sjkh_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const sjkh_tensor *sjkh_gguf_find_tensor(const sjkh_gguf *g, const char *name)
{
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->tensors[g->t_sorted[mid]].name, name);
        if (c == 0) return &g->tensors[g->t_sorted[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}
