/* cache_file.c — save and restore a cache (include/sjkvarn.h, "Cache files"; the byte
 * layout is normative in docs/FORMAT.md "## Cache files").
 *
 *   +--------------------------+  header, 128 bytes (CRC-32C of bytes 0..123 at 124)
 *   | CONF section             |  n_layers x 32-byte layer configurations
 *   | STAT section             |  [n_seqs][n_layers] (length N, body end B), u32 each
 *   | DATA section (seq, layer)|  one per (seq, layer), seq-major: per KV head the live
 *   | ...                      |  spans (sink K, sink V, records, ring K, ring V | K, V)
 *   +--------------------------+
 *   section = | tag u32 | index u32 | payload_nbytes u64 | payload | crc32c u32 |
 *             (the CRC covers the 16-byte section header and the payload)
 *
 * Why two passes on restore: the cache has no room for a second copy, and the contract
 * is "a bad file changes nothing". Pass 1 streams every byte through a stack buffer and
 * checks checksums and bounds; pass 2 reads the same bytes straight into the regions and
 * checks the checksums again (the file could have been replaced in between; then the
 * cache is emptied, never left half old, half new).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_internal.h"
#include "common/crc32c.h"
#include "common/file.h"
#include "common/tmpfile.h"
#include "common/util.h"

#define HDR_NBYTES 128
#define SEC_HDR_NBYTES 16
#define SEC_CRC_NBYTES 4
#define LAYER_CONF_NBYTES 32
#define STATE_NBYTES 8
#define IO_CHUNK 16384

static const uint8_t k_magic[8] = {'S', 'J', 'K', 'V', 'C', 'A', 'C', 'H'};
enum { TAG_CONF = 0x464E4F43u /* "CONF" */, TAG_STAT = 0x54415453u /* "STAT" */,
       TAG_DATA = 0x41544144u /* "DATA" */ };

_Static_assert(HDR_NBYTES == 8 + 4 * 12 + 8 + SJK_FINGERPRINT_NBYTES + 28 + 4, "header layout");
_Static_assert(LAYER_CONF_NBYTES >= 12 + 4 * 4, "layer configuration record");
_Static_assert(sizeof(sjk_layer_config) == 28, "sjk_layer_config changed: update the CONF section");
_Static_assert(IO_CHUNK % 2 == 0, "chunks keep fp16 alignment");

static void set_err(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* ---- what is saved ------------------------------------------------------------- */

/* One contiguous run of bytes of a head block. check: 1 fp16 values that must be
 * finite (sink rows), 2 sealed records (scale fields must be finite), 3 rows of format
 * fmt, row_nbytes each, that must decode to finite values (uniform rows, staging ring):
 * every restored value is checked. */
typedef struct span {
    uint8_t *ptr;
    size_t nbytes;
    int check;
    uint8_t fmt;
    size_t row_nbytes;
} span;

#define MAX_SPANS 7

/* The live spans of one (seq, layer, head) for state (n, b), in file order. */
static int head_spans(const sjk_cache *c, const sjk_cache_layer *L, uint32_t seq, uint32_t head,
                      uint32_t n, uint32_t b, span *out)
{
    uint8_t *hb = sjk_cache_head(c, L, seq, head);
    int k = 0;
    if (!L->compressed) {
        out[k++] = (span){hb + L->off_ring_k, (size_t)n * L->k_row_nbytes, 3, L->k_fmt, L->k_row_nbytes};
        out[k++] = (span){hb + L->off_ring_v, (size_t)n * L->v_row_nbytes, 3, L->v_fmt, L->v_row_nbytes};
        return k;
    }
    const size_t D = c->D;
    uint32_t ns = SJK_MIN(n, L->sink);
    out[k++] = (span){hb + L->off_sink_k, (size_t)ns * D * 2, 1, 0, 0};
    out[k++] = (span){hb + L->off_sink_v, (size_t)ns * D * 2, 1, 0, 0};
    out[k++] = (span){hb + L->off_body, (size_t)((b - L->sink) / SJK_GROUP) * L->rec_nbytes, 2, 0, 0};
    if (n > b) {
        /* positions b .. n-1 live in ring slots (p - sink) % ring_cap: at most two runs */
        uint32_t s0 = (b - L->sink) % L->ring_cap, cnt = n - b;
        uint32_t first = SJK_MIN(cnt, L->ring_cap - s0);
        for (int v = 0; v < 2; v++) {
            uint8_t *base = hb + (v ? L->off_ring_v : L->off_ring_k);
            uint8_t fmt = v ? L->v_fmt : L->k_fmt;
            out[k++] = (span){base + (size_t)s0 * L->k_row_nbytes, (size_t)first * L->k_row_nbytes, 3, fmt,
                              L->k_row_nbytes};
            if (cnt > first) out[k++] = (span){base, (size_t)(cnt - first) * L->k_row_nbytes, 3, fmt, L->k_row_nbytes};
        }
    }
    return k;
}

static size_t data_payload_nbytes(const sjk_cache *c, const sjk_cache_layer *L, uint32_t n, uint32_t b)
{
    span sp[MAX_SPANS];
    int k = head_spans(c, L, 0, 0, n, b, sp);
    size_t per = 0;
    for (int i = 0; i < k; i++) per += sp[i].nbytes;
    return per * c->p.n_kv_heads; /* bounded by the cache's own allocation: no overflow */
}

/* The invariants of sjk_cache_check for one state, against this cache's geometry. */
static const char *state_problem(const sjk_cache *c, const sjk_cache_layer *L, uint32_t n, uint32_t b)
{
    if (n > c->p.max_pos) return "length beyond max_pos";
    if (!L->compressed) return b != 0 ? "uniform layer with a body end" : NULL;
    if (b < L->sink || (b - L->sink) % SJK_GROUP) return "body end not sink + k*128";
    if (b > L->sink && b > n) return "body end beyond length";
    if ((b - L->sink) / SJK_GROUP > L->n_rec) return "more records than slots";
    uint32_t tail = n > b ? n - b : 0;
    if (tail > L->ring_cap) return "tail longer than the ring";
    if (tail >= sjk_seal_trigger(&L->cfg)) return "tail at the seal trigger";
    return NULL;
}

static void put_layer_conf(uint8_t *p, const sjk_layer_config *cf)
{
    memset(p, 0, LAYER_CONF_NBYTES);
    p[0] = cf->kind; p[1] = cf->k_format; p[2] = cf->v_format; p[3] = cf->rotate;
    p[4] = cf->bits_k; p[5] = cf->bits_v; p[6] = cf->body; p[7] = cf->balance;
    p[8] = cf->staging; p[9] = cf->center;
    sjk_wr_u32le(p + 12, cf->sink);
    sjk_wr_u32le(p + 16, cf->tail_min);
    sjk_wr_u32le(p + 20, cf->tail_max);
    sjk_wr_u32le(p + 24, cf->rot_block);
}

/* The record format a file of these layers needs: 5 if a compressed layer has the body on
 * the 128-entry tables, else 4 if one has a body on the int8-grid codebooks, else 3 if one has the real-data trellis body, else 2 if one
 * has a body above 4 bits, else 1 (each format is
 * a superset of the one before with the same bytes for what the older one had, so a file
 * without the new bodies stays readable by older builds, and an older build refuses a
 * file with them by its version). */
static uint32_t conf_record_version(uint8_t kind, uint8_t bits_k, uint8_t bits_v, uint8_t body)
{
    if (kind == SJK_KIND_UNIFORM) return 1;
    if (body == SJK_BODY_TRELLIS_S128) return 5;
    if (body == SJK_BODY_TRELLIS_I8 || body == SJK_BODY_TRELLIS_REAL_I8) return 4;
    if (body == SJK_BODY_TRELLIS_REAL) return 3;
    return bits_k > SJK_RECORD_FORMAT_V1_MAX_BITS || bits_v > SJK_RECORD_FORMAT_V1_MAX_BITS ? 2 : 1;
}

static uint32_t cache_record_version(const sjk_cache *c)
{
    uint32_t v = 1;
    for (uint32_t l = 0; l < c->p.n_layers; l++) {
        const sjk_layer_config *cf = &c->layers[l].cfg;
        v = SJK_MAX(v, conf_record_version(cf->kind, cf->bits_k, cf->bits_v, cf->body));
    }
    return v;
}

static void put_header(const sjk_cache *c, const uint8_t *fp, uint64_t file_nbytes, uint8_t *h)
{
    memset(h, 0, HDR_NBYTES);
    memcpy(h, k_magic, 8);
    sjk_wr_u32le(h + 8, SJK_CACHE_FILE_VERSION);
    sjk_wr_u32le(h + 12, HDR_NBYTES);
    sjk_wr_u32le(h + 16, cache_record_version(c));
    sjk_wr_u32le(h + 20, (SJK_VERSION_MAJOR << 16) | (SJK_VERSION_MINOR << 8) | SJK_VERSION_PATCH);
    sjk_wr_u32le(h + 24, c->p.n_layers);
    sjk_wr_u32le(h + 28, c->p.n_kv_heads);
    sjk_wr_u32le(h + 32, c->p.n_q_heads);
    sjk_wr_u32le(h + 36, c->p.head_dim);
    sjk_wr_u32le(h + 40, c->p.max_pos);
    sjk_wr_u32le(h + 44, c->p.n_seqs);
    sjk_wr_u32le(h + 48, 2 + c->p.n_seqs * c->p.n_layers);
    sjk_wr_u32le(h + 52, 0);
    sjk_wr_u32le(h + 56, (uint32_t)file_nbytes);
    sjk_wr_u32le(h + 60, (uint32_t)(file_nbytes >> 32));
    if (fp) memcpy(h + 64, fp, SJK_FINGERPRINT_NBYTES);
    sjk_wr_u32le(h + 124, sjk_crc32c(0, h, 124));
}

static void put_sec_hdr(uint8_t *p, uint32_t tag, uint32_t index, uint64_t nbytes)
{
    sjk_wr_u32le(p, tag);
    sjk_wr_u32le(p + 4, index);
    sjk_wr_u32le(p + 8, (uint32_t)nbytes);
    sjk_wr_u32le(p + 12, (uint32_t)(nbytes >> 32));
}

sjk_status sjk_cache_file_nbytes(const sjk_cache *c, size_t *nbytes)
{
    if (!c || !nbytes) return SJK_ERR_PARAM;
    const size_t sec = SEC_HDR_NBYTES + SEC_CRC_NBYTES;
    size_t t = HDR_NBYTES + sec + (size_t)c->p.n_layers * LAYER_CONF_NBYTES + sec +
               (size_t)c->p.n_seqs * c->p.n_layers * STATE_NBYTES;
    for (uint32_t s = 0; s < c->p.n_seqs; s++)
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            const sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            t += sec + data_payload_nbytes(c, &c->layers[l], sl->n, sl->b);
        }
    *nbytes = t;
    return SJK_OK;
}

/* ---- writing ------------------------------------------------------------------- */

typedef struct writer {
    int fd;                 /* >= 0: a file; else memory */
    uint8_t *mem;
    size_t cap, off;
    uint32_t crc;
    int err;                /* errno of a failed write */
    size_t nbuf;
    uint8_t buf[IO_CHUNK];
} writer;

static int w_flush(writer *w)
{
    size_t done = 0;
    while (w->fd >= 0 && done < w->nbuf) {
        ssize_t r = write(w->fd, w->buf + done, w->nbuf - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { w->err = r < 0 ? errno : EIO; return 0; }
        done += (size_t)r;
    }
    w->nbuf = 0;
    return 1;
}

/* Appends bytes (and folds them into the running CRC). */
static int w_put(writer *w, const void *src, size_t n)
{
    const uint8_t *p = src;
    w->crc = sjk_crc32c(w->crc, p, n);
    if (w->fd < 0) {
        if (w->mem) memcpy(w->mem + w->off, p, n);
        w->off += n;
        return 1;
    }
    while (n) {
        size_t k = SJK_MIN(n, sizeof w->buf - w->nbuf);
        memcpy(w->buf + w->nbuf, p, k);
        w->nbuf += k;
        w->off += k;
        p += k;
        n -= k;
        if (w->nbuf == sizeof w->buf && !w_flush(w)) return 0;
    }
    return 1;
}

static int w_sec_begin(writer *w, uint32_t tag, uint32_t index, uint64_t nbytes)
{
    uint8_t h[SEC_HDR_NBYTES];
    put_sec_hdr(h, tag, index, nbytes);
    w->crc = 0;
    return w_put(w, h, sizeof h);
}

static int w_sec_end(writer *w)
{
    uint8_t t[4];
    sjk_wr_u32le(t, w->crc);
    return w_put(w, t, 4);
}

static int write_all(const sjk_cache *c, const uint8_t *fp, size_t file_nbytes, writer *w)
{
    uint8_t h[HDR_NBYTES];
    put_header(c, fp, file_nbytes, h);
    if (!w_put(w, h, sizeof h)) return 0;
    if (!w_sec_begin(w, TAG_CONF, 0, (uint64_t)c->p.n_layers * LAYER_CONF_NBYTES)) return 0;
    for (uint32_t l = 0; l < c->p.n_layers; l++) {
        uint8_t lc[LAYER_CONF_NBYTES];
        put_layer_conf(lc, &c->layers[l].cfg);
        if (!w_put(w, lc, sizeof lc)) return 0;
    }
    if (!w_sec_end(w)) return 0;
    if (!w_sec_begin(w, TAG_STAT, 0, (uint64_t)c->p.n_seqs * c->p.n_layers * STATE_NBYTES)) return 0;
    for (uint32_t s = 0; s < c->p.n_seqs; s++)
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            const sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            uint8_t st[STATE_NBYTES];
            sjk_wr_u32le(st, sl->n);
            sjk_wr_u32le(st + 4, sl->b);
            if (!w_put(w, st, sizeof st)) return 0;
        }
    if (!w_sec_end(w)) return 0;
    for (uint32_t s = 0; s < c->p.n_seqs; s++)
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            const sjk_cache_layer *L = &c->layers[l];
            const sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            if (!w_sec_begin(w, TAG_DATA, s * c->p.n_layers + l, data_payload_nbytes(c, L, sl->n, sl->b)))
                return 0;
            for (uint32_t hd = 0; hd < c->p.n_kv_heads; hd++) {
                span sp[MAX_SPANS];
                int k = head_spans(c, L, s, hd, sl->n, sl->b, sp);
                for (int i = 0; i < k; i++)
                    if (!w_put(w, sp[i].ptr, sp[i].nbytes)) return 0;
            }
            if (!w_sec_end(w)) return 0;
        }
    return w_flush(w);
}

sjk_status sjk_cache_save_memory(const sjk_cache *c, const uint8_t *fingerprint, void *dst,
                                 size_t dst_cap, size_t *nbytes)
{
    size_t n;
    if (!c || !nbytes) return SJK_ERR_PARAM;
    sjk_cache_file_nbytes(c, &n);
    *nbytes = n;
    if (!dst) return SJK_OK;
    if (dst_cap < n) return SJK_ERR_BUFFER;
    writer wb, *w = &wb;
    w->fd = -1;
    w->mem = dst;
    w->cap = dst_cap;
    w->off = 0;
    w->crc = 0;
    w->err = 0;
    w->nbuf = 0;
    write_all(c, fingerprint, n, w);
    return SJK_OK;
}

/* fsync the directory holding path, so the rename itself is durable. */
sjk_status sjk_cache_save(const sjk_cache *c, const char *path, const uint8_t *fingerprint,
                          char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!c || !path || !*path) { set_err(err, err_cap, "no cache or path"); return SJK_ERR_PARAM; }
    char tmp[PATH_MAX];
    size_t n;
    sjk_cache_file_nbytes(c, &n);
    const char *why = sjk_file_target_problem(path); /* never replace a device or a FIFO */
    if (why) {
        set_err(err, err_cap, "%s: %s", path, why);
        return SJK_ERR_PARAM;
    }
    int fd = sjk_tmp_create(path, tmp, sizeof tmp); /* locked until closed: see tmpfile.h */
    if (fd < 0) {
        int e = errno;
        if (e == ENAMETOOLONG) {
            set_err(err, err_cap, "%s: path too long", path);
            return SJK_ERR_PARAM;
        }
        set_err(err, err_cap, "%s: cannot create a temporary file: %s", path, strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    writer wb;
    wb.fd = fd;
    wb.mem = NULL;
    wb.cap = 0;
    wb.off = 0;
    wb.crc = 0;
    wb.err = 0;
    wb.nbuf = 0;
    const char *what = NULL;
    int e = 0;
    if (!write_all(c, fingerprint, n, &wb)) { what = "write"; e = wb.err; }
    else if (fsync(fd)) { what = "fsync"; e = errno; }
    /* rename while still holding the lock, so a concurrent sweep never takes our file */
    if (!what && rename(tmp, path)) { what = "rename"; e = errno; }
    if (what) unlink(tmp);
    if (close(fd) && !what) { what = "close"; e = errno; } /* after fsync: data is on disk */
    if (what) {
        set_err(err, err_cap, "%s: %s failed: %s", path, what, strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    if (sjk_file_fsync_dir_of(path)) {
        e = errno;
        set_err(err, err_cap, "%s: fsync of the directory failed: %s", path, strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    sjk_tmp_sweep(path); /* temporary files of saves killed earlier (common/tmpfile.h) */
    return SJK_OK;
}

/* ---- reading ------------------------------------------------------------------- */

typedef struct source {
    int fd;                 /* >= 0: pread from a file; else memory */
    const uint8_t *mem;
    uint64_t size;
    int err;
} source;

/* Reads n bytes at off; 0 if they are not all there (or an I/O error, src->err set). */
static int src_read(source *s, uint64_t off, void *dst, size_t n)
{
    if (off > s->size || n > s->size - off) return 0;
    if (s->fd < 0) { memcpy(dst, s->mem + off, n); return 1; }
    uint8_t *p = dst;
    while (n) {
        ssize_t r = pread(s->fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { s->err = r < 0 ? errno : 0; return 0; }
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 1;
}

static int fp16_finite(uint16_t x) { return (x & 0x7C00u) != 0x7C00u; }

typedef struct reader {
    source *src;
    uint64_t off;
    uint32_t crc;
    uint8_t buf[IO_CHUNK];
} reader;

#define FAILF(st_, ...) do { set_err(err, err_cap, __VA_ARGS__); return (st_); } while (0)

/* Reads one section header at r->off and checks tag, index and payload size. */
static sjk_status read_sec_hdr(reader *r, uint32_t tag, uint32_t index, uint64_t nbytes,
                               const char *name, char *err, size_t err_cap)
{
    uint8_t h[SEC_HDR_NBYTES];
    if (!src_read(r->src, r->off, h, sizeof h)) FAILF(SJK_ERR_CORRUPT, "%s section: file truncated", name);
    r->off += sizeof h;
    r->crc = sjk_crc32c(0, h, sizeof h);
    uint64_t got = sjk_rd_u32le(h + 8) | (uint64_t)sjk_rd_u32le(h + 12) << 32;
    if (sjk_rd_u32le(h) != tag || sjk_rd_u32le(h + 4) != index)
        FAILF(SJK_ERR_CORRUPT, "%s section %u: bad section header", name, index);
    if (got != nbytes)
        FAILF(SJK_ERR_CORRUPT, "%s section %u: %llu payload bytes, expected %llu", name, index,
              (unsigned long long)got, (unsigned long long)nbytes);
    return SJK_OK;
}

static sjk_status read_sec_crc(reader *r, const char *name, uint32_t index, char *err, size_t err_cap)
{
    uint8_t t[4];
    if (!src_read(r->src, r->off, t, 4)) FAILF(SJK_ERR_CORRUPT, "%s section: file truncated", name);
    r->off += 4;
    if (sjk_rd_u32le(t) != r->crc) FAILF(SJK_ERR_CORRUPT, "%s section %u: checksum mismatch", name, index);
    return SJK_OK;
}

/* Streams one span of a DATA payload. dst == NULL: validate only (through r->buf),
 * applying the span's content check; else read straight into dst. */
static sjk_status read_span(reader *r, const sjk_cache_layer *L, const span *sp, uint8_t *dst, uint32_t D,
                            char *err, size_t err_cap)
{
    size_t done = 0, rec_off = 0;
    while (done < sp->nbytes) {
        size_t k = SJK_MIN(sp->nbytes - done, sizeof r->buf);
        if (sp->check == 2) k = SJK_MIN(k, L->rec_nbytes - rec_off); /* stay inside one record */
        if (sp->check == 3 && k > sp->row_nbytes) k -= k % sp->row_nbytes; /* whole rows */
        uint8_t *p = dst ? dst + done : r->buf;
        if (!src_read(r->src, r->off, p, k)) FAILF(SJK_ERR_CORRUPT, "DATA section: file truncated");
        r->crc = sjk_crc32c(r->crc, p, k);
        if (!dst && sp->check == 1) {
            for (size_t i = 0; i + 1 < k; i += 2)
                if (!fp16_finite(sjk_rd_u16le(p + i))) FAILF(SJK_ERR_CORRUPT, "DATA section: non-finite sink value");
        } else if (!dst && sp->check == 2) {
            for (size_t i = 0; i + 1 < k; i += 2)
                if (rec_off + i >= L->rl.off_kscale && !fp16_finite(sjk_rd_u16le(p + i)))
                    FAILF(SJK_ERR_CORRUPT, "DATA section: non-finite record scale");
        } else if (!dst && sp->check == 3 && sp->row_nbytes && k % sp->row_nbytes == 0) {
            float row[512]; /* D <= 512: sjk_cache_params_validate */
            for (size_t i = 0; i < k; i += sp->row_nbytes) {
                if (sjk_format_decode_row((sjk_format)sp->fmt, row, D, p + i, sp->row_nbytes) != SJK_OK)
                    FAILF(SJK_ERR_CORRUPT, "DATA section: a row does not decode");
                float acc = 0.0f;
                for (uint32_t d = 0; d < D; d++) acc += row[d] * 0.0f; /* NaN iff a value is NaN or Inf */
                if (acc != acc) FAILF(SJK_ERR_CORRUPT, "DATA section: non-finite value in a stored row");
            }
        }
        if (sp->check == 2) rec_off = (rec_off + k) % L->rec_nbytes;
        r->off += k;
        done += k;
    }
    return SJK_OK;
}

static const char *conf_mismatch(const uint8_t *p, const sjk_layer_config *cf)
{
    uint8_t want[LAYER_CONF_NBYTES];
    put_layer_conf(want, cf);
    static const char *const names[] = {"kind", "k_format", "v_format", "rotate", "bits_k",
                                        "bits_v", "body", "balance", "staging", "center"};
    for (int i = 0; i < 10; i++)
        if (p[i] != want[i]) return names[i];
    if (memcmp(p + 10, want + 10, 2)) return "reserved";
    if (memcmp(p + 12, want + 12, 4)) return "sink";
    if (memcmp(p + 16, want + 16, 4)) return "tail_min";
    if (memcmp(p + 20, want + 20, 4)) return "tail_max";
    if (memcmp(p + 24, want + 24, 4)) return "rot_block";
    if (memcmp(p + 28, want + 28, 4)) return "reserved";
    return NULL;
}

/* One pass over the whole file. write = 0: validate everything, touch nothing. write = 1:
 * copy the regions into the cache (CRCs checked again), then set the lengths. */
static sjk_status restore_pass(sjk_cache *c, source *src, const uint8_t *fp, int write, uint32_t *lengths,
                               char *err, size_t err_cap)
{
    reader r;
    r.src = src;
    r.off = 0;
    r.crc = 0;
    uint8_t h[HDR_NBYTES];
    const uint32_t NL = c->p.n_layers, NS = c->p.n_seqs;

    /* header */
    if (!src_read(src, 0, h, sizeof h)) {
        if (src->err) { errno = src->err; FAILF(SJK_ERR_IO, "read failed: %s", strerror(src->err)); }
        if (src->size < 8 || !src_read(src, 0, h, 8) || memcmp(h, k_magic, 8))
            FAILF(SJK_ERR_FORMAT, "not a sjkvarn cache file (too short)");
        FAILF(SJK_ERR_CORRUPT, "cache file truncated inside its header (%llu bytes)", (unsigned long long)src->size);
    }
    if (memcmp(h, k_magic, 8)) FAILF(SJK_ERR_FORMAT, "not a sjkvarn cache file (bad magic)");
    if (sjk_rd_u32le(h + 124) != sjk_crc32c(0, h, 124)) FAILF(SJK_ERR_CORRUPT, "cache file header: checksum mismatch");
    uint32_t ver = sjk_rd_u32le(h + 8);
    if (ver != SJK_CACHE_FILE_VERSION)
        FAILF(SJK_ERR_FORMAT, "cache file version %u; this build reads version %u", ver, SJK_CACHE_FILE_VERSION);
    if (sjk_rd_u32le(h + 12) != HDR_NBYTES) FAILF(SJK_ERR_CORRUPT, "cache file header: bad header size");
    const uint32_t rec_ver = sjk_rd_u32le(h + 16);
    if (rec_ver < 1 || rec_ver > SJK_RECORD_FORMAT_VERSION)
        FAILF(SJK_ERR_FORMAT, "cache file holds record format %u; this build reads 1 to %u", rec_ver,
              SJK_RECORD_FORMAT_VERSION);
    uint64_t fsize = sjk_rd_u32le(h + 56) | (uint64_t)sjk_rd_u32le(h + 60) << 32;
    if (fsize != src->size)
        FAILF(SJK_ERR_CORRUPT, "cache file is %llu bytes, its header says %llu (truncated or extended)",
              (unsigned long long)src->size, (unsigned long long)fsize);
    uint8_t zero_fp[SJK_FINGERPRINT_NBYTES] = {0};
    if (memcmp(h + 64, fp ? fp : zero_fp, SJK_FINGERPRINT_NBYTES))
        FAILF(SJK_ERR_MISMATCH, "cache file was saved for another model (fingerprint differs)");
    static const char *const geo[] = {"n_layers", "n_kv_heads", "n_q_heads", "head_dim", "max_pos", "n_seqs"};
    const uint32_t have[] = {NL, c->p.n_kv_heads, c->p.n_q_heads, c->p.head_dim, c->p.max_pos, NS};
    for (int i = 0; i < 6; i++) {
        uint32_t got = sjk_rd_u32le(h + 24 + 4 * i);
        if (got != have[i]) FAILF(SJK_ERR_MISMATCH, "cache file has %s = %u, this cache %u", geo[i], got, have[i]);
    }
    if (sjk_rd_u32le(h + 48) != 2 + NS * NL) FAILF(SJK_ERR_CORRUPT, "cache file header: bad section count");
    r.off = HDR_NBYTES;

    /* CONF: read whole layers, decide after the CRC (a flipped bit is corruption, not
     * a mismatch) */
    sjk_status st = read_sec_hdr(&r, TAG_CONF, 0, (uint64_t)NL * LAYER_CONF_NBYTES, "CONF", err, err_cap);
    if (st) return st;
    const char *bad = NULL;
    uint32_t bad_l = 0;
    for (uint32_t l = 0; l < NL; l++) {
        uint8_t lc[LAYER_CONF_NBYTES];
        if (!src_read(src, r.off, lc, sizeof lc)) FAILF(SJK_ERR_CORRUPT, "CONF section: file truncated");
        r.off += sizeof lc;
        r.crc = sjk_crc32c(r.crc, lc, sizeof lc);
        if (!bad && (bad = conf_mismatch(lc, &c->layers[l].cfg))) bad_l = l;
    }
    if ((st = read_sec_crc(&r, "CONF", 0, err, err_cap))) return st;
    if (bad) FAILF(SJK_ERR_MISMATCH, "cache file layer %u differs from this cache in %s", bad_l, bad);
    const uint32_t need = cache_record_version(c);
    if (rec_ver < need)
        FAILF(SJK_ERR_CORRUPT, "cache file says record format %u but its layers have %s (format %u)", rec_ver,
              need == 5 ? "the trellis body on 128-entry tables"
              : need == 4 ? "trellis bodies on int8-grid codebooks"
              : need == 3 ? "the real-data trellis body" : "bodies above 4 bits", need);

    /* STAT */
    const uint64_t stat_off = r.off + SEC_HDR_NBYTES;
    if ((st = read_sec_hdr(&r, TAG_STAT, 0, (uint64_t)NS * NL * STATE_NBYTES, "STAT", err, err_cap))) return st;
    const char *prob = NULL;
    uint32_t prob_s = 0, prob_l = 0;
    for (uint32_t s = 0; s < NS; s++)
        for (uint32_t l = 0; l < NL; l++) {
            uint8_t e[STATE_NBYTES];
            if (!src_read(src, r.off, e, sizeof e)) FAILF(SJK_ERR_CORRUPT, "STAT section: file truncated");
            r.off += sizeof e;
            r.crc = sjk_crc32c(r.crc, e, sizeof e);
            const char *p = state_problem(c, &c->layers[l], sjk_rd_u32le(e), sjk_rd_u32le(e + 4));
            if (lengths) lengths[s * NL + l] = sjk_rd_u32le(e);
            if (p && !prob) { prob = p; prob_s = s; prob_l = l; }
        }
    if ((st = read_sec_crc(&r, "STAT", 0, err, err_cap))) return st;
    if (prob) FAILF(SJK_ERR_CORRUPT, "STAT section: seq %u layer %u: %s", prob_s, prob_l, prob);

    /* DATA */
    for (uint32_t s = 0; s < NS; s++)
        for (uint32_t l = 0; l < NL; l++) {
            const sjk_cache_layer *L = &c->layers[l];
            uint8_t e[STATE_NBYTES];
            uint32_t idx = s * NL + l;
            if (!src_read(src, stat_off + (uint64_t)idx * STATE_NBYTES, e, sizeof e))
                FAILF(SJK_ERR_CORRUPT, "STAT section: file truncated");
            uint32_t n = sjk_rd_u32le(e), b = sjk_rd_u32le(e + 4);
            if (state_problem(c, L, n, b)) FAILF(SJK_ERR_CORRUPT, "STAT section changed during restore");
            if ((st = read_sec_hdr(&r, TAG_DATA, idx, data_payload_nbytes(c, L, n, b), "DATA", err, err_cap)))
                return st;
            for (uint32_t hd = 0; hd < c->p.n_kv_heads; hd++) {
                span sp[MAX_SPANS];
                int k = head_spans(c, L, s, hd, n, b, sp);
                for (int i = 0; i < k; i++)
                    if ((st = read_span(&r, L, &sp[i], write ? sp[i].ptr : NULL, c->D, err, err_cap))) return st;
            }
            if ((st = read_sec_crc(&r, "DATA", idx, err, err_cap))) return st;
            if (write) {
                sjk_seq_layer *sl = sjk_cache_state(c, s, l);
                sl->n = n;
                sl->b = b;
                if (L->compressed && n >= L->sink) /* the ring's center, from the restored sink */
                    for (uint32_t hd = 0; hd < c->p.n_kv_heads; hd++)
                        sjk_cache_center_compute(c, L, sjk_cache_head(c, L, s, hd));
            }
        }
    if (r.off != src->size) FAILF(SJK_ERR_CORRUPT, "cache file has trailing bytes");
    return SJK_OK;
}

/* Every length back to 0 (after a failed second pass). */
static void cache_empty(sjk_cache *c)
{
    for (uint32_t s = 0; s < c->p.n_seqs; s++)
        for (uint32_t l = 0; l < c->p.n_layers; l++) {
            sjk_seq_layer *sl = sjk_cache_state(c, s, l);
            sl->n = 0;
            sl->b = c->layers[l].compressed ? c->layers[l].sink : 0;
        }
}

static sjk_status restore_from(sjk_cache *c, source *src, const uint8_t *fp, char *err, size_t err_cap)
{
    sjk_status st = restore_pass(c, src, fp, 0, NULL, err, err_cap);
    if (st != SJK_OK) return st;
    /* The lengths are rewritten per (seq, layer) as pass 2 goes; reset them first so a
     * failure part-way leaves a consistent (empty) cache. */
    cache_empty(c);
    st = restore_pass(c, src, fp, 1, NULL, err, err_cap);
    char msg[160];
    if (st == SJK_OK && sjk_cache_check(c, msg, sizeof msg) != SJK_OK) {
        set_err(err, err_cap, "restored cache fails its invariants: %s", msg);
        st = SJK_ERR_CORRUPT;
    }
    if (st != SJK_OK) {
        cache_empty(c);
        size_t len = err ? strnlen(err, err_cap) : 0;
        if (err && len + 40 < err_cap) snprintf(err + len, err_cap - len, " (file changed; cache emptied)");
        if (st != SJK_ERR_IO) st = SJK_ERR_CORRUPT;
    }
    return st;
}

sjk_status sjk_cache_restore_memory(sjk_cache *c, const void *src, size_t src_nbytes,
                                    const uint8_t *fingerprint, char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!c || (!src && src_nbytes)) { set_err(err, err_cap, "no cache or source"); return SJK_ERR_PARAM; }
    source s = {-1, src, src_nbytes, 0};
    return restore_from(c, &s, fingerprint, err, err_cap);
}

sjk_status sjk_cache_check_memory(const sjk_cache *c, const void *src, size_t src_nbytes,
                                  const uint8_t *fingerprint, uint32_t *lengths, char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!c || (!src && src_nbytes)) { set_err(err, err_cap, "no cache or source"); return SJK_ERR_PARAM; }
    source s = {-1, src, src_nbytes, 0};
    /* pass 1 only: it reads c and writes nothing into it */
    return restore_pass((sjk_cache *)c, &s, fingerprint, 0, lengths, err, err_cap);
}

sjk_status sjk_cache_restore(sjk_cache *c, const char *path, const uint8_t *fingerprint, char *err,
                             size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!c || !path) { set_err(err, err_cap, "no cache or path"); return SJK_ERR_PARAM; }
    uint64_t size = 0;
    int fd = sjk_file_open_regular(path, &size); /* a FIFO is refused, never waited on */
    if (fd < 0) {
        int e = errno;
        set_err(err, err_cap, "%s: %s", path, fd == -2 ? "not a regular file" : strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    source s = {fd, NULL, size, 0};
    sjk_status st = restore_from(c, &s, fingerprint, err, err_cap);
    int e = errno;
    close(fd);
    errno = e;
    return st;
}

/* ---- inspecting without a cache ---------------------------------------------------- */

static void get_layer_conf(const uint8_t *p, sjk_layer_config *cf)
{
    memset(cf, 0, sizeof *cf);
    cf->kind = p[0]; cf->k_format = p[1]; cf->v_format = p[2]; cf->rotate = p[3];
    cf->bits_k = p[4]; cf->bits_v = p[5]; cf->body = p[6]; cf->balance = p[7];
    cf->staging = p[8]; cf->center = p[9];
    cf->sink = sjk_rd_u32le(p + 12);
    cf->tail_min = sjk_rd_u32le(p + 16);
    cf->tail_max = sjk_rd_u32le(p + 20);
    cf->rot_block = sjk_rd_u32le(p + 24);
}

#define IFAIL(st_, ...) do { set_err(err, err_cap, __VA_ARGS__); return (st_); } while (0)

sjk_status sjk_cache_file_inspect(const void *src, size_t src_nbytes, sjk_cache_file_info *info,
                                  sjk_layer_config *layers, size_t layers_cap, uint32_t *states,
                                  size_t states_cap, char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!info || (!src && src_nbytes)) IFAIL(SJK_ERR_PARAM, "no file or info");
    memset(info, 0, sizeof *info);
    const uint8_t *f = src;
    if (src_nbytes < 8 || memcmp(f, k_magic, 8)) IFAIL(SJK_ERR_FORMAT, "not a sjkvarn cache file (bad magic)");
    if (src_nbytes < HDR_NBYTES)
        IFAIL(SJK_ERR_CORRUPT, "cache file truncated inside its header (%zu bytes)", src_nbytes);
    info->file_version = sjk_rd_u32le(f + 8);
    info->record_version = sjk_rd_u32le(f + 16);
    info->writer_version = sjk_rd_u32le(f + 20);
    uint32_t *geo[] = {&info->n_layers, &info->n_kv_heads, &info->n_q_heads, &info->head_dim,
                       &info->max_pos, &info->n_seqs};
    for (int i = 0; i < 6; i++) *geo[i] = sjk_rd_u32le(f + 24 + 4 * i);
    info->n_sections = sjk_rd_u32le(f + 48);
    info->file_nbytes = sjk_rd_u32le(f + 56) | (uint64_t)sjk_rd_u32le(f + 60) << 32;
    memcpy(info->fingerprint, f + 64, SJK_FINGERPRINT_NBYTES);
    if (sjk_rd_u32le(f + 124) != sjk_crc32c(0, f, 124)) IFAIL(SJK_ERR_CORRUPT, "cache file header: checksum mismatch");
    if (info->file_version != SJK_CACHE_FILE_VERSION)
        IFAIL(SJK_ERR_FORMAT, "cache file version %u; this build reads version %u", info->file_version,
              SJK_CACHE_FILE_VERSION);
    if (info->record_version < 1 || info->record_version > SJK_RECORD_FORMAT_VERSION)
        IFAIL(SJK_ERR_FORMAT, "cache file holds record format %u; this build reads 1 to %u", info->record_version,
              SJK_RECORD_FORMAT_VERSION);
    if (sjk_rd_u32le(f + 12) != HDR_NBYTES) IFAIL(SJK_ERR_CORRUPT, "cache file header: bad header size");
    if (info->file_nbytes != src_nbytes)
        IFAIL(SJK_ERR_CORRUPT, "cache file is %zu bytes, its header says %llu (truncated or extended)", src_nbytes,
              (unsigned long long)info->file_nbytes);
    const uint64_t NL = info->n_layers, NS = info->n_seqs;
    if (!NL || !NS || NS * NL > UINT32_MAX - 2 || info->n_sections != 2 + NS * NL)
        IFAIL(SJK_ERR_CORRUPT, "cache file header: bad section count (%u for %u layers x %u sequences)",
              info->n_sections, info->n_layers, info->n_seqs);

    /* The sections: CONF, STAT, then DATA (seq, layer) seq-major. Every size is checked
     * against what is left of the file before it is used, so the walk stays inside src. */
    uint64_t off = HDR_NBYTES;
    const char *first_bad = NULL;
    uint32_t first_bad_index = 0;
    for (uint64_t k = 0; k < info->n_sections; k++) {
        const uint32_t tag = k == 0 ? TAG_CONF : k == 1 ? TAG_STAT : TAG_DATA;
        const uint32_t index = k < 2 ? 0 : (uint32_t)(k - 2);
        const char *name = k == 0 ? "CONF" : k == 1 ? "STAT" : "DATA";
        if (src_nbytes - off < SEC_HDR_NBYTES + SEC_CRC_NBYTES)
            IFAIL(SJK_ERR_CORRUPT, "%s section %u: file truncated", name, index);
        const uint8_t *h = f + off;
        uint64_t pn = sjk_rd_u32le(h + 8) | (uint64_t)sjk_rd_u32le(h + 12) << 32;
        if (sjk_rd_u32le(h) != tag || sjk_rd_u32le(h + 4) != index)
            IFAIL(SJK_ERR_CORRUPT, "%s section %u: bad section header", name, index);
        if (pn > src_nbytes - off - SEC_HDR_NBYTES - SEC_CRC_NBYTES)
            IFAIL(SJK_ERR_CORRUPT, "%s section %u: %llu payload bytes, beyond the end of the file", name, index,
                  (unsigned long long)pn);
        const uint64_t want = k == 0 ? NL * LAYER_CONF_NBYTES : k == 1 ? NS * NL * STATE_NBYTES : pn;
        if (pn != want)
            IFAIL(SJK_ERR_CORRUPT, "%s section: %llu payload bytes, expected %llu", name, (unsigned long long)pn,
                  (unsigned long long)want);
        const uint8_t *pl = h + SEC_HDR_NBYTES;
        uint32_t crc = sjk_crc32c(0, h, (size_t)(SEC_HDR_NBYTES + pn));
        if (crc == sjk_rd_u32le(pl + pn)) {
            info->n_sections_ok++;
        } else {
            info->n_sections_bad++;
            if (!first_bad) first_bad = name, first_bad_index = index;
        }
        if (k == 0 && layers)
            for (uint64_t l = 0; l < NL && l < layers_cap; l++) get_layer_conf(pl + l * LAYER_CONF_NBYTES, &layers[l]);
        for (uint64_t l = 0; k == 0 && l < NL; l++) {
            const uint8_t *q = pl + l * LAYER_CONF_NBYTES;
            const uint32_t need = conf_record_version(q[0], q[4], q[5], q[6]);
            if (need > info->record_version)
                IFAIL(SJK_ERR_CORRUPT, "cache file says record format %u but layer %llu has %s (format %u)",
                      info->record_version, (unsigned long long)l,
                      need == 5 ? "the trellis body on 128-entry tables"
                      : need == 4 ? "a trellis body on int8-grid codebooks"
                      : need == 3 ? "the real-data trellis body" : "a body above 4 bits", need);
        }
        if (k == 1 && states)
            for (uint64_t i = 0; i < NS * NL && i < states_cap / 2; i++) {
                states[2 * i] = sjk_rd_u32le(pl + i * STATE_NBYTES);
                states[2 * i + 1] = sjk_rd_u32le(pl + i * STATE_NBYTES + 4);
            }
        off += SEC_HDR_NBYTES + pn + SEC_CRC_NBYTES;
    }
    if (off != src_nbytes) IFAIL(SJK_ERR_CORRUPT, "cache file has %llu trailing bytes", (unsigned long long)(src_nbytes - off));
    if (first_bad)
        IFAIL(SJK_ERR_CORRUPT, "%u of %u sections fail their checksum (the first: %s section %u)", info->n_sections_bad,
              info->n_sections, first_bad, first_bad_index);
    return SJK_OK;
}
