/* prefix_store.c — lookup, fetch, verify, import and publish of prompt blocks
 * (prefix_store.h has the sequence; docs/STORE.md the reasons).
 *
 * Canonical prefill. Up to the cut, a prompt is fed one 128-token block at a time and
 * every block is sealed (sjkh_session_seal_to) before the next one is computed. The
 * bytes of block i are then a function of tokens 0 .. 128 i + 127 alone: whether the
 * blocks before it came from the store or were computed here, from the first block or
 * after a miss in the middle, the state at every block edge is the same, bit for bit.
 * So a cold store, a warm one, one with holes (evictions) or damaged values all give the
 * same logits, and the store can only ever change how long a prefill takes. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prefix_store.h"
#include "redis.h"

#define BATCH 16 /* values per GET / SET pipeline */

struct sjks_store {
    sjks_redis *r;
    uint8_t fp[SJKS_HASH_NBYTES];
    char ttl[16];
    FILE *log;
    sjks_store_stats st;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sjk_status sjks_store_open(const char *url, const sjkh_model *m, const sjkh_session_params *sp, uint32_t ttl_s,
                           sjks_store **out, char *err, size_t err_cap)
{
    *out = NULL;
    sjks_store *st = calloc(1, sizeof *st);
    if (!st) return SJK_ERR_NOMEM;
    sjk_status s = sjks_redis_open(url, &st->r, err, err_cap);
    if (s == SJK_OK && (s = sjks_fingerprint(m, sp, st->fp)) != SJK_OK && err && err_cap)
        snprintf(err, err_cap, "prefix store: cannot fingerprint kv '%s'", sp->kv);
    if (s != SJK_OK) {
        sjks_store_close(st);
        return s;
    }
    snprintf(st->ttl, sizeof st->ttl, "%u", ttl_s ? ttl_s : 86400u);
    st->log = stderr;
    *out = st;
    return SJK_OK;
}

void sjks_store_close(sjks_store *st)
{
    if (!st) return;
    sjks_redis_close(st->r);
    free(st);
}

void sjks_store_set_log(sjks_store *st, FILE *f) { st->log = f; }
const uint8_t *sjks_store_fingerprint(const sjks_store *st) { return st->fp; }
void sjks_store_get_stats(const sjks_store *st, sjks_store_stats *out) { *out = st->st; }
void sjks_store_get_redis_stats(const sjks_store *st, sjks_redis_stats *out) { sjks_redis_get_stats(st->r, out); }

#define LOG(st, ...) do { if ((st)->log) { fprintf((st)->log, "sjkvarn store: " __VA_ARGS__); fputc('\n', (st)->log); } } while (0)

/* Per prefill: the prompt's chain hashes, keys and what the store said about them. */
typedef struct plan {
    uint32_t cut, wf_cut;
    int has_win;
    uint8_t (*chain)[SJKS_HASH_NBYTES]; /* [cut] */
    char (*key)[2][SJKS_KEY_CAP];       /* [cut][part] */
    size_t (*klen)[2];
    int8_t (*exists)[2];                /* 1 present, 0 absent, -1 unknown (no answer) */
    uint8_t (*bad)[2];                  /* present but refused: replaced at publish */
} plan;

static void plan_free(plan *p)
{
    free(p->chain);
    free(p->key);
    free(p->klen);
    free(p->exists);
    free(p->bad);
}

static sjks_value_meta meta(const sjks_store *st, const plan *p, const int32_t *ids, int part, uint32_t i,
                            const sjkh_block_piece *pieces, size_t n_pieces)
{
    sjks_value_meta m = {st->fp, i ? p->chain[i - 1] : NULL, p->chain[i], (uint32_t)part, i,
                         ids + (size_t)i * SJKH_BLOCK_TOKENS, pieces, n_pieces};
    return m;
}

/* The pieces of (part, block) into a malloc'd array. */
static sjkh_block_piece *pieces_of(sjkh_session *s, int part, uint32_t block, size_t *n)
{
    if (sjkh_session_block_pieces(s, part, block, NULL, 0, n) != SJK_OK) return NULL;
    sjkh_block_piece *pc = malloc((*n ? *n : 1) * sizeof *pc);
    if (pc && sjkh_session_block_pieces(s, part, block, pc, *n, n) != SJK_OK) {
        free(pc);
        return NULL;
    }
    return pc;
}

/* EXISTS for every key of the plan in one pipeline. 0 if the store did not answer. */
static int lookup(sjks_store *st, plan *p)
{
    size_t n = (size_t)p->cut * (p->has_win ? 2 : 1), k = 0;
    int *argc = malloc(n * sizeof *argc);
    const char *(*argv)[2] = malloc(n * sizeof *argv);
    size_t (*alen)[2] = malloc(n * sizeof *alen);
    const char *const **avp = malloc(n * sizeof *avp);
    const size_t **alp = malloc(n * sizeof *alp);
    redisReply **rep = calloc(n, sizeof *rep);
    size_t got = 0;
    if (!argc || !argv || !alen || !avp || !alp || !rep) goto out;
    for (uint32_t i = 0; i < p->cut; i++)
        for (int part = 0; part < (p->has_win ? 2 : 1); part++, k++) {
            argc[k] = 2;
            argv[k][0] = "EXISTS";
            alen[k][0] = 6;
            argv[k][1] = p->key[i][part];
            alen[k][1] = p->klen[i][part];
            avp[k] = argv[k];
            alp[k] = alen[k];
        }
    got = sjks_redis_run(st->r, n, argc, avp, alp, rep);
    k = 0;
    for (uint32_t i = 0; i < p->cut; i++)
        for (int part = 0; part < (p->has_win ? 2 : 1); part++, k++) {
            redisReply *r = rep[k];
            p->exists[i][part] = !r || r->type != REDIS_REPLY_INTEGER ? -1 : r->integer == 1;
        }
out:
    for (size_t i = 0; rep && i < n; i++)
        if (rep[i]) freeReplyObject(rep[i]);
    free(rep);
    free(argc);
    free(argv);
    free(alen);
    free(avp);
    free(alp);
    return got > 0;
}

/* GETs keys of blocks [b0, b1) of one part into rep[0 .. b1-b0). */
static void fetch(sjks_store *st, const plan *p, int part, uint32_t b0, uint32_t b1, redisReply **rep)
{
    int argc[BATCH];
    const char *argv[BATCH][2];
    size_t alen[BATCH][2];
    const char *const *avp[BATCH];
    const size_t *alp[BATCH];
    uint32_t n = b1 - b0;
    for (uint32_t k = 0; k < n; k++) {
        argc[k] = 2;
        argv[k][0] = "GET";
        alen[k][0] = 3;
        argv[k][1] = p->key[b0 + k][part];
        alen[k][1] = p->klen[b0 + k][part];
        avp[k] = argv[k];
        alp[k] = alen[k];
    }
    sjks_redis_run(st->r, n, argc, avp, alp, rep);
}

/* Verifies a GET reply for (part, block) and imports its payload into s. 1 on success;
 * 0 (logged, counted) otherwise. */
static int take(sjks_store *st, const plan *p, sjkh_session *s, const int32_t *ids, int part, uint32_t i,
                redisReply *r, int import)
{
    const char *why = NULL;
    size_t n_pc = 0;
    sjkh_block_piece *pc = NULL;
    int ok = 0;
    if (!r) why = "no reply (store down or slow)";
    else if (r->type == REDIS_REPLY_NIL) why = "missing (expired or evicted since the lookup)";
    else if (r->type != REDIS_REPLY_STRING) why = r->type == REDIS_REPLY_ERROR ? r->str : "not a string";
    else if (!(pc = pieces_of(s, part, i, &n_pc))) why = "block layout";
    if (!why) {
        st->st.fetched_bytes += r->len;
        sjks_value_meta m = meta(st, p, ids, part, i, pc, n_pc);
        const uint8_t *pay;
        size_t pn;
        sjk_status vs = sjks_value_verify(&m, (const uint8_t *)r->str, r->len, &pay, &pn, &why);
        if (vs == SJK_OK && import) {
            vs = sjkh_session_block_import(s, part, i, pay, pn);
            if (vs != SJK_OK) why = sjk_status_str(vs);
        }
        ok = vs == SJK_OK;
    }
    if (!ok) {
        st->st.rejected++;
        if (r && r->type == REDIS_REPLY_STRING) p->bad[i][part] = 1;
        LOG(st, "block %u (%s) %s: %s; treated as a miss", i, part ? "window" : "growing", p->key[i][part], why);
    }
    free(pc);
    return ok;
}

/* The depth the lookup promises: the leading run of growing blocks up to the first miss,
 * cut back to the deepest depth whose window blocks all exist. */
static uint32_t stored_depth(const plan *p, const sjkh_session *s)
{
    uint32_t h = 0;
    while (h < p->cut && p->exists[h][0] == 1) h++;
    if (p->has_win)
        for (; h > 0; h--) { /* the deepest depth whose window blocks are all there */
            uint32_t wf = sjkh_session_block_window_first(s, h), i = wf;
            while (i < h && p->exists[i][1] == 1) i++;
            if (i == h) break;
        }
    return h;
}

/* Finds and imports the longest stored prefix; returns the blocks imported. */
static uint32_t load_prefix(sjks_store *st, plan *p, sjkh_session *s, const int32_t *ids)
{
    uint32_t h = stored_depth(p, s);
    if (h == 0) return 0;
    redisReply *rep[BATCH];
    /* window blocks first (few): a depth whose window cannot be had is no hit at all */
    redisReply *win[BATCH * 4] = {0};
    uint32_t wf = p->has_win ? sjkh_session_block_window_first(s, h) : h, nw = h - wf;
    if (nw > BATCH * 4) return 0;
    for (uint32_t b = wf; b < h; b += BATCH) {
        uint32_t e = b + BATCH < h ? b + BATCH : h;
        fetch(st, p, 1, b, e, win + (b - wf));
    }
    int win_ok = 1;
    for (uint32_t i = wf; i < h && win_ok; i++) win_ok = take(st, p, s, ids, 1, i, win[i - wf], 0);
    uint32_t done = 0;
    if (win_ok) {
        for (uint32_t b = 0; b < h && done == b; b += BATCH) {
            uint32_t e = b + BATCH < h ? b + BATCH : h;
            fetch(st, p, 0, b, e, rep);
            for (uint32_t i = b; i < e; i++) {
                if (done == i && take(st, p, s, ids, 0, i, rep[i - b], 1)) done++;
                if (rep[i - b]) freeReplyObject(rep[i - b]);
            }
        }
        if (p->has_win && done < h) done = 0; /* the window was for depth h */
    }
    if (p->has_win && done) {
        for (uint32_t i = wf; i < h; i++)
            if (!take(st, p, s, ids, 1, i, win[i - wf], 1)) done = 0;
    }
    for (uint32_t i = 0; i < nw; i++)
        if (win[i]) freeReplyObject(win[i]);
    if (done && sjkh_session_block_finish(s, done) != SJK_OK) {
        LOG(st, "import of %u blocks did not complete; prefilling from the start", done);
        done = 0;
    }
    if (!done) sjkh_session_reset(s);
    return done;
}

/* SET key value [NX] EX ttl for every block the store lacks (or holds damaged). */
static void publish(sjks_store *st, plan *p, sjkh_session *s, const int32_t *ids, uint8_t **win_vals,
                    size_t *win_nbytes, sjks_prefill_report *rep)
{
    uint8_t *vals[BATCH];
    size_t vlen[BATCH];
    uint32_t idx[BATCH];
    int parts[BATCH];
    int n = 0;
    for (uint32_t i = 0; i <= p->cut; i++) {
        for (int part = 0; part < 2 && i < p->cut; part++) {
            if (part == 1 && (!p->has_win || i < p->wf_cut)) continue;
            if (p->exists[i][part] == 1 && !p->bad[i][part]) continue;
            uint8_t *v = NULL;
            size_t vn = 0;
            if (part == 1) {
                v = win_vals[i - p->wf_cut];
                vn = win_nbytes[i - p->wf_cut];
                win_vals[i - p->wf_cut] = NULL;
            } else {
                size_t n_pc = 0, pn = 0;
                sjkh_block_piece *pc = pieces_of(s, 0, i, &n_pc);
                if (pc && sjkh_session_block_export(s, 0, i, NULL, 0, &pn) == SJK_OK &&
                    (v = malloc(sjks_value_nbytes(n_pc, pn)))) {
                    vn = sjks_value_nbytes(n_pc, pn);
                    sjks_value_meta m = meta(st, p, ids, 0, i, pc, n_pc);
                    if (sjkh_session_block_export(s, 0, i, v + sjks_value_payload_offset(n_pc), pn, NULL) != SJK_OK ||
                        sjks_value_seal(&m, v, vn) != SJK_OK) {
                        free(v);
                        v = NULL;
                    }
                }
                free(pc);
            }
            if (!v) continue;
            vals[n] = v;
            vlen[n] = vn;
            idx[n] = i;
            parts[n] = part;
            n++;
        }
        if (n && (n > BATCH - 2 || i + 1 >= p->cut)) {
            int argc[BATCH];
            const char *argv[BATCH][6];
            size_t alen[BATCH][6];
            const char *const *avp[BATCH];
            const size_t *alp[BATCH];
            redisReply *r[BATCH];
            for (int k = 0; k < n; k++) {
                int bad = p->bad[idx[k]][parts[k]];
                const char *a[6] = {"SET", p->key[idx[k]][parts[k]], (const char *)vals[k], "NX", "EX", st->ttl};
                size_t l[6] = {3, p->klen[idx[k]][parts[k]], vlen[k], 2, 2, strlen(st->ttl)};
                if (bad) { /* a value that failed verification is replaced */
                    a[3] = "EX", l[3] = 2;
                    a[4] = st->ttl, l[4] = strlen(st->ttl);
                }
                argc[k] = bad ? 5 : 6;
                memcpy(argv[k], a, sizeof a);
                memcpy(alen[k], l, sizeof l);
                avp[k] = argv[k];
                alp[k] = alen[k];
            }
            sjks_redis_run(st->r, (size_t)n, argc, avp, alp, r);
            for (int k = 0; k < n; k++) {
                if (r[k] && r[k]->type == REDIS_REPLY_STATUS) {
                    st->st.published++;
                    st->st.published_bytes += vlen[k];
                    if (rep) rep->published_blocks++;
                } else if (r[k] && r[k]->type == REDIS_REPLY_NIL) {
                    st->st.publish_exists++;
                } else {
                    st->st.publish_failures++;
                    LOG(st, "publish of block %u (%s) failed: %s", idx[k], parts[k] ? "window" : "growing",
                        !r[k] ? "no reply (store down or slow)" : r[k]->type == REDIS_REPLY_ERROR ? r[k]->str : "?");
                }
                if (r[k]) freeReplyObject(r[k]);
                free(vals[k]);
            }
            n = 0;
        }
    }
}

struct sjks_prefill {
    sjks_store *st;
    sjkh_session *s;
    const int32_t *ids;
    size_t n;
    size_t pos;           /* positions fed so far (imported ones included) */
    plan p;
    uint8_t **win_vals;   /* [cut - wf_cut] sealed window values taken at the cut */
    size_t *win_nbytes;
    sjks_prefill_report rep;
};

static void prefill_free(sjks_prefill *f)
{
    if (!f) return;
    for (uint32_t i = 0; f->win_vals && i < f->p.cut - f->p.wf_cut; i++) free(f->win_vals[i]);
    free(f->win_vals);
    free(f->win_nbytes);
    plan_free(&f->p);
    free(f);
}

/* The chain hashes and keys of blocks [0, cut) of ids into p (p->cut set, the rest
 * allocated here). */
static sjk_status plan_make(const sjks_store *st, const sjkh_session *s, const int32_t *ids, uint32_t cut, plan *p)
{
    memset(p, 0, sizeof *p);
    p->cut = cut;
    size_t wn = 0;
    p->has_win = sjkh_session_block_nbytes(s, SJKH_BLOCK_WINDOW, 0, &wn) == SJK_OK && wn > 0;
    p->wf_cut = p->has_win ? sjkh_session_block_window_first(s, cut) : cut;
    p->chain = malloc(cut * sizeof *p->chain);
    p->key = malloc(cut * sizeof *p->key);
    p->klen = malloc(cut * sizeof *p->klen);
    p->exists = malloc(cut * sizeof *p->exists);
    p->bad = calloc(cut, sizeof *p->bad);
    if (!p->chain || !p->key || !p->klen || !p->exists || !p->bad) {
        plan_free(p);
        memset(p, 0, sizeof *p);
        return SJK_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < cut; i++) {
        sjks_chain_hash(i ? p->chain[i - 1] : st->fp, ids + (size_t)i * SJKH_BLOCK_TOKENS, p->chain[i]);
        for (int part = 0; part < 2; part++) p->klen[i][part] = sjks_key(p->key[i][part], st->fp, part, p->chain[i]);
        p->exists[i][0] = p->exists[i][1] = -1;
    }
    return SJK_OK;
}

sjk_status sjks_prefill_begin(sjks_store *st, sjkh_session *s, const int32_t *ids, size_t n, sjks_prefill **out)
{
    *out = NULL;
    sjks_prefill *f = calloc(1, sizeof *f);
    if (!f) return SJK_ERR_NOMEM;
    f->st = st;
    f->s = s;
    f->ids = ids;
    f->n = n;
    f->pos = 0; /* an index into ids */
    uint32_t cut = st && sjkh_session_n_past(s) == 0 && n <= UINT32_MAX ? sjkh_session_block_cut(s, (uint32_t)n) : 0;
    *out = f;
    if (!cut) return SJK_OK;
    plan *p = &f->p;
    sjk_status res = plan_make(st, s, ids, cut, p);
    if (res == SJK_OK) {
        f->win_vals = calloc(cut - p->wf_cut + 1, sizeof *f->win_vals);
        f->win_nbytes = calloc(cut - p->wf_cut + 1, sizeof *f->win_nbytes);
        if (!f->win_vals || !f->win_nbytes) res = SJK_ERR_NOMEM;
    }
    if (res != SJK_OK) {
        prefill_free(f);
        *out = NULL;
        return res;
    }
    st->st.lookups++;
    double t0 = now_s();
    if (!lookup(st, p)) {
        st->st.lookup_failures++;
        LOG(st, "lookup of %u blocks got no answer (store down or slow); prefilling all %zu tokens", cut, n);
    }
    double t1 = now_s();
    uint32_t h = load_prefix(st, p, s, ids);
    f->rep.lookup_s = t1 - t0;
    f->rep.fetch_s = now_s() - t1;
    f->rep.cached_tokens = h * SJKH_BLOCK_TOKENS;
    f->pos = f->rep.cached_tokens;
    st->st.hit_blocks += h;
    st->st.hit_tokens += (uint64_t)h * SJKH_BLOCK_TOKENS;
    st->st.miss_blocks += cut - h;
    return SJK_OK;
}

uint32_t sjks_store_probe(sjks_store *st, const sjkh_session *s, const int32_t *ids, size_t n)
{
    uint32_t cut = st && n <= UINT32_MAX ? sjkh_session_block_cut(s, (uint32_t)n) : 0;
    plan p;
    if (!cut || plan_make(st, s, ids, cut, &p) != SJK_OK) return 0;
    st->st.probes++;
    uint32_t h = lookup(st, &p) ? stored_depth(&p, s) : 0;
    plan_free(&p);
    return h * SJKH_BLOCK_TOKENS;
}

uint32_t sjks_prefill_cached(const sjks_prefill *f) { return f->rep.cached_tokens; }

size_t sjks_prefill_next(const sjks_prefill *f, size_t max_len, size_t *pos)
{
    *pos = f->pos;
    size_t left = f->n - f->pos;
    size_t cut_pos = (size_t)f->p.cut * SJKH_BLOCK_TOKENS;
    if (f->pos < cut_pos) { /* canonical: never across a block edge before the cut */
        size_t edge = (f->pos / SJKH_BLOCK_TOKENS + 1) * SJKH_BLOCK_TOKENS;
        if (left > edge - f->pos) left = edge - f->pos;
    }
    return left < max_len ? left : max_len;
}

sjk_status sjks_prefill_fed(sjks_prefill *f, size_t len)
{
    f->pos += len;
    size_t cut_pos = (size_t)f->p.cut * SJKH_BLOCK_TOKENS;
    if (!f->p.cut || f->pos > cut_pos || f->pos % SJKH_BLOCK_TOKENS) return SJK_OK;
    /* a block edge up to the cut: seal it, so the next block sees the canonical state */
    sjk_status res = sjkh_session_seal_to(f->s, (uint32_t)f->pos);
    if (res != SJK_OK || f->pos != cut_pos) return res;
    /* the cut: take the window blocks it needs while the ring still holds them */
    plan *p = &f->p;
    for (uint32_t i = p->wf_cut; i < p->cut; i++) {
        if (p->exists[i][1] == 1 && !p->bad[i][1]) continue;
        size_t n_pc = 0, pn = 0;
        sjkh_block_piece *pc = pieces_of(f->s, 1, i, &n_pc);
        uint8_t *v = NULL;
        if (pc && sjkh_session_block_export(f->s, 1, i, NULL, 0, &pn) == SJK_OK &&
            (v = malloc(sjks_value_nbytes(n_pc, pn)))) {
            sjks_value_meta m = meta(f->st, p, f->ids, 1, i, pc, n_pc);
            f->win_nbytes[i - p->wf_cut] = sjks_value_nbytes(n_pc, pn);
            if (sjkh_session_block_export(f->s, 1, i, v + sjks_value_payload_offset(n_pc), pn, NULL) != SJK_OK ||
                sjks_value_seal(&m, v, f->win_nbytes[i - p->wf_cut]) != SJK_OK) {
                free(v);
                v = NULL;
            }
        }
        free(pc);
        f->win_vals[i - p->wf_cut] = v;
    }
    return SJK_OK;
}

void sjks_prefill_end(sjks_prefill *f, int publish_blocks, sjks_prefill_report *rep)
{
    if (!f) return;
    f->rep.prefilled_tokens = (uint32_t)(f->pos - f->rep.cached_tokens);
    if (f->st) f->st->st.prefilled_tokens += f->rep.prefilled_tokens;
    if (publish_blocks && f->p.cut && f->pos == f->n) {
        double t = now_s();
        publish(f->st, &f->p, f->s, f->ids, f->win_vals, f->win_nbytes, &f->rep);
        f->rep.publish_s = now_s() - t;
    }
    if (rep) *rep = f->rep;
    prefill_free(f);
}

sjk_status sjks_store_prefill(sjks_store *st, sjkh_session *s, const int32_t *ids, size_t n, float *logits,
                              sjks_prefill_report *rep, char *err, size_t err_cap)
{
    if (rep) memset(rep, 0, sizeof *rep);
    sjks_prefill *f = NULL;
    sjk_status res = sjks_prefill_begin(st, s, ids, n, &f);
    if (res != SJK_OK) return res;
    const uint32_t chunk = UINT32_MAX; /* the session splits a chunk into n_batch itself */
    for (size_t pos = 0, len; res == SJK_OK && (len = sjks_prefill_next(f, chunk, &pos)) > 0;) {
        res = sjkh_session_feed(s, ids + pos, len, pos + len == n ? logits : NULL, 0, err, err_cap);
        if (res == SJK_OK) res = sjks_prefill_fed(f, len);
    }
    sjks_prefill_end(f, res == SJK_OK, rep);
    return res;
}
