/* session_file.c — save and resume a session's KV state (sjkh_session_save / _load).
 *
 * A session file (docs/FORMAT.md "## Session files") is a small host container around a
 * libsjkvarn cache file:
 *
 *   | header 256 B (CRC-32C at 252) | host layers section (+ CRC) | cache file (own CRCs) |
 *
 * header: magic "SJKHSESS", version, n_past, the session's shape (layers, n_ctx, n_batch,
 * the window type, the KV configuration string), the pending token, the model fingerprint, the sizes of
 * the two parts. The host section holds, for each host-held layer (sliding-window rings,
 * or every growing layer with "host-f16"), its length and its live slots (fp16, or q8_0
 * blocks for the window layers of a --window q8_0 session). The cache
 * part is exactly what sjk_cache_save writes, with the same fingerprint.
 *
 * Load checks everything before it changes anything: header CRC and shape, the host
 * section's CRC and bounds, then sjk_cache_restore_memory (which itself validates fully
 * before touching the cache); only then are the host rows and lengths copied in. Writes
 * are atomic like sjk_cache_save (temporary file, fsync, rename, directory fsync).
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

#include "hcommon.h"
#include "kv.h"
#include "model.h"

#define SESS_HDR_NBYTES 256
#define SESS_VERSION 2 /* 2: the window type at offset 36 (version 1 files: f16, still read) */
#define KVSTR_NBYTES 128

static const uint8_t k_sess_magic[8] = {'S', 'J', 'K', 'H', 'S', 'E', 'S', 'S'};

_Static_assert(SESS_HDR_NBYTES == 8 + 4 * 8 + 8 + 8 + SJK_FINGERPRINT_NBYTES + KVSTR_NBYTES + 36 + 4,
               "session header layout");

static void serr(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* 32 bytes that identify the model file: CRC-32C of the hyper-parameters, of the tensor
 * table (names, types, shapes, offsets), of the file size, and of the first 64 KiB of
 * five tensors spread over the file. Not cryptographic: it catches the wrong model, not
 * a forged one. */
void sjkh_model_fingerprint(const sjkh_model *m, uint8_t out[SJK_FINGERPRINT_NBYTES])
{
    const sjkh_model_info *in = sjkh_model_get_info(m);
    const sjkh_gguf *g = sjkh_model_gguf(m);
    uint32_t f[8] = {0};
    uint32_t hp[9] = {in->arch, in->n_layers, in->n_embd, in->n_ff, in->n_head, in->n_head_kv, in->head_dim,
                      in->n_vocab, in->n_ctx_train};
    f[0] = sjk_crc32c(0, hp, sizeof hp);
    int64_t nt = sjkh_gguf_n_tensors(g);
    for (int64_t i = 0; i < nt; i++) {
        const sjkh_tensor *t = sjkh_gguf_tensor(g, i);
        f[1] = sjk_crc32c(f[1], t->name, strlen(t->name));
        f[1] = sjk_crc32c(f[1], &t->type, sizeof t->type);
        f[1] = sjk_crc32c(f[1], t->ne, sizeof t->ne);
        f[1] = sjk_crc32c(f[1], &t->file_offset, sizeof t->file_offset);
    }
    uint64_t fsz = sjkh_gguf_file_nbytes(g);
    f[2] = sjk_crc32c(0, &fsz, sizeof fsz);
    for (int k = 0; k < 5 && nt > 0; k++) {
        const sjkh_tensor *t = sjkh_gguf_tensor(g, (int64_t)k * (nt - 1) / 4);
        f[3 + k] = sjk_crc32c(0, t->data, t->nbytes < 65536 ? t->nbytes : 65536);
    }
    for (int i = 0; i < 8; i++) sjkh_wr_u32le(out + 4 * i, f[i]);
}

/* Live slots of a host layer: positions 0..len-1 live in slots (pos % rows). */
static size_t host_live_nbytes(uint32_t len, size_t nbytes, size_t row_nbytes)
{
    size_t rows = nbytes / row_nbytes;
    return (len < rows ? len : rows) * row_nbytes;
}

typedef struct layer_view {
    uint32_t *len;
    uint8_t *k, *v;
    size_t nbytes, row_nbytes;
    sjk_cache *cache;
} layer_view;

static sjk_status view(sjkh_session *s, uint32_t l, layer_view *lv)
{
    return sjkh_kv_layer_storage(s->kv, l, &lv->len, &lv->k, &lv->v, &lv->nbytes, &lv->row_nbytes, &lv->cache);
}

static void put_header(const sjkh_session *s, int32_t pending, const uint8_t *fp, uint64_t host_nbytes,
                       uint64_t cache_nbytes, uint8_t *h)
{
    const sjkh_model_info *in = sjkh_model_get_info(s->m);
    memset(h, 0, SESS_HDR_NBYTES);
    memcpy(h, k_sess_magic, 8);
    sjkh_wr_u32le(h + 8, SESS_VERSION);
    sjkh_wr_u32le(h + 12, SESS_HDR_NBYTES);
    sjkh_wr_u32le(h + 16, s->n_past);
    sjkh_wr_u32le(h + 20, in->n_layers);
    sjkh_wr_u32le(h + 24, s->p.n_ctx);
    sjkh_wr_u32le(h + 28, s->p.n_batch);
    sjkh_wr_u32le(h + 32, (uint32_t)pending);
    sjkh_wr_u32le(h + 36, s->p.window_type);
    sjkh_wr_u32le(h + 40, (uint32_t)host_nbytes);
    sjkh_wr_u32le(h + 44, (uint32_t)(host_nbytes >> 32));
    sjkh_wr_u32le(h + 48, (uint32_t)cache_nbytes);
    sjkh_wr_u32le(h + 52, (uint32_t)(cache_nbytes >> 32));
    memcpy(h + 56, fp, SJK_FINGERPRINT_NBYTES);
    snprintf((char *)h + 88, KVSTR_NBYTES, "%s", s->kv_str);
    sjkh_wr_u32le(h + 252, sjk_crc32c(0, h, 252));
}

static int write_fd_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t r = write(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        b += r;
        n -= (size_t)r;
    }
    return 1;
}

sjk_status sjkh_session_save_check(const char *path, char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!path) return SJK_ERR_PARAM;
    const char *why = sjk_file_target_problem(path);
    if (why) {
        serr(err, err_cap, "%s: %s", path, why);
        return SJK_ERR_PARAM;
    }
    if (sjk_tmp_probe(path) != 0) {
        int e = errno;
        serr(err, err_cap, "%s: cannot write there: %s", path, strerror(e));
        errno = e;
        return e == ENAMETOOLONG ? SJK_ERR_PARAM : SJK_ERR_IO;
    }
    return SJK_OK;
}

sjk_status sjkh_session_save(sjkh_session *s, const char *path, int32_t pending_token, char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!s || !path) return SJK_ERR_PARAM;
    if (s->failed) {
        serr(err, err_cap, "the session's last feed failed in the middle of a chunk; reset it first");
        return SJK_ERR_PARAM;
    }
    const sjkh_model_info *in = sjkh_model_get_info(s->m);
    uint8_t fp[SJK_FINGERPRINT_NBYTES];
    sjkh_model_fingerprint(s->m, fp);
    /* sizes: host section = per host layer (u32 len + K live + V live), + CRC */
    uint64_t host_nbytes = 4;
    sjk_cache *cache = NULL;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        layer_view lv;
        if (view(s, l, &lv)) return SJK_ERR_PARAM;
        if (lv.cache) cache = lv.cache;
        if (!lv.k) continue;
        host_nbytes += 4 + 2 * (uint64_t)host_live_nbytes(*lv.len, lv.nbytes, lv.row_nbytes);
    }
    size_t cache_nbytes = 0;
    uint8_t *cbuf = NULL;
    if (cache) {
        sjk_cache_save_memory(cache, fp, NULL, 0, &cache_nbytes);
        cbuf = malloc(cache_nbytes ? cache_nbytes : 1);
        if (!cbuf) { serr(err, err_cap, "out of memory"); return SJK_ERR_NOMEM; }
        sjk_cache_save_memory(cache, fp, cbuf, cache_nbytes, &cache_nbytes);
    }
    char tmp[PATH_MAX];
    sjk_status cst = sjkh_session_save_check(path, err, err_cap); /* never replace a device or FIFO */
    if (cst) {
        free(cbuf);
        return cst;
    }
    int fd = sjk_tmp_create(path, tmp, sizeof tmp); /* locked until closed: common/tmpfile.h */
    if (fd < 0) {
        int e = errno;
        serr(err, err_cap, "%s: cannot create a temporary file: %s", path, strerror(e));
        free(cbuf);
        errno = e;
        return e == ENAMETOOLONG ? SJK_ERR_PARAM : SJK_ERR_IO;
    }
    uint8_t h[SESS_HDR_NBYTES];
    put_header(s, pending_token, fp, host_nbytes, cache_nbytes, h);
    int ok = write_fd_all(fd, h, sizeof h);
    uint32_t crc = 0;
    for (uint32_t l = 0; ok && l < in->n_layers; l++) {
        layer_view lv;
        view(s, l, &lv);
        if (!lv.k) continue;
        uint8_t b[4];
        sjkh_wr_u32le(b, *lv.len);
        size_t live = host_live_nbytes(*lv.len, lv.nbytes, lv.row_nbytes);
        crc = sjk_crc32c(crc, b, 4);
        crc = sjk_crc32c(crc, lv.k, live);
        crc = sjk_crc32c(crc, lv.v, live);
        ok = write_fd_all(fd, b, 4) && write_fd_all(fd, lv.k, live) && write_fd_all(fd, lv.v, live);
    }
    uint8_t cb[4];
    sjkh_wr_u32le(cb, crc);
    ok = ok && write_fd_all(fd, cb, 4) && (!cache_nbytes || write_fd_all(fd, cbuf, cache_nbytes));
    int e = errno;
    ok = ok && fsync(fd) == 0;
    if (!ok) e = errno;
    /* rename while still holding the lock, so a concurrent sweep never takes our file */
    if (ok && rename(tmp, path)) { ok = 0; e = errno; }
    if (!ok) unlink(tmp);
    if (close(fd) && ok) { ok = 0; e = errno; } /* after fsync: the data is on disk */
    free(cbuf);
    if (!ok) {
        serr(err, err_cap, "%s: write failed: %s", path, strerror(e));
        errno = e;
        return SJK_ERR_IO;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    sjk_tmp_sweep(path); /* temporary files of saves killed earlier (common/tmpfile.h) */
    return SJK_OK;
}

static uint8_t *read_whole(const char *path, size_t *n, char *err, size_t err_cap, sjk_status *st)
{
    uint64_t size = 0;
    int fd = sjk_file_open_regular(path, &size); /* a FIFO is refused, never waited on */
    if (fd < 0 || size > SIZE_MAX - 1) {
        serr(err, err_cap, "%s: %s", path, fd == -1 ? strerror(errno) : fd == -2 ? "not a regular file" : "too large");
        if (fd >= 0) close(fd);
        *st = SJK_ERR_IO;
        return NULL;
    }
    struct stat sb;
    sb.st_size = (off_t)size;
    uint8_t *b = malloc(sb.st_size ? (size_t)sb.st_size : 1);
    if (!b) { close(fd); *st = SJK_ERR_NOMEM; serr(err, err_cap, "out of memory"); return NULL; }
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, b + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return b;
}

#define LFAIL(st_, ...) do { serr(err, err_cap, __VA_ARGS__); st = (st_); goto out; } while (0)

/* Record format 4 changed what the suffixes `t` and `tr` name: the trellis bodies on
 * int8-grid codebooks, the float tables becoming `tf` and `trf` (docs/FORMAT.md). A file
 * whose cache part says record format 1 to 3 was saved while `t` / `tr` (and the
 * suffix-less trellis widths, sj:3/3) named the float tables, so its --kv is read with
 * that meaning: it matches this session's when both parse to the same layers once the
 * saved string's grid bodies are taken as the float ones. *legacy_grid is set when the
 * saved string names a trellis body whose meaning changed (for the error's hint). */
static int kv_matches(const char *saved, const char *mine, uint32_t rec_version, uint32_t n_layers, int *legacy_grid)
{
    *legacy_grid = 0;
    if (rec_version >= 4 || n_layers == 0 || n_layers > 256) return !strcmp(saved, mine);
    sjk_layer_config a[256], b[256];
    if (sjk_cache_config_parse(saved, n_layers, a, NULL, 0) != SJK_OK ||
        sjk_cache_config_parse(mine, n_layers, b, NULL, 0) != SJK_OK)
        return !strcmp(saved, mine); /* "host-f16" and the like: no trellis body */
    for (uint32_t l = 0; l < n_layers; l++) {
        if (a[l].body == SJK_BODY_TRELLIS_I8) a[l].body = SJK_BODY_TRELLIS, *legacy_grid = 1;
        else if (a[l].body == SJK_BODY_TRELLIS_REAL_I8) a[l].body = SJK_BODY_TRELLIS_REAL, *legacy_grid = 1;
    }
    return !memcmp(a, b, n_layers * sizeof a[0]);
}

sjk_status sjkh_session_load(sjkh_session *s, const char *path, int32_t *pending_token, char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!s || !path) return SJK_ERR_PARAM;
    sjk_status st = SJK_OK;
    size_t n = 0;
    uint8_t *f = read_whole(path, &n, err, err_cap, &st);
    if (!f) return st;
    const sjkh_model_info *in = sjkh_model_get_info(s->m);
    if (n < 8 || memcmp(f, k_sess_magic, 8)) LFAIL(SJK_ERR_FORMAT, "%s: not a sjkvarn session file", path);
    if (n < SESS_HDR_NBYTES) LFAIL(SJK_ERR_CORRUPT, "%s: truncated header", path);
    if (sjkh_rd_u32le(f + 252) != sjk_crc32c(0, f, 252)) LFAIL(SJK_ERR_CORRUPT, "%s: header checksum mismatch", path);
    uint32_t version = sjkh_rd_u32le(f + 8);
    if (version != 1 && version != SESS_VERSION)
        LFAIL(SJK_ERR_FORMAT, "%s: session file version %u; this build reads 1 and %u", path, version, SESS_VERSION);
    uint8_t fp[SJK_FINGERPRINT_NBYTES];
    sjkh_model_fingerprint(s->m, fp);
    if (memcmp(f + 56, fp, sizeof fp)) LFAIL(SJK_ERR_MISMATCH, "%s: saved with another model", path);
    if (sjkh_rd_u32le(f + 20) != in->n_layers || sjkh_rd_u32le(f + 24) != s->p.n_ctx ||
        sjkh_rd_u32le(f + 28) != s->p.n_batch)
        LFAIL(SJK_ERR_MISMATCH, "%s: saved with context %u, batch %u; this session has %u, %u", path,
              sjkh_rd_u32le(f + 24), sjkh_rd_u32le(f + 28), s->p.n_ctx, s->p.n_batch);
    if (memchr(f + 88, 0, KVSTR_NBYTES) == NULL) LFAIL(SJK_ERR_CORRUPT, "%s: --kv string not terminated", path);
    {
        /* the cache part's record format (a cache file's header, offset 16), if there is one */
        const uint64_t hn = sjkh_rd_u32le(f + 40) | (uint64_t)sjkh_rd_u32le(f + 44) << 32;
        const uint64_t cn = sjkh_rd_u32le(f + 48) | (uint64_t)sjkh_rd_u32le(f + 52) << 32;
        const uint32_t rv = cn >= 20 && hn <= n - SESS_HDR_NBYTES && cn <= n - SESS_HDR_NBYTES - hn
                                ? sjkh_rd_u32le(f + SESS_HDR_NBYTES + hn + 16) : 4;
        int legacy = 0;
        if (!kv_matches((const char *)f + 88, s->kv_str, rv, in->n_layers, &legacy))
            LFAIL(SJK_ERR_MISMATCH, "%s: saved with --kv %.*s; this session uses %s%s", path, 64, (const char *)f + 88,
                  s->kv_str,
                  legacy ? " (saved before record format 4, when `t` and `tr` named the float-table trellis bodies: "
                           "`tf` and `trf` now)" : "");
    }
    uint32_t wt = version == 1 ? SJKH_WINDOW_F16 : sjkh_rd_u32le(f + 36);
    if (wt != s->p.window_type) {
        const char *wn = sjkh_window_type_name(wt);
        LFAIL(SJK_ERR_MISMATCH, "%s: saved with --window %s; this session uses %s", path, wn ? wn : "(unknown)",
              sjkh_window_type_name(s->p.window_type));
    }
    uint32_t n_past = sjkh_rd_u32le(f + 16);
    if (n_past > s->p.n_ctx) LFAIL(SJK_ERR_CORRUPT, "%s: n_past %u beyond the context", path, n_past);
    uint64_t host_nbytes = sjkh_rd_u32le(f + 40) | (uint64_t)sjkh_rd_u32le(f + 44) << 32;
    uint64_t cache_nbytes = sjkh_rd_u32le(f + 48) | (uint64_t)sjkh_rd_u32le(f + 52) << 32;
    if (host_nbytes < 4 || host_nbytes > n - SESS_HDR_NBYTES || cache_nbytes != n - SESS_HDR_NBYTES - host_nbytes)
        LFAIL(SJK_ERR_CORRUPT, "%s: sizes do not add up (truncated?)", path);
    /* host section: walk it once to check bounds and CRC, copy later */
    const uint8_t *hs = f + SESS_HDR_NBYTES;
    size_t at = 0;
    uint32_t crc = 0;
    sjk_cache *cache = NULL;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        layer_view lv;
        view(s, l, &lv);
        if (lv.cache) cache = lv.cache;
        if (!lv.k) continue;
        if (at + 4 > host_nbytes - 4) LFAIL(SJK_ERR_CORRUPT, "%s: host section truncated", path);
        uint32_t len = sjkh_rd_u32le(hs + at);
        if (len != n_past) LFAIL(SJK_ERR_CORRUPT, "%s: layer %u length %u, n_past %u", path, l, len, n_past);
        size_t live = host_live_nbytes(len, lv.nbytes, lv.row_nbytes);
        if (2 * (uint64_t)live > host_nbytes - 4 - at - 4) LFAIL(SJK_ERR_CORRUPT, "%s: host section truncated", path);
        crc = sjk_crc32c(crc, hs + at, 4 + 2 * live);
        at += 4 + 2 * live;
    }
    if (at != host_nbytes - 4 || sjkh_rd_u32le(hs + at) != crc)
        LFAIL(SJK_ERR_CORRUPT, "%s: host section checksum mismatch", path);
    if ((cache != NULL) != (cache_nbytes != 0)) LFAIL(SJK_ERR_MISMATCH, "%s: cache part does not match --kv", path);
    int32_t pend = (int32_t)sjkh_rd_u32le(f + 32);
    if (pend < -1 || (pend >= 0 && (uint32_t)pend >= in->n_vocab))
        LFAIL(SJK_ERR_CORRUPT, "%s: pending token %d outside the vocabulary (%u)", path, pend, in->n_vocab);
    /* every restored value is checked the same way: the cache part refuses non-finite
     * sink values and record scales; the host rows are checked here */
    at = 0;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        layer_view lv;
        view(s, l, &lv);
        if (!lv.k) continue;
        size_t live = host_live_nbytes(n_past, lv.nbytes, lv.row_nbytes);
        int q8 = lv.row_nbytes != (size_t)in->n_head_kv * in->head_dim * 2; /* else f16 rows */
        const uint8_t *rows = hs + at + 4;
        for (size_t i = 0; i < 2 * live; i += q8 ? 34 : 2) /* q8_0 block: fp16 scale + 32 int8 */
            if ((sjkh_rd_u16le(rows + i) & 0x7C00u) == 0x7C00u)
                LFAIL(SJK_ERR_CORRUPT, "%s: layer %u holds a non-finite %s", path, l, q8 ? "q8_0 block scale" : "value");
        at += 4 + 2 * live;
    }
    if (cache) {
        /* validate the cache part and its lengths before anything is changed */
        char cerr[200];
        uint32_t ncl = 0, cn;
        while (sjk_cache_length(cache, 0, ncl, &cn, NULL) == SJK_OK) ncl++;
        uint32_t *lens = calloc(ncl ? ncl : 1, sizeof *lens);
        if (!lens) LFAIL(SJK_ERR_NOMEM, "out of memory");
        st = sjk_cache_check_memory(cache, f + SESS_HDR_NBYTES + host_nbytes, cache_nbytes, fp, lens, cerr,
                                    sizeof cerr);
        uint32_t bad = ncl;
        for (uint32_t cl = 0; st == SJK_OK && cl < ncl && bad == ncl; cl++)
            if (lens[cl] != n_past) bad = cl;
        uint32_t bad_n = bad < ncl ? lens[bad] : 0;
        free(lens);
        if (st) LFAIL(st, "%s: %s", path, cerr);
        if (bad < ncl)
            LFAIL(SJK_ERR_CORRUPT, "%s: cache layer %u holds %u positions, n_past %u", path, bad, bad_n, n_past);
        st = sjk_cache_restore_memory(cache, f + SESS_HDR_NBYTES + host_nbytes, cache_nbytes, fp, cerr, sizeof cerr);
        if (st) { /* only if the bytes changed under us: they are in our own buffer */
            sjkh_kv_reset(s->kv);
            s->n_past = 0;
            s->failed = SJK_OK;
            LFAIL(st, "%s: %s (session reset)", path, cerr);
        }
    }
    /* everything checked: copy the host rows and set every length */
    at = 0;
    for (uint32_t l = 0; l < in->n_layers; l++) {
        layer_view lv;
        view(s, l, &lv);
        *lv.len = n_past;
        if (!lv.k) continue;
        size_t live = host_live_nbytes(n_past, lv.nbytes, lv.row_nbytes);
        memcpy(lv.k, hs + at + 4, live);
        memcpy(lv.v, hs + at + 4 + live, live);
        at += 4 + 2 * live;
    }
    s->n_past = n_past;
    s->failed = SJK_OK;
    if (pending_token) *pending_token = pend;
out:
    free(f);
    return st;
}

sjk_status sjkh_session_file_inspect(const void *data, size_t n, sjkh_session_file_info *info, char *err,
                                     size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!info || (!data && n)) return SJK_ERR_PARAM;
    memset(info, 0, sizeof *info);
    info->pending_token = -1;
    const uint8_t *f = data;
    if (n < 8 || memcmp(f, k_sess_magic, 8)) {
        serr(err, err_cap, "not a sjkvarn session file");
        return SJK_ERR_FORMAT;
    }
    if (n < SESS_HDR_NBYTES) {
        serr(err, err_cap, "truncated header (%zu bytes)", n);
        return SJK_ERR_CORRUPT;
    }
    info->version = sjkh_rd_u32le(f + 8);
    info->n_past = sjkh_rd_u32le(f + 16);
    info->n_layers = sjkh_rd_u32le(f + 20);
    info->n_ctx = sjkh_rd_u32le(f + 24);
    info->n_batch = sjkh_rd_u32le(f + 28);
    info->pending_token = (int32_t)sjkh_rd_u32le(f + 32);
    info->window_type = info->version == 1 ? SJKH_WINDOW_F16 : sjkh_rd_u32le(f + 36);
    info->host_nbytes = sjkh_rd_u32le(f + 40) | (uint64_t)sjkh_rd_u32le(f + 44) << 32;
    info->cache_nbytes = sjkh_rd_u32le(f + 48) | (uint64_t)sjkh_rd_u32le(f + 52) << 32;
    memcpy(info->fingerprint, f + 56, SJK_FINGERPRINT_NBYTES);
    memcpy(info->kv, f + 88, sizeof info->kv - 1);
    info->kv[sizeof info->kv - 1] = 0;
    info->header_ok = sjkh_rd_u32le(f + 252) == sjk_crc32c(0, f, 252);
    if (!info->header_ok) {
        serr(err, err_cap, "header checksum mismatch");
        return SJK_ERR_CORRUPT;
    }
    if (info->version != 1 && info->version != SESS_VERSION) {
        serr(err, err_cap, "session file version %u; this build reads 1 and %u", info->version, SESS_VERSION);
        return SJK_ERR_FORMAT;
    }
    if (!memchr(f + 88, 0, KVSTR_NBYTES)) {
        serr(err, err_cap, "the KV configuration string is not terminated");
        return SJK_ERR_CORRUPT;
    }
    const uint64_t rest = n - SESS_HDR_NBYTES;
    if (info->host_nbytes < 4 || info->host_nbytes > rest || info->cache_nbytes != rest - info->host_nbytes) {
        serr(err, err_cap, "sizes do not add up: host %llu + cache %llu bytes after the header, the file has %llu",
             (unsigned long long)info->host_nbytes, (unsigned long long)info->cache_nbytes, (unsigned long long)rest);
        return SJK_ERR_CORRUPT;
    }
    info->cache_offset = SESS_HDR_NBYTES + info->host_nbytes;
    const uint8_t *hs = f + SESS_HDR_NBYTES;
    info->host_ok = sjkh_rd_u32le(hs + info->host_nbytes - 4) == sjk_crc32c(0, hs, (size_t)info->host_nbytes - 4);
    if (!info->host_ok) {
        serr(err, err_cap, "host section checksum mismatch");
        return SJK_ERR_CORRUPT;
    }
    return SJK_OK;
}
