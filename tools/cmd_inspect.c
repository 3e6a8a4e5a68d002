/* cmd_inspect.c — `sjkvarn inspect FILE [-m MODEL] [--json]`: what a file is and whether
 * it is intact, for the three kinds of file the project reads.
 *
 *   GGUF model    architecture, layers (which grow with the context, which slide, which
 *                 are recurrent), heads, head dim, context, tensor types with counts and
 *                 bytes, tokenizer, and whether this host can run it (and why not): the
 *                 same loader `run` uses (sjkh_model_load + sjkh_tokenizer_from_gguf).
 *   session file  (`run --save`, docs/FORMAT.md "Session files") its header, the host
 *                 section's checksum and its cache part as below; with -m MODEL also the
 *                 fingerprint against that model and a real load into a session of the
 *                 saved shape (sjkh_session_load, every check the loader makes).
 *   cache file    (sjk_cache_save, docs/FORMAT.md "Cache files") version, geometry,
 *                 fingerprint, every layer's configuration and positions per region,
 *                 every section's checksum (sjk_cache_file_inspect), then a restore into a
 *                 cache created with the file's own parameters (sjk_cache_restore_memory:
 *                 sizes, invariants, record scales), when that cache fits in 1 GiB.
 *
 * The file is mapped read-only and every reader it goes through checks its bounds, so a
 * hostile file gives an error line, never a crash (fuzz/fuzz_cache_file.c and
 * tests/test_inspect.c feed it truncated, patched and random bytes).
 * Exit status: 0 the file is intact (a GGUF the host cannot run is intact), 1 a check
 * failed (checksum, truncation, version, another model), 2 bad arguments, a file that
 * cannot be opened or is none of the three kinds. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kv_auto.h"
#include "sjkhost.h"
#include "sjkplan.h"
#include "sjkvarn.h"

#define PROG "sjkvarn inspect"
#define RESTORE_LIMIT ((size_t)1 << 30) /* largest cache the restore check creates */
#define MAX_LAYER_ROWS 64               /* layer lines printed per sequence (text) */

static void usage(FILE *f)
{
    fprintf(f, "usage: sjkvarn inspect FILE [-m MODEL] [--json]\n"
               "\n"
               "What FILE is and whether it is intact: a GGUF model (architecture, layers and\n"
               "which grow with the context, heads, head dim, context, tensor types, tokenizer,\n"
               "whether this host runs it), a session file of `run --save` or a cache file\n"
               "(version, fingerprint, configuration, positions per region, every checksum,\n"
               "and a restore into a cache of the same shape).\n"
               "\n"
               "  -m, --model M  for a session file: check it against this model (name or\n"
               "                 .gguf) and load it into a session of the saved shape\n"
               "  --json         JSON on stdout instead of text\n"
               "\n"
               "Exit status: 0 intact, 1 a check failed, 2 bad arguments or not a known file.\n");
}

/* ---- output helpers --------------------------------------------------------------- */

static void json_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}
static void json_cstr(const char *s) { json_str(s, strlen(s)); }

/* Printable copy of file bytes for a text line (control bytes become '?'). */
static void clean(char *dst, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) dst[o++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    dst[o] = 0;
}

static void hex(char *dst, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) sprintf(dst + 2 * i, "%02x", b[i]);
}

static void version_str(char *dst, size_t cap, uint32_t v)
{
    snprintf(dst, cap, "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
}

/* ---- the file --------------------------------------------------------------------- */

typedef struct mapped {
    const uint8_t *p;
    size_t n;
} mapped;

static int map_file(const char *path, mapped *m)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "%s: %s: %s\n", PROG, path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return 0;
    }
    m->n = (size_t)sb.st_size;
    m->p = NULL;
    if (m->n) {
        void *p = mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "%s: %s: mmap: %s\n", PROG, path, strerror(errno));
            close(fd);
            return 0;
        }
        m->p = p;
    }
    close(fd);
    return 1;
}

/* ---- cache files (also the cache part of a session) ------------------------------- */

typedef struct cache_report {
    sjk_status st;                /* of sjk_cache_file_inspect */
    char err[256];
    sjk_cache_file_info info;
    sjk_layer_config *layers;     /* [n_layers] when the CONF section was read */
    uint32_t *states;             /* [n_seqs][n_layers][2] */
    size_t n_layers_read, n_states_read;
    int restore;                  /* 1 ok, 0 not tried, -1 failed */
    char restore_msg[320];
} cache_report;

static void cache_report_free(cache_report *r)
{
    free(r->layers);
    free(r->states);
}

/* Reads the cache file at p[0..n) into r, then restores it into a cache of its own shape
 * when the file itself passed. */
static void cache_examine(const uint8_t *p, size_t n, cache_report *r)
{
    memset(r, 0, sizeof *r);
    /* Header first, to size the arrays: their sections must fit in the file, which bounds
     * what a hostile header can make us allocate. */
    r->st = sjk_cache_file_inspect(p, n, &r->info, NULL, 0, NULL, 0, r->err, sizeof r->err);
    const uint64_t NL = r->info.n_layers, NS = r->info.n_seqs;
    if (NL && NL * 32 <= n) r->layers = calloc((size_t)NL, sizeof *r->layers);
    if (NL && NS && NS * NL * 8 <= n) r->states = calloc((size_t)(NS * NL * 2), sizeof *r->states);
    if (r->layers || r->states) {
        r->st = sjk_cache_file_inspect(p, n, &r->info, r->layers, r->layers ? (size_t)NL : 0, r->states,
                                       r->states ? (size_t)(NS * NL * 2) : 0, r->err, sizeof r->err);
        /* the arrays hold what the walk reached: CONF and STAT come first */
        if (r->info.n_sections_ok + r->info.n_sections_bad >= 1 && r->layers) r->n_layers_read = (size_t)NL;
        if (r->info.n_sections_ok + r->info.n_sections_bad >= 2 && r->states) r->n_states_read = (size_t)(NS * NL);
    }
    if (r->st != SJK_OK || !r->layers) return;
    sjk_cache_params cp = sjk_cache_params_default();
    cp.n_layers = r->info.n_layers;
    cp.n_kv_heads = r->info.n_kv_heads;
    cp.n_q_heads = r->info.n_q_heads;
    cp.head_dim = r->info.head_dim;
    cp.max_pos = r->info.max_pos;
    cp.n_seqs = r->info.n_seqs;
    cp.max_q_rows = 1;
    cp.n_threads = 1;
    cp.layers = r->layers;
    const char *bad = NULL;
    size_t need = 0;
    sjk_status st = sjk_cache_params_validate(&cp, &bad);
    if (st != SJK_OK) {
        r->restore = -1;
        snprintf(r->restore_msg, sizeof r->restore_msg, "the file's parameters are not a valid cache (%s)",
                 bad ? bad : "?");
        return;
    }
    if ((st = sjk_cache_estimate(&cp, &need)) != SJK_OK || need > RESTORE_LIMIT) {
        char sz[32];
        sjkh_format_size(need, sz, sizeof sz);
        snprintf(r->restore_msg, sizeof r->restore_msg, "skipped: a cache of this shape needs %s (limit 1 GiB)",
                 st == SJK_OK ? sz : sjk_status_str(st));
        return;
    }
    sjk_cache *c = NULL;
    if ((st = sjk_cache_create(&cp, &c)) != SJK_OK) {
        snprintf(r->restore_msg, sizeof r->restore_msg, "skipped: cannot create a cache of this shape: %s",
                 sjk_status_str(st));
        return;
    }
    char e[256];
    st = sjk_cache_restore_memory(c, p, n, r->info.fingerprint, e, sizeof e);
    sjk_cache_free(c);
    r->restore = st == SJK_OK ? 1 : -1;
    if (st == SJK_OK)
        snprintf(r->restore_msg, sizeof r->restore_msg, "ok (restored into a cache of the same shape)");
    else
        snprintf(r->restore_msg, sizeof r->restore_msg, "failed: %s", e);
}

static int cache_ok(const cache_report *r) { return r->st == SJK_OK && r->restore >= 0; }

/* The positions of one (seq, layer) by region. */
typedef struct regions {
    uint32_t n, b, sink, body, records, ring;
    int valid;
} regions;

static regions layer_regions(const sjk_layer_config *cf, uint32_t n, uint32_t b)
{
    regions g = {n, b, 0, 0, 0, 0, 1};
    if (cf->kind == SJK_KIND_UNIFORM) {
        g.ring = n; /* every position is one row */
        g.valid = b == 0;
        return g;
    }
    g.sink = n < cf->sink ? n : cf->sink;
    if (b < cf->sink || (b > cf->sink && b > n)) {
        g.valid = 0;
        return g;
    }
    g.body = b - cf->sink;
    g.records = g.body / SJK_GROUP;
    g.ring = n > b ? n - b : 0;
    return g;
}

static void layer_name(const sjk_layer_config *cf, char *dst, size_t cap)
{
    if (sjk_layer_config_str(cf, dst, cap) != SJK_OK) snprintf(dst, cap, "(kind %u)", cf->kind);
}

static void cache_print_text(const cache_report *r, const char *indent)
{
    const sjk_cache_file_info *in = &r->info;
    char wv[32], fp[2 * SJK_FINGERPRINT_NBYTES + 1];
    version_str(wv, sizeof wv, in->writer_version);
    hex(fp, in->fingerprint, SJK_FINGERPRINT_NBYTES);
    printf("%sversion:     cache file version %u, record format %u, written by sjkvarn %s\n", indent,
           in->file_version, in->record_version, wv);
    printf("%sshape:       %u layer(s) x %u KV head(s) (%u query), head dim %u, max_pos %u, %u sequence(s)\n", indent,
           in->n_layers, in->n_kv_heads, in->n_q_heads, in->head_dim, in->max_pos, in->n_seqs);
    printf("%sfingerprint: %s\n", indent, fp);
    if (r->st == SJK_OK)
        printf("%schecksums:   all %u verified (header and %u sections)\n", indent, in->n_sections + 1, in->n_sections);
    else
        printf("%schecksums:   FAILED: %s (%u sections verified, %u bad)\n", indent, r->err, in->n_sections_ok,
               in->n_sections_bad);
    if (r->n_layers_read) {
        printf("%slayers:      positions per region (sink fp16 | sealed body, records | ring/tail)\n", indent);
        size_t shown = 0;
        for (uint32_t s = 0; s < in->n_seqs && r->n_states_read; s++)
            for (uint32_t l = 0; l < in->n_layers; l++) {
                if (shown++ >= MAX_LAYER_ROWS) continue;
                char name[96];
                layer_name(&r->layers[l], name, sizeof name);
                size_t i = (size_t)s * in->n_layers + l;
                regions g = layer_regions(&r->layers[l], r->states[2 * i], r->states[2 * i + 1]);
                printf("%s  seq %u layer %u  %-24s N %u: ", indent, s, l, name, g.n);
                if (!g.valid) printf("body end %u is not valid for this layer\n", g.b);
                else if (r->layers[l].kind == SJK_KIND_UNIFORM) printf("%u rows\n", g.ring);
                else printf("sink %u | body %u (%u records) | ring %u\n", g.sink, g.body, g.records, g.ring);
            }
        if (shown > MAX_LAYER_ROWS) printf("%s  ... %zu more\n", indent, shown - MAX_LAYER_ROWS);
    }
    if (r->restore_msg[0]) printf("%srestore:     %s\n", indent, r->restore_msg);
}

static void cache_print_json(const cache_report *r)
{
    const sjk_cache_file_info *in = &r->info;
    char wv[32], fp[2 * SJK_FINGERPRINT_NBYTES + 1];
    version_str(wv, sizeof wv, in->writer_version);
    hex(fp, in->fingerprint, SJK_FINGERPRINT_NBYTES);
    printf("{\"version\": %u, \"record_version\": %u, \"writer_version\": \"%s\", \"n_layers\": %u, "
           "\"n_kv_heads\": %u, \"n_q_heads\": %u, \"head_dim\": %u, \"max_pos\": %u, \"n_seqs\": %u, "
           "\"fingerprint\": \"%s\", \"sections\": %u, \"sections_ok\": %u, \"sections_bad\": %u, \"checksums_ok\": %s, "
           "\"error\": ",
           in->file_version, in->record_version, wv, in->n_layers, in->n_kv_heads, in->n_q_heads, in->head_dim,
           in->max_pos, in->n_seqs, fp, in->n_sections, in->n_sections_ok, in->n_sections_bad,
           r->st == SJK_OK ? "true" : "false");
    if (r->st == SJK_OK) printf("null");
    else json_cstr(r->err);
    printf(", \"layers\": [");
    for (uint32_t l = 0; l < in->n_layers && r->n_layers_read; l++) {
        char name[96];
        layer_name(&r->layers[l], name, sizeof name);
        printf("%s{\"layer\": %u, \"config\": ", l ? ", " : "", l);
        json_cstr(name);
        printf(", \"seqs\": [");
        for (uint32_t s = 0; s < in->n_seqs && r->n_states_read; s++) {
            size_t i = (size_t)s * in->n_layers + l;
            regions g = layer_regions(&r->layers[l], r->states[2 * i], r->states[2 * i + 1]);
            printf("%s{\"n\": %u, \"body_end\": %u, \"valid\": %s, \"sink\": %u, \"body\": %u, \"records\": %u, "
                   "\"ring\": %u}",
                   s ? ", " : "", g.n, g.b, g.valid ? "true" : "false", g.sink, g.body, g.records, g.ring);
        }
        printf("]}");
    }
    printf("], \"restore\": ");
    if (r->restore_msg[0]) json_cstr(r->restore_msg);
    else printf("null");
    printf(", \"restore_ok\": %s}", r->restore > 0 ? "true" : r->restore < 0 ? "false" : "null");
}

static int inspect_cache(const char *path, const mapped *m, int json)
{
    cache_report r;
    cache_examine(m->p, m->n, &r);
    int ok = cache_ok(&r);
    if (json) {
        printf("{\"kind\": \"cache\", \"path\": ");
        json_cstr(path);
        printf(", \"file_bytes\": %zu, \"ok\": %s, \"cache\": ", m->n, ok ? "true" : "false");
        cache_print_json(&r);
        printf("}\n");
    } else {
        printf("%s: sjkvarn cache file, %zu bytes\n", path, m->n);
        cache_print_text(&r, "  ");
    }
    if (!ok) fprintf(stderr, "%s: %s: %s\n", PROG, path, r.st != SJK_OK ? r.err : r.restore_msg);
    cache_report_free(&r);
    return ok ? 0 : 1;
}

/* ---- session files ---------------------------------------------------------------- */

typedef struct model_check {
    int tried, fp_match, loaded;
    char msg[4600];
} model_check;

static void session_model_check(const char *path, const char *model_path, const sjkh_session_file_info *in,
                                model_check *mc)
{
    char e[300];
    sjkh_model *m = NULL;
    mc->tried = 1;
    if (sjkh_model_load(model_path, &m, e, sizeof e) != SJK_OK) {
        snprintf(mc->msg, sizeof mc->msg, "cannot load %s: %s", model_path, e);
        return;
    }
    uint8_t fp[SJK_FINGERPRINT_NBYTES];
    sjkh_model_fingerprint(m, fp);
    mc->fp_match = !memcmp(fp, in->fingerprint, sizeof fp);
    if (!mc->fp_match) {
        snprintf(mc->msg, sizeof mc->msg, "saved with another model (fingerprint differs from %s)", model_path);
        sjkh_model_free(m);
        return;
    }
    sjkh_session_params sp = sjkh_session_params_default();
    sp.n_ctx = in->n_ctx;
    sp.n_batch = in->n_batch;
    sp.kv = in->kv;
    sp.window_type = in->window_type;
    sp.n_threads = 1;
    sjkh_session *s = NULL;
    if (sjkh_session_create(m, &sp, &s, e, sizeof e) != SJK_OK) {
        snprintf(mc->msg, sizeof mc->msg, "matches; cannot create a session of the saved shape: %s", e);
    } else if (sjkh_session_load(s, path, NULL, e, sizeof e) != SJK_OK) {
        snprintf(mc->msg, sizeof mc->msg, "matches; the load failed: %s", e);
    } else {
        mc->loaded = 1;
        snprintf(mc->msg, sizeof mc->msg, "matches %s; loaded into a session of the saved shape: ok", model_path);
    }
    sjkh_session_free(s);
    sjkh_model_free(m);
}

static int inspect_session(const char *path, const mapped *m, const char *model_path, int json)
{
    sjkh_session_file_info in;
    char err[256];
    sjk_status st = sjkh_session_file_inspect(m->p, m->n, &in, err, sizeof err);
    cache_report r;
    memset(&r, 0, sizeof r);
    int have_cache = st == SJK_OK && in.cache_nbytes;
    if (have_cache) cache_examine(m->p + in.cache_offset, (size_t)in.cache_nbytes, &r);
    int fp_same = !have_cache || !memcmp(r.info.fingerprint, in.fingerprint, SJK_FINGERPRINT_NBYTES);
    model_check mc;
    memset(&mc, 0, sizeof mc);
    if (model_path && st == SJK_OK && (!have_cache || cache_ok(&r))) session_model_check(path, model_path, &in, &mc);
    int ok = st == SJK_OK && (!have_cache || cache_ok(&r)) && fp_same && (!mc.tried || mc.loaded);
    const char *wn = sjkh_window_type_name(in.window_type);
    char fp[2 * SJK_FINGERPRINT_NBYTES + 1];
    hex(fp, in.fingerprint, SJK_FINGERPRINT_NBYTES);
    if (json) {
        printf("{\"kind\": \"session\", \"path\": ");
        json_cstr(path);
        printf(", \"file_bytes\": %zu, \"version\": %u, \"n_past\": %u, \"n_layers\": %u, \"n_ctx\": %u, "
               "\"n_batch\": %u, \"pending_token\": %d, \"window\": ",
               m->n, in.version, in.n_past, in.n_layers, in.n_ctx, in.n_batch, in.pending_token);
        if (wn) json_cstr(wn);
        else printf("null");
        printf(", \"kv\": ");
        json_cstr(in.kv);
        printf(", \"fingerprint\": \"%s\", \"header_checksum_ok\": %s, \"host_checksum_ok\": %s, "
               "\"host_bytes\": %llu, \"cache_bytes\": %llu, \"cache_fingerprint_matches\": %s, \"cache\": ",
               fp, in.header_ok ? "true" : "false", in.host_ok ? "true" : "false", (unsigned long long)in.host_nbytes,
               (unsigned long long)in.cache_nbytes, fp_same ? "true" : "false");
        if (have_cache) cache_print_json(&r);
        else printf("null");
        printf(", \"checksums_ok\": %s, \"error\": ",
               st == SJK_OK && (!have_cache || r.st == SJK_OK) ? "true" : "false");
        if (st != SJK_OK) json_cstr(err);
        else printf("null");
        printf(", \"model_check\": ");
        if (mc.tried) json_cstr(mc.msg);
        else printf("null");
        printf(", \"ok\": %s}\n", ok ? "true" : "false");
    } else {
        printf("%s: sjkvarn session file version %u, %zu bytes\n", path, in.version, m->n);
        if (st != SJK_OK && !in.header_ok) {
            printf("  header:      FAILED: %s\n", err);
        } else {
            printf("  positions:   n_past %u of context %u (batch %u), pending token %d\n", in.n_past, in.n_ctx,
                   in.n_batch, in.pending_token);
            printf("  kv:          %s for the growing layers, window %s; %u layers in the model\n", in.kv,
                   wn ? wn : "(unknown)", in.n_layers);
            printf("  fingerprint: %s\n", fp);
            if (st != SJK_OK) printf("  checksums:   FAILED: %s\n", err);
            else if (!have_cache) printf("  checksums:   all verified (header, host section; no cache part)\n");
            else if (r.st == SJK_OK)
                printf("  checksums:   all %u verified (header, host section, cache header and %u sections)\n",
                       r.info.n_sections + 3, r.info.n_sections);
            else printf("  checksums:   FAILED in the cache part: %s\n", r.err);
            if (have_cache) {
                printf("  cache part:  %llu bytes at offset %llu%s\n", (unsigned long long)in.cache_nbytes,
                       (unsigned long long)in.cache_offset, fp_same ? "" : " (its fingerprint differs from the session's!)");
                cache_print_text(&r, "    ");
            }
        }
        if (mc.tried) printf("  model:       %s\n", mc.msg);
        else if (st == SJK_OK) printf("  model:       not checked (-m MODEL checks the fingerprint and loads the session)\n");
    }
    if (!ok) {
        const char *why = st != SJK_OK ? err : (have_cache && r.st != SJK_OK) ? r.err
                        : (have_cache && r.restore < 0) ? r.restore_msg : !fp_same ? "cache part of another model"
                        : mc.msg;
        fprintf(stderr, "%s: %s: %s\n", PROG, path, why);
    }
    cache_report_free(&r);
    return ok ? 0 : 1;
}

/* ---- GGUF ------------------------------------------------------------------------- */

typedef struct type_count {
    uint32_t count;
    uint64_t nbytes;
} type_count;

/* A string value of key (printable copy), or "" when absent or not a string. */
static void meta_str(const sjkh_gguf *g, const char *key, char *dst, size_t cap)
{
    const char *s;
    size_t n;
    dst[0] = 0;
    if (sjkh_gguf_get_str(g, key, &s, &n) == SJK_OK) clean(dst, cap, s, n);
}

static int inspect_gguf(const char *path, int json)
{
    char err[300];
    sjkh_gguf *g = NULL;
    sjk_status st = sjkh_gguf_open(path, &g, err, sizeof err);
    if (st != SJK_OK) {
        if (json) {
            printf("{\"kind\": \"gguf\", \"path\": ");
            json_cstr(path);
            printf(", \"ok\": false, \"error\": ");
            json_cstr(err);
            printf("}\n");
        } else {
            printf("%s: GGUF, unreadable: %s\n", path, err);
        }
        fprintf(stderr, "%s: %s: %s\n", PROG, path, err);
        return 1;
    }
    sjkh_plan_model *pm = malloc(sizeof *pm);
    char geo_err[300] = "";
    sjk_status geo = pm ? sjkh_plan_model_from_gguf(g, pm, geo_err, sizeof geo_err) : SJK_ERR_NOMEM;
    if (geo == SJK_ERR_NOMEM && !geo_err[0]) snprintf(geo_err, sizeof geo_err, "out of memory");
    char arch[64], name[128], tok_model[64], tok_pre[64];
    meta_str(g, "general.architecture", arch, sizeof arch);
    meta_str(g, "general.name", name, sizeof name);
    meta_str(g, "tokenizer.ggml.model", tok_model, sizeof tok_model);
    meta_str(g, "tokenizer.ggml.pre", tok_pre, sizeof tok_pre);
    sjkh_gguf_arr toks;
    uint64_t n_tokens = sjkh_gguf_get_arr(g, "tokenizer.ggml.tokens", &toks) == SJK_OK ? toks.count : 0;
    type_count tc[SJKH_TYPE_COUNT];
    memset(tc, 0, sizeof tc);
    const int64_t nt = sjkh_gguf_n_tensors(g);
    uint64_t tensor_bytes = 0;
    for (int64_t i = 0; i < nt; i++) {
        const sjkh_tensor *t = sjkh_gguf_tensor(g, i);
        if (!t || t->type >= SJKH_TYPE_COUNT) continue; /* open rejects unknown types */
        tc[t->type].count++;
        tc[t->type].nbytes += t->nbytes;
        tensor_bytes += t->nbytes;
    }
    /* can the host run it: the loader `run` uses, then the tokenizer */
    char why[340] = "";
    sjkh_model *m = NULL;
    int runnable = sjkh_model_load(path, &m, why, sizeof why) == SJK_OK;
    if (runnable) {
        sjkh_tokenizer *t = NULL;
        char terr[300];
        if (sjkh_tokenizer_from_gguf(g, &t, terr, sizeof terr) != SJK_OK) {
            runnable = 0;
            snprintf(why, sizeof why, "tokenizer: %s", terr);
        }
        sjkh_tokenizer_free(t);
    }
    sjkh_model_free(m);
    /* heads: uniform over the attention layers, or a range */
    uint32_t qmin = UINT32_MAX, qmax = 0, kvmin = UINT32_MAX, kvmax = 0, n_full = 0, n_win = 0, n_rec = 0;
    if (geo == SJK_OK) {
        for (uint32_t l = 0; l < pm->n_layers; l++) {
            if (pm->kind[l] == SJKH_PLAN_LAYER_RECURRENT) continue;
            uint32_t q = pm->n_q_heads[l], kv = pm->n_kv_heads[l];
            if (q < qmin) qmin = q;
            if (q > qmax) qmax = q;
            if (kv < kvmin) kvmin = kv;
            if (kv > kvmax) kvmax = kv;
        }
        if (qmax == 0) qmin = kvmin = 0;
        n_full = sjkh_plan_model_count(pm, SJKH_PLAN_LAYER_FULL);
        n_win = sjkh_plan_model_count(pm, SJKH_PLAN_LAYER_WINDOW);
        n_rec = sjkh_plan_model_count(pm, SJKH_PLAN_LAYER_RECURRENT);
    }
    if (json) {
        printf("{\"kind\": \"gguf\", \"path\": ");
        json_cstr(path);
        printf(", \"ok\": true, \"gguf_version\": %u, \"file_bytes\": %zu, \"n_tensors\": %lld, \"n_kv\": %lld, "
               "\"tensor_bytes\": %llu, \"architecture\": ",
               sjkh_gguf_version(g), sjkh_gguf_file_nbytes(g), (long long)nt, (long long)sjkh_gguf_n_kv(g),
               (unsigned long long)tensor_bytes);
        json_cstr(arch);
        printf(", \"name\": ");
        json_cstr(name);
        if (geo == SJK_OK) {
            printf(", \"n_layers\": %u, \"layers\": {\"full\": %u, \"window\": %u, \"recurrent\": %u, \"growing\": [",
                   pm->n_layers, n_full, n_win, n_rec);
            for (uint32_t l = 0, k = 0; l < pm->n_layers; l++)
                if (pm->kind[l] == SJKH_PLAN_LAYER_FULL) printf("%s%u", k++ ? ", " : "", l);
            printf("]}, \"sliding_window\": %u, \"heads\": {\"q_min\": %u, \"q\": %u, \"kv_min\": %u, \"kv\": %u}, "
                   "\"head_dim\": %u, \"context\": %u, \"geometry_error\": null",
                   pm->sliding_window, qmin, qmax, kvmin, kvmax, pm->head_dim, pm->n_ctx_train);
        } else {
            printf(", \"n_layers\": null, \"layers\": null, \"sliding_window\": null, \"heads\": null, "
                   "\"head_dim\": null, \"context\": null, \"geometry_error\": ");
            json_cstr(geo_err);
        }
        printf(", \"tensor_types\": [");
        for (uint32_t t = 0, k = 0; t < SJKH_TYPE_COUNT; t++) {
            if (!tc[t].count) continue;
            const sjkh_type_info *ti = sjkh_type_get(t);
            printf("%s{\"type\": ", k++ ? ", " : "");
            json_cstr(ti ? ti->name : "?");
            printf(", \"count\": %u, \"bytes\": %llu, \"host_computes\": %s}", tc[t].count,
                   (unsigned long long)tc[t].nbytes, ti && ti->compute ? "true" : "false");
        }
        printf("], \"tokenizer\": {\"model\": ");
        json_cstr(tok_model);
        printf(", \"pre\": ");
        json_cstr(tok_pre);
        printf(", \"n_tokens\": %llu}, \"runnable\": %s, \"why_not\": ", (unsigned long long)n_tokens,
               runnable ? "true" : "false");
        if (runnable) printf("null");
        else json_cstr(why);
        printf("}\n");
    } else {
        char fsz[32], tsz[32];
        sjkh_format_size(sjkh_gguf_file_nbytes(g), fsz, sizeof fsz);
        sjkh_format_size(tensor_bytes, tsz, sizeof tsz);
        printf("%s: GGUF v%u, %s, %lld tensors (%s), %lld metadata keys\n", path, sjkh_gguf_version(g), fsz,
               (long long)nt, tsz, (long long)sjkh_gguf_n_kv(g));
        printf("  model:      %s (architecture %s)\n", name[0] ? name : "(no general.name)", arch[0] ? arch : "?");
        if (geo == SJK_OK) {
            printf("  layers:     %u layers: %u full attention (grow with the context", pm->n_layers, n_full);
            if (n_full) {
                printf(": layer");
                for (uint32_t l = 0, k = 0; l < pm->n_layers; l++)
                    if (pm->kind[l] == SJKH_PLAN_LAYER_FULL && k++ < 16) printf(" %u", l);
                if (n_full > 16) printf(" ...");
            }
            printf("), %u sliding-window", n_win);
            if (n_win) printf(" (window %u)", pm->sliding_window);
            printf(", %u recurrent\n", n_rec);
            if (qmin == qmax && kvmin == kvmax)
                printf("  heads:      %u query / %u KV per layer, head dim %u\n", qmax, kvmax, pm->head_dim);
            else
                printf("  heads:      %u-%u query / %u-%u KV per layer, head dim %u\n", qmin, qmax, kvmin, kvmax,
                       pm->head_dim);
            printf("  context:    %u (trained)\n", pm->n_ctx_train);
            if (pm->note[0]) printf("  note:       %s\n", pm->note);
        } else {
            printf("  layers:     unknown: %s\n", geo_err);
        }
        printf("  tensors:   ");
        for (uint32_t t = 0; t < SJKH_TYPE_COUNT; t++) {
            if (!tc[t].count) continue;
            const sjkh_type_info *ti = sjkh_type_get(t);
            char sz[32];
            sjkh_format_size(tc[t].nbytes, sz, sizeof sz);
            printf(" %s x%u (%s)%s", ti ? ti->name : "?", tc[t].count, sz, ti && ti->compute ? "" : " [host: no]");
        }
        printf("\n");
        printf("  tokenizer:  %s, pre %s, %llu tokens\n", tok_model[0] ? tok_model : "(none)",
               tok_pre[0] ? tok_pre : "(none)", (unsigned long long)n_tokens);
        if (runnable) printf("  runs here: yes (sjkvarn run -m %s)\n", path);
        else printf("  runs here: no: %s\n", why);
    }
    free(pm);
    sjkh_gguf_close(g);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------------- */

int sjk_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *model = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) model = argv[++i];
        else if (a[0] == '-' && a[1]) { usage(stderr); return 2; }
        else if (!path) path = a;
        else { usage(stderr); return 2; }
    }
    if (!path) { usage(stderr); return 2; }
    char model_path[4096];
    if (model && !sjk_cli_resolve_model(PROG, model, model_path, sizeof model_path)) return 2;
    mapped m;
    if (!map_file(path, &m)) return 2;
    int rc;
    if (m.n >= 4 && !memcmp(m.p, "GGUF", 4)) rc = inspect_gguf(path, json);
    else if (m.n >= 8 && !memcmp(m.p, "SJKHSESS", 8)) rc = inspect_session(path, &m, model ? model_path : NULL, json);
    else if (m.n >= 8 && !memcmp(m.p, "SJKVCACH", 8)) rc = inspect_cache(path, &m, json);
    else {
        fprintf(stderr, "%s: %s: not a GGUF model, a session file or a cache file (unknown magic)\n", PROG, path);
        rc = 2;
    }
    if (m.n) munmap((void *)m.p, m.n);
    return rc;
}
