/* test_gguf.c — the GGUF reader against synthetic files: a valid file reads back exactly,
 * and every kind of damage (truncation at every byte, overflowing dimensions, bad
 * offsets, unknown types, duplicates) is refused with a status and a message, never a
 * crash or an out-of-bounds read (run under `make asan`). */
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "support/gguf_writer.h"
#include "sjkhost.h"

/* ---- a tiny GGUF writer ------------------------------------------------------------ */


/* Knobs that damage the file in one specific way. */
typedef struct opts {
    uint32_t magic, version;
    int dup_key, dup_tensor, nested_array, bad_vtype, bool_value, alignment_type;
    uint32_t alignment; /* 0: absent */
    uint64_t ne1_t1;    /* ne[1] of tensor 1 */
    uint32_t n_dims_t0, type_t1;
    uint64_t off_t1;    /* relative offset of tensor 1 */
    uint64_t str_len_override, arr_count_override, n_tensors_override;
    uint32_t ne0_t1;
} opts;

static opts opts_default(void)
{
    opts o;
    memset(&o, 0, sizeof o);
    o.magic = 0x46554747u;
    o.version = 3;
    o.bool_value = 1;
    o.ne1_t1 = 2;
    o.n_dims_t0 = 2;
    o.type_t1 = SJKH_TYPE_Q8_0;
    o.off_t1 = 64;
    o.ne0_t1 = 32;
    return o;
}

/* Tensor 0: f32 [4,2] at offset 0 (32 bytes). Tensor 1: q8_0 [32,2] at off_t1 (68 bytes). */
static gw_buf build(const opts *o)
{
    gw_buf w = {0};
    uint32_t align = o->alignment ? o->alignment : 32;
    gw_u32(&w, o->magic);
    gw_u32(&w, o->version);
    gw_u64(&w, o->n_tensors_override ? o->n_tensors_override : 2 + (uint64_t)!!o->dup_tensor);
    uint64_t n_kv = 6 + !!o->dup_key + !!o->alignment + !!o->nested_array;
    gw_u64(&w, n_kv);

    gw_str(&w, "general.architecture");
    gw_u32(&w, SJKH_GGUF_STRING);
    if (o->str_len_override) {
        gw_u64(&w, o->str_len_override);
        gw_bytes(&w, "llama", 5);
    } else {
        gw_str(&w, "llama");
    }
    gw_str(&w, "llama.block_count");
    gw_u32(&w, o->bad_vtype ? 99u : SJKH_GGUF_UINT32);
    gw_u32(&w, 30);
    gw_str(&w, "llama.rope.freq_base");
    gw_u32(&w, SJKH_GGUF_FLOAT32);
    gw_f32(&w, 10000.0f);
    gw_str(&w, "tokenizer.ggml.add_bos_token");
    gw_u32(&w, SJKH_GGUF_BOOL);
    uint8_t b = (uint8_t)o->bool_value;
    gw_bytes(&w, &b, 1);
    gw_str(&w, "tokenizer.ggml.tokens");
    gw_u32(&w, SJKH_GGUF_ARRAY);
    gw_u32(&w, SJKH_GGUF_STRING);
    gw_u64(&w, o->arr_count_override ? o->arr_count_override : 3);
    gw_str(&w, "<s>");
    gw_str(&w, "");
    gw_str(&w, "hello");
    gw_str(&w, "tokenizer.ggml.token_type");
    gw_u32(&w, SJKH_GGUF_ARRAY);
    gw_u32(&w, SJKH_GGUF_INT32);
    gw_u64(&w, 3);
    int32_t tt[3] = {3, 1, -7};
    gw_bytes(&w, tt, sizeof tt);
    if (o->dup_key) {
        gw_str(&w, "llama.block_count");
        gw_u32(&w, SJKH_GGUF_UINT32);
        gw_u32(&w, 31);
    }
    if (o->alignment) {
        gw_str(&w, "general.alignment");
        gw_u32(&w, o->alignment_type ? (uint32_t)o->alignment_type : SJKH_GGUF_UINT32);
        if (o->alignment_type == SJKH_GGUF_UINT64) gw_u64(&w, o->alignment);
        else gw_u32(&w, o->alignment);
    }
    if (o->nested_array) {
        gw_str(&w, "x.nested");
        gw_u32(&w, SJKH_GGUF_ARRAY);
        gw_u32(&w, SJKH_GGUF_ARRAY);
        gw_u64(&w, 0);
    }

    gw_str(&w, "a.weight");
    gw_u32(&w, o->n_dims_t0);
    for (uint32_t d = 0; d < o->n_dims_t0 && d < 8; d++) gw_u64(&w, d == 0 ? 4 : d == 1 ? 2 : 1);
    gw_u32(&w, SJKH_TYPE_F32);
    gw_u64(&w, 0);
    gw_str(&w, "b.weight");
    gw_u32(&w, 2);
    gw_u64(&w, o->ne0_t1);
    gw_u64(&w, o->ne1_t1);
    gw_u32(&w, o->type_t1);
    gw_u64(&w, o->off_t1);
    if (o->dup_tensor) {
        gw_str(&w, "a.weight");
        gw_u32(&w, 1);
        gw_u64(&w, 4);
        gw_u32(&w, SJKH_TYPE_F32);
        gw_u64(&w, 192);
    }
    while (w.n % align) gw_bytes(&w, "", 1);
    size_t data_start = w.n;
    /* tensor 0 data */
    for (int i = 0; i < 8; i++) gw_f32(&w, (float)i * 0.5f);
    while (w.n < data_start + 64) gw_bytes(&w, "", 1);
    /* tensor 1: two q8_0 blocks, d = 1.0 (0x3C00), qs = e */
    for (int blk = 0; blk < 2; blk++) {
        uint16_t d = 0x3C00;
        gw_bytes(&w, &d, 2);
        for (int e = 0; e < 32; e++) {
            int8_t q = (int8_t)(e - 16 + blk);
            gw_bytes(&w, &q, 1);
        }
    }
    while (w.n < data_start + 256) gw_bytes(&w, "", 1); /* room for the dup tensor */
    return w;
}

static sjk_status open_opts(const opts *o, char *err, size_t cap)
{
    gw_buf w = build(o);
    sjkh_gguf *g = NULL;
    sjk_status st = sjkh_gguf_open_memory(w.p, w.n, &g, err, cap);
    sjkh_gguf_close(g);
    free(w.p);
    return st;
}

/* ---- tests ------------------------------------------------------------------------- */

TEST(test_gguf_valid_file_reads_back)
{
    opts o = opts_default();
    gw_buf w = build(&o);
    sjkh_gguf *g = NULL;
    char err[256] = "";
    sjk_status st = sjkh_gguf_open_memory(w.p, w.n, &g, err, sizeof err);
    CHECKF(st == SJK_OK, "%s", err);
    if (st) {
        free(w.p);
        return;
    }
    CHECK(sjkh_gguf_version(g) == 3);
    CHECK(sjkh_gguf_alignment(g) == 32);
    CHECK(sjkh_gguf_n_kv(g) == 6);
    CHECK(sjkh_gguf_n_tensors(g) == 2);
    char arch[16];
    CHECK(sjkh_gguf_get_cstr(g, "general.architecture", arch, sizeof arch) == SJK_OK);
    CHECK(!strcmp(arch, "llama"));
    CHECK(sjkh_gguf_get_cstr(g, "general.architecture", arch, 3) == SJK_ERR_BUFFER);
    uint32_t u = 0;
    CHECK(sjkh_gguf_get_u32(g, "llama.block_count", &u) == SJK_OK && u == 30);
    float f = 0;
    CHECK(sjkh_gguf_get_f32(g, "llama.rope.freq_base", &f) == SJK_OK && f == 10000.0f);
    CHECK(sjkh_gguf_get_u32(g, "llama.rope.freq_base", &u) == SJK_ERR_FORMAT);
    int bo = 0;
    CHECK(sjkh_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bo) == SJK_OK && bo == 1);
    CHECK(sjkh_gguf_get_u32(g, "no.such.key", &u) == SJK_ERR_RANGE);
    sjkh_gguf_arr a;
    CHECK(sjkh_gguf_get_arr(g, "tokenizer.ggml.tokens", &a) == SJK_OK);
    CHECK(a.count == 3 && a.elem_type == SJKH_GGUF_STRING);
    size_t len = 99;
    const char *s = sjkh_gguf_arr_str(&a, 2, &len);
    CHECK(s && len == 5 && !memcmp(s, "hello", 5));
    s = sjkh_gguf_arr_str(&a, 1, &len);
    CHECK(s && len == 0);
    CHECK(sjkh_gguf_arr_str(&a, 3, &len) == NULL);
    CHECK(sjkh_gguf_get_arr(g, "tokenizer.ggml.token_type", &a) == SJK_OK);
    CHECK(sjkh_gguf_arr_i64(&a, 0) == 3 && sjkh_gguf_arr_i64(&a, 2) == -7);
    CHECK(sjkh_gguf_arr_i64(&a, 3) == 0);

    const sjkh_tensor *t = sjkh_gguf_find_tensor(g, "b.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->type == SJKH_TYPE_Q8_0 && t->ne[0] == 32 && t->ne[1] == 2 && t->n_values == 64);
        CHECK(t->row_nbytes == 34 && t->nbytes == 68);
        CHECK(((const int8_t *)t->data)[2] == -16);
    }
    t = sjkh_gguf_find_tensor(g, "a.weight");
    CHECK(t && t->nbytes == 32 && t->ne[2] == 1 && t->ne[3] == 1);
    if (t) {
        float v;
        memcpy(&v, (const uint8_t *)t->data + 12, 4);
        CHECK(v == 1.5f);
    }
    CHECK(sjkh_gguf_find_tensor(g, "c.weight") == NULL);
    CHECK(sjkh_gguf_tensor(g, 2) == NULL && sjkh_gguf_tensor(g, -1) == NULL);
    sjkh_gguf_close(g);
    free(w.p);
}

TEST(test_gguf_truncated_at_every_byte)
{
    opts o = opts_default();
    gw_buf w = build(&o);
    /* the last tensor ends 64 + 68 bytes after the data start; everything shorter fails */
    size_t need = w.n - 256 + 64 + 68;
    int bad = 0;
    for (size_t n = 0; n < need; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact-size copy so ASan sees any overread */
        memcpy(copy, w.p, n);
        sjkh_gguf *g = NULL;
        char err[256] = "";
        sjk_status st = sjkh_gguf_open_memory(copy, n, &g, err, sizeof err);
        if (st == SJK_OK || g != NULL || !err[0]) bad++;
        sjkh_gguf_close(g);
        free(copy);
    }
    CHECKF(bad == 0, "%d truncations were accepted or gave no message", bad);
    sjkh_gguf *g = NULL;
    CHECK(sjkh_gguf_open_memory(w.p, need, &g, NULL, 0) == SJK_OK);
    sjkh_gguf_close(g);
    free(w.p);
}

TEST(test_gguf_bad_header)
{
    char err[256];
    opts o = opts_default();
    o.magic = 0x46554746u;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT);
    o = opts_default();
    o.version = 1;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT);
    o.version = 0x03000000u; /* byte-swapped */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT && strstr(err, "big-endian"));
    o = opts_default();
    o.n_tensors_override = UINT64_MAX;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
}

TEST(test_gguf_hostile_lengths)
{
    char err[256];
    opts o = opts_default();
    o.str_len_override = UINT64_MAX - 3;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.str_len_override = 1ull << 40;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o = opts_default();
    o.arr_count_override = UINT64_MAX / 2; /* must not try to allocate for it */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.arr_count_override = 4; /* one more string than present: eats the next key */
    CHECK(open_opts(&o, err, sizeof err) != SJK_OK);
}

TEST(test_gguf_overflowing_dims)
{
    char err[256];
    opts o = opts_default();
    o.ne1_t1 = 1ull << 62; /* 32 * 2^62 overflows the element count */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT && strstr(err, "b.weight"));
    o.ne1_t1 = 1ull << 58; /* element count fits, bytes (34/32) overflow or run off the file */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.ne1_t1 = 0;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.ne1_t1 = UINT64_MAX;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o = opts_default();
    o.n_dims_t0 = 5;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.n_dims_t0 = 0;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o = opts_default();
    o.ne0_t1 = 48; /* not a multiple of the q8_0 block */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT && strstr(err, "block"));
}

TEST(test_gguf_bad_offsets)
{
    char err[256];
    opts o = opts_default();
    o.off_t1 = 65; /* misaligned */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.off_t1 = 1ull << 40; /* past the end */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.off_t1 = UINT64_MAX - 31; /* aligned, wraps when added */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.off_t1 = 0; /* overlaps tensor 0 */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT && strstr(err, "overlap"));
    o.off_t1 = 192; /* ends exactly at the end of the file: fine */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.off_t1 = 160;
    CHECKF(open_opts(&o, err, sizeof err) == SJK_OK, "%s", err);
}

TEST(test_gguf_unknown_types)
{
    char err[256];
    opts o = opts_default();
    o.type_t1 = 17; /* an IQ type this build does not size */
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT && strstr(err, "unknown tensor type 17"));
    o.type_t1 = 0xFFFFFFFFu;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT);
    o = opts_default();
    o.bad_vtype = 1;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT && strstr(err, "llama.block_count"));
    o = opts_default();
    o.nested_array = 1;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_FORMAT && strstr(err, "nested"));
    o = opts_default();
    o.bool_value = 2;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
}

TEST(test_gguf_duplicates)
{
    char err[256];
    opts o = opts_default();
    o.dup_key = 1;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT && strstr(err, "duplicate key"));
    o = opts_default();
    o.dup_tensor = 1;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT && strstr(err, "duplicate tensor"));
}

TEST(test_gguf_alignment_key)
{
    char err[256];
    opts o = opts_default();
    o.alignment = 64;
    CHECKF(open_opts(&o, err, sizeof err) == SJK_OK, "%s", err);
    o.alignment = 48;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
    o.alignment = 32;
    o.alignment_type = SJKH_GGUF_UINT64;
    CHECK(open_opts(&o, err, sizeof err) == SJK_ERR_CORRUPT);
}

TEST(test_gguf_file_open)
{
    char path[] = "/tmp/sjk_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    opts o = opts_default();
    gw_buf w = build(&o);
    CHECK(write(fd, w.p, w.n) == (ssize_t)w.n);
    close(fd);
    sjkh_gguf *g = NULL;
    char err[512] = "";
    CHECKF(sjkh_gguf_open(path, &g, err, sizeof err) == SJK_OK, "%s", err);
    CHECK(g && sjkh_gguf_n_tensors(g) == 2 && sjkh_gguf_file_nbytes(g) == w.n);
    sjkh_gguf_close(g);
    /* truncate the file on disk: clear message that names the path */
    CHECK(truncate(path, (off_t)(w.n - 300)) == 0);
    g = NULL;
    CHECK(sjkh_gguf_open(path, &g, err, sizeof err) != SJK_OK && g == NULL && strstr(err, path));
    unlink(path);
    CHECK(sjkh_gguf_open(path, &g, err, sizeof err) == SJK_ERR_IO);
    CHECK(sjkh_gguf_open("/", &g, err, sizeof err) == SJK_ERR_IO);
    free(w.p);
}

int main(void)
{
    RUN(test_gguf_valid_file_reads_back);
    RUN(test_gguf_truncated_at_every_byte);
    RUN(test_gguf_bad_header);
    RUN(test_gguf_hostile_lengths);
    RUN(test_gguf_overflowing_dims);
    RUN(test_gguf_bad_offsets);
    RUN(test_gguf_unknown_types);
    RUN(test_gguf_duplicates);
    RUN(test_gguf_alignment_key);
    RUN(test_gguf_file_open);
    return test_summary();
}
