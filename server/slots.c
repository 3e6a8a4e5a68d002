/* slots.c — the server's sessions ("slots", as llama-server calls them): creation under
 * one memory budget, choosing a slot for a prompt by the prefix it already holds, the
 * /slots actions (save, restore, erase through the checksummed session files), idle
 * seals, and the memory each slot reports.
 *
 * A slot's `held` list is the token ids whose K/V its session holds, in order. A new
 * prompt goes to the idle slot that shares the longest prefix with it; the session is cut
 * back to that prefix (sjkh_session_truncate) and only the rest is prefilled;
 * `cached_tokens` says how many were reused.
 *
 * Saved slots are two files in --slot-dir: NAME (the session file, docs/FORMAT.md
 * "Session files") and NAME.tokens (the held ids, docs/FORMAT.md "Server token files"):
 *
 *   +----------+---------+----------+--------+------------------+
 *   | SJKTOKEN | version | n_tokens | crc32c | ids [n_tokens]   |
 *   | 8 B      | u32 = 1 | u32      | u32    | u32 little-endian|
 *   +----------+---------+----------+--------+------------------+
 *   crc32c (CRC-32C) covers version, n_tokens and the ids. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "server.h"

#define TOK_MAGIC "SJKTOKEN"
#define TOK_VERSION 1u
#define TOK_HEADER_NBYTES 20

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Engine (or an idle slot's action): measures the slot's memory into its report fields. */
static void measure(srv *S, srv_slot *sl)
{
    sjkh_kv_report r;
    sjk_cache_memory m;
    memset(&m, 0, sizeof m);
    uint32_t sealed = 0;
    sjk_cache *c = sjkh_session_cache(sl->s);
    if (c) {
        sjk_cache_memory_report(c, &m);
        for (uint32_t l = 0; l < S->info->n_global_layers; l++) {
            uint32_t n = 0, b = 0;
            if (sjk_cache_length(c, 0, l, &n, &b) == SJK_OK) sealed += b;
        }
    }
    if (sjkh_session_kv_report(sl->s, &r)) memset(&r, 0, sizeof r);
    pthread_mutex_lock(&S->mu);
    sl->n_held_seen = sl->n_held;
    sl->kv = r;
    sl->mem = m;
    sl->sealed_positions = sealed;
    pthread_mutex_unlock(&S->mu);
}

void srv_slot_measure(srv *S, srv_slot *sl) { measure(S, sl); }

sjkh_session_params srv_session_params(const srv *S)
{
    sjkh_session_params p = sjkh_session_params_default();
    p.n_ctx = S->o.n_ctx;
    p.n_batch = S->o.n_batch;
    p.n_threads = S->o.n_threads;
    p.kv = S->kv;
    p.window_type = S->o.window_type;
    return p;
}

sjk_status srv_slots_create(srv *S, char *err, size_t err_cap)
{
    uint32_t n = S->o.parallel;
    S->slots = calloc(n, sizeof *S->slots);
    if (!S->slots) return SJK_ERR_NOMEM;
    const sjkh_session_params p = srv_session_params(S);
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        srv_slot *sl = &S->slots[i];
        sl->id = i;
        sl->pending = -1;
        sjk_status st = sjkh_session_create(S->model, &p, &sl->s, err, err_cap);
        if (st) return st;
        sl->held = malloc((size_t)S->o.n_ctx * sizeof *sl->held);
        sl->logits = malloc((size_t)S->info->n_vocab * sizeof *sl->logits);
        if (!sl->held || !sl->logits) {
            snprintf(err, err_cap, "out of memory for slot %u", i);
            return SJK_ERR_NOMEM;
        }
        measure(S, sl);
        total += sl->kv.total_nbytes;
        sl->last_used = srv_now();
    }
    S->kv_allocated_nbytes = total;
    return SJK_OK;
}

void srv_slots_free(srv *S)
{
    if (!S->slots) return;
    for (uint32_t i = 0; i < S->o.parallel; i++) {
        sjkh_session_free(S->slots[i].s);
        sjkh_sampler_free(S->slots[i].sampler);
        free(S->slots[i].held);
        free(S->slots[i].logits);
    }
    free(S->slots);
    S->slots = NULL;
}

/* Tokens of `held` reusable for `prompt`: their common prefix, but at most all but the
 * last prompt token (one token must be fed to get logits). The engine cuts the session
 * back to it (sjkh_session_truncate, which may keep fewer). */
static size_t reusable(const srv_slot *sl, const int32_t *prompt, size_t n_prompt)
{
    size_t n = sl->n_held < n_prompt - 1 ? sl->n_held : n_prompt - 1, i = 0;
    while (i < n && sl->held[i] == prompt[i]) i++;
    return i;
}

/* Under S->mu. With wait non-NULL, a slot that is finishing (its reply is out, its
 * blocks are being published; held no longer changes) and would reuse more of the prompt
 * than every idle slot claims nothing and sets *wait: a client that continues a
 * conversation the moment its reply arrives must not lose the cache to that race. The
 * caller waits on S->cv (bounded) and claims again, at last with wait NULL. */
srv_slot *srv_slot_claim(srv *S, const int32_t *prompt, size_t n_prompt, size_t *n_reuse, int *wait)
{
    srv_slot *best = NULL;
    size_t best_reuse = 0, fin_reuse = 0;
    int fin = 0;
    if (wait) *wait = 0;
    for (uint32_t i = 0; i < S->o.parallel; i++) {
        srv_slot *sl = &S->slots[i];
        if (sl->busy) {
            if (sl->finishing) {
                size_t r = reusable(sl, prompt, n_prompt);
                if (!fin || r > fin_reuse) fin_reuse = r;
                fin = 1;
            }
            continue;
        }
        size_t r = reusable(sl, prompt, n_prompt);
        if (!best || r > best_reuse || (r == best_reuse && sl->last_used < best->last_used)) {
            best = sl;
            best_reuse = r;
        }
    }
    if (wait && fin && (!best || fin_reuse > best_reuse)) {
        *wait = 1;
        *n_reuse = 0;
        return NULL;
    }
    if (best) best->busy = 1;
    *n_reuse = best_reuse;
    return best;
}

/* Slot file names: [A-Za-z0-9._-]{1,128}, not starting with '.', so nothing escapes
 * --slot-dir. */
static int name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 128 || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static int save_tokens(const char *path, const int32_t *ids, size_t n, char *msg, size_t cap)
{
    size_t nb = TOK_HEADER_NBYTES + 4 * n;
    uint8_t *b = malloc(nb);
    if (!b) return snprintf(msg, cap, "out of memory"), -1;
    memcpy(b, TOK_MAGIC, 8);
    wr32(b + 8, TOK_VERSION);
    wr32(b + 12, (uint32_t)n);
    for (size_t i = 0; i < n; i++) wr32(b + TOK_HEADER_NBYTES + 4 * i, (uint32_t)ids[i]);
    uint32_t crc = sjk_crc32c(0, b + 8, 8);
    crc = sjk_crc32c(crc, b + TOK_HEADER_NBYTES, 4 * n);
    wr32(b + 16, crc);
    char tmp[4400];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return snprintf(msg, cap, "path too long"), -1;
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(b, 1, nb, f) == nb;
    if (f) ok = (fflush(f) == 0) && (fsync(fileno(f)) == 0) && ok, ok = (fclose(f) == 0) && ok;
    free(b);
    if (!ok || rename(tmp, path)) {
        snprintf(msg, cap, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Reads NAME.tokens into ids [cap]; returns the count or -1 with msg. */
static long load_tokens(const char *path, int32_t *ids, size_t cap, char *msg, size_t msg_cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(msg, msg_cap, "cannot open %s: %s", path, strerror(errno)), -1;
    uint8_t h[TOK_HEADER_NBYTES];
    long rc = -1;
    uint8_t *b = NULL;
    if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, TOK_MAGIC, 8)) {
        snprintf(msg, msg_cap, "%s is not a token file", path);
        goto done;
    }
    if (rd32(h + 8) != TOK_VERSION) {
        snprintf(msg, msg_cap, "%s: token file version %u (this build reads %u)", path, rd32(h + 8), TOK_VERSION);
        goto done;
    }
    uint32_t n = rd32(h + 12);
    if (n > cap) {
        snprintf(msg, msg_cap, "%s holds %u tokens, more than the context of %zu", path, n, cap);
        goto done;
    }
    if (!(b = malloc((size_t)n * 4 + 1))) {
        snprintf(msg, msg_cap, "out of memory");
        goto done;
    }
    if (fread(b, 1, (size_t)n * 4, f) != (size_t)n * 4 || fgetc(f) != EOF) {
        snprintf(msg, msg_cap, "%s: truncated or has trailing bytes", path);
        goto done;
    }
    uint32_t crc = sjk_crc32c(sjk_crc32c(0, h + 8, 8), b, (size_t)n * 4);
    if (crc != rd32(h + 16)) {
        snprintf(msg, msg_cap, "%s: checksum mismatch", path);
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) ids[i] = (int32_t)rd32(b + 4 * i);
    rc = n;
done:
    free(b);
    fclose(f);
    return rc;
}

int srv_slot_action(srv *S, uint32_t id, const char *action, const char *filename, srv_buf *body, char *msg,
                    size_t msg_cap)
{
    if (id >= S->o.parallel) return snprintf(msg, msg_cap, "no slot %u (there are %u)", id, S->o.parallel), 404;
    int save = !strcmp(action, "save"), restore = !strcmp(action, "restore"), erase = !strcmp(action, "erase");
    if (!save && !restore && !erase)
        return snprintf(msg, msg_cap, "action must be save, restore or erase, got '%s'", action), 400;
    if ((save || restore) && !S->o.slot_dir)
        return snprintf(msg, msg_cap, "slot files are off: start the server with --slot-dir DIR"), 501;
    if ((save || restore) && !name_ok(filename))
        return snprintf(msg, msg_cap, "filename must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'"),
               400;
    srv_slot *sl = &S->slots[id];
    pthread_mutex_lock(&S->mu);
    int busy = sl->busy;
    if (!busy) sl->busy = 1;
    pthread_mutex_unlock(&S->mu);
    if (busy) return snprintf(msg, msg_cap, "slot %u is busy", id), 409;

    int status = 200;
    char path[4096], tpath[4200], err[512] = "";
    snprintf(path, sizeof path, "%s/%s", S->o.slot_dir ? S->o.slot_dir : ".", filename ? filename : "");
    snprintf(tpath, sizeof tpath, "%s.tokens", path);
    double t0 = srv_now();
    if (erase) {
        size_t n = sl->n_held;
        sjkh_session_reset(sl->s);
        sl->n_held = 0;
        srv_buf_addf(body, "{\"id_slot\":%u,\"n_erased\":%zu}", id, n);
    } else if (save) {
        sjk_status st = sjkh_session_save(sl->s, path, -1, err, sizeof err);
        if (st) {
            snprintf(msg, msg_cap, "save: %s (%s)", err, sjk_status_str(st));
            status = 500;
        } else if (save_tokens(tpath, sl->held, sl->n_held, msg, msg_cap)) {
            status = 500;
        } else {
            srv_buf_addf(body, "{\"id_slot\":%u,\"filename\":\"%s\",\"n_saved\":%zu,\"timings\":{\"save_ms\":%.3f}}",
                         id, filename, sl->n_held, (srv_now() - t0) * 1e3);
        }
    } else {
        int32_t *ids = malloc((size_t)S->o.n_ctx * sizeof *ids);
        long n = ids ? load_tokens(tpath, ids, S->o.n_ctx, msg, msg_cap) : -1;
        int32_t pending = -1;
        sjk_status st = SJK_OK;
        if (!ids) snprintf(msg, msg_cap, "out of memory");
        if (n < 0) {
            status = 400;
        } else if ((st = sjkh_session_load(sl->s, path, &pending, err, sizeof err))) {
            snprintf(msg, msg_cap, "restore: %s (%s)", err, sjk_status_str(st));
            status = st == SJK_ERR_IO || st == SJK_ERR_NOMEM ? 500 : 400;
        } else if ((size_t)n != sjkh_session_n_past(sl->s)) {
            snprintf(msg, msg_cap, "restore: %s holds %u positions but %s has %ld tokens", path,
                     sjkh_session_n_past(sl->s), tpath, n);
            sjkh_session_reset(sl->s);
            sl->n_held = 0;
            status = 400;
        } else {
            memcpy(sl->held, ids, (size_t)n * sizeof *ids);
            sl->n_held = (size_t)n;
            srv_buf_addf(body,
                         "{\"id_slot\":%u,\"filename\":\"%s\",\"n_restored\":%ld,\"timings\":{\"restore_ms\":%.3f}}",
                         id, filename, n, (srv_now() - t0) * 1e3);
        }
        free(ids);
    }
    measure(S, sl);
    pthread_mutex_lock(&S->mu);
    sl->busy = 0;
    sl->idle_sealed = 0;
    sl->last_used = srv_now();
    pthread_mutex_unlock(&S->mu);
    return status;
}

void srv_slots_json(srv *S, srv_buf *out)
{
    json_t *a = json_array();
    double now = srv_now();
    pthread_mutex_lock(&S->mu);
    for (uint32_t i = 0; i < S->o.parallel; i++) {
        const srv_slot *sl = &S->slots[i];
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(i));
        json_object_set_new(o, "state", json_string(sl->job ? "processing" : sl->busy ? "busy" : "idle"));
        json_object_set_new(o, "is_processing", json_boolean(sl->job != NULL));
        json_object_set_new(o, "n_ctx", json_integer(S->o.n_ctx));
        /* n_held changes on the engine thread without the lock: the last measured count */
        json_object_set_new(o, "n_cached_tokens", json_integer((json_int_t)sl->n_held_seen));
        json_object_set_new(o, "kv", json_string(S->kv));
        json_object_set_new(o, "kv_allocated_bytes", json_integer((json_int_t)sl->kv.total_nbytes));
        json_object_set_new(o, "kv_occupied_bytes", json_integer((json_int_t)sl->kv.occupied_nbytes));
        json_object_set_new(o, "sealed_positions", json_integer(sl->sealed_positions));
        json_object_set_new(o, "idle_sealed", json_boolean(sl->idle_sealed));
        json_object_set_new(o, "idle_s", json_real(sl->job || sl->busy ? 0.0 : now - sl->last_used));
        json_array_append_new(a, o);
    }
    pthread_mutex_unlock(&S->mu);
    char *s = json_dumps(a, JSON_COMPACT);
    if (s) srv_buf_add(out, s, strlen(s));
    free(s);
    json_decref(a);
}

void srv_slots_idle_seal(srv *S)
{
    if (S->o.idle_seal_s <= 0) return;
    for (uint32_t i = 0; i < S->o.parallel; i++) {
        srv_slot *sl = &S->slots[i];
        pthread_mutex_lock(&S->mu);
        int due = !sl->busy && !sl->idle_sealed && sl->n_held > 0 && srv_now() - sl->last_used >= S->o.idle_seal_s;
        if (due) sl->busy = 1;
        pthread_mutex_unlock(&S->mu);
        if (!due) continue;
        sjk_cache *c = sjkh_session_cache(sl->s);
        uint32_t before = sl->sealed_positions;
        sjk_status st = c ? sjk_cache_seal_idle(c, 0) : SJK_OK;
        measure(S, sl);
        pthread_mutex_lock(&S->mu);
        sl->busy = 0;
        sl->idle_sealed = 1;
        pthread_mutex_unlock(&S->mu);
        pthread_mutex_lock(&S->metrics.mu);
        S->metrics.idle_seals++;
        pthread_mutex_unlock(&S->metrics.mu);
        fprintf(stderr, "sjkvarn serve: slot %u idle %.0f s: sealed to tail_min (%s; sealed positions %u -> %u)\n", i,
                S->o.idle_seal_s, sjk_status_str(st), before, sl->sealed_positions);
    }
}
