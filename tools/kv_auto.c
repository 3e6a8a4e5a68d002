/* kv_auto.c — `--kv auto` for the commands (tools/kv_auto.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_parse.h"
#include "kv_auto.h"
#include "sjkplan.h"

const char sjk_kv_auto_usage[] =
    "      --kv auto          choose the cache tier: the least compression of f16, q8_0/q8_0,\n"
    "                         sj:6/6, q8_0/q4_0, sj:6/4, sj:4/4, sj:5/3t, sj:4/4t and sj:4/4 with q8_0 tails,\n"
    "                         sj:4/3t, sj:3/2t (a 1,024 q8_0 tail or a short ring; each trellis\n"
    "                         rung or its real-data twin tr; `plan` lists them in full) that\n"
    "                         fits --mem-budget, is allowed by the quality floor and is not\n"
    "                         beaten by a smaller rung measured lower in the same study,\n"
    "                         each by its study at the context nearest to --ctx (docs/PLAN.md)\n"
    "      --mem-budget SIZE  KV memory budget (512M, 8G, 8GiB, bytes)\n"
    "      --kl-floor X|off   largest measured mean KL a tier may have (default 0.02)\n"
    "      --quality-floor F  the KL table (default docs/quality-floor.csv)\n";


int sjk_kv_auto_flag(sjk_kv_auto_opts *o, const char *prog, const char *flag, const char *value)
{
    const char **slot = NULL;
    if (!strcmp(flag, "--mem-budget")) slot = &o->budget;
    else if (!strcmp(flag, "--kl-floor")) slot = &o->kl_floor;
    else if (!strcmp(flag, "--quality-floor")) slot = &o->floor_path;
    else return 0;
    if (!value) {
        fprintf(stderr, "%s: %s needs a value\n", prog, flag);
        return -1;
    }
    if (slot == &o->budget) {
        size_t b;
        if (!sjk_cli_flag_size(prog, flag, value, &b)) return -1;
    } else if (slot == &o->kl_floor && strcmp(value, "off")) {
        double d;
        if (!sjk_cli_parse_real(value, 0, 1e9, &d)) {
            fprintf(stderr, "%s: --kl-floor '%s' is neither a mean KL >= 0 nor 'off'\n", prog, value);
            return -1;
        }
    }
    *slot = value;
    return 1;
}

double sjk_kv_auto_kl_floor(const sjk_kv_auto_opts *o)
{
    double d = SJK_KV_AUTO_KL_FLOOR;
    if (o->kl_floor && !strcmp(o->kl_floor, "off")) return -1.0;
    if (o->kl_floor) sjk_cli_parse_real(o->kl_floor, 0, 1e9, &d); /* checked by sjk_kv_auto_flag */
    return d;
}

const char *sjk_cli_floor_path(const sjk_kv_auto_opts *o, char *buf, size_t cap)
{
    struct stat sb;
    if (o && o->floor_path) {
        snprintf(buf, cap, "%s", o->floor_path);
        return buf; /* named: reading it reports any error */
    }
    const char *env = getenv("SJK_QUALITY_FLOOR");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return buf;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        static const char *const up[] = {"", "/..", "/../.."};
        for (size_t i = 0; i < 3; i++) {
            if (snprintf(buf, cap, "%s%s/docs/quality-floor.csv", exe, up[i]) >= (int)cap) continue;
            if (stat(buf, &sb) == 0) {
                char real[4096];
                if (realpath(buf, real) && strlen(real) < cap) strcpy(buf, real);
                return buf;
            }
        }
    }
    snprintf(buf, cap, "docs/quality-floor.csv");
    return stat(buf, &sb) == 0 ? buf : NULL;
}

int sjk_kv_auto_resolve(const sjk_kv_auto_opts *o, const char *prog, const char *model_path, const char *model_name,
                        uint32_t n_ctx, uint32_t n_batch, uint32_t n_threads, const char *kv, char *out, size_t cap)
{
    sjk_kv_auto_result res;
    if (!sjk_kv_auto_resolve_sessions(o, prog, model_path, model_name, n_ctx, n_batch, n_threads, 1, kv, &res))
        return 0;
    if (snprintf(out, cap, "%s", res.kv) >= (int)cap) return 0;
    return 1;
}

int sjk_kv_auto_resolve_sessions(const sjk_kv_auto_opts *o, const char *prog, const char *model_path,
                                 const char *model_name, uint32_t n_ctx, uint32_t n_batch, uint32_t n_threads,
                                 uint32_t n_sessions, const char *kv, sjk_kv_auto_result *res)
{
    memset(res, 0, sizeof *res);
    res->fits = 1;
    char *out = res->kv;
    size_t cap = sizeof res->kv;
    int is_auto = kv && !strcmp(kv, "auto");
    if (!is_auto && !o->budget) { /* nothing to decide or check */
        if (snprintf(out, cap, "%s", kv ? kv : "f16") >= (int)cap) {
            fprintf(stderr, "%s: --kv '%s' is too long\n", prog, kv);
            return 0;
        }
        snprintf(res->reason, sizeof res->reason, "explicit --kv %s (no --mem-budget to check it against)", out);
        return 1;
    }
    if (is_auto && !o->budget) {
        fprintf(stderr, "%s: --kv auto needs --mem-budget SIZE (the KV memory to fit in)\n", prog);
        return 0;
    }
    sjkh_plan_model *m = calloc(1, sizeof *m);
    sjkh_quality_floor *floor = NULL;
    int ok = 0;
    char err[512] = "", fbuf[4096], key[128];
    if (!m) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 0;
    }
    if (sjkh_plan_model_open(model_path, m, err, sizeof err)) {
        fprintf(stderr, "%s: --kv auto: %s\n", prog, err);
        goto done;
    }
    sjkh_tier_request r = {kv, 0, NULL, NULL, SJK_KV_AUTO_KL_FLOOR};
    sjk_cli_parse_size(o->budget, &r.budget_nbytes);
    if (o->kl_floor) r.max_kl = sjk_kv_auto_kl_floor(o);
    sjk_cli_model_key(model_name ? model_name : model_path, key, sizeof key);
    r.model_key = key;
    if (is_auto && r.max_kl >= 0) {
        const char *fp = sjk_cli_floor_path(o, fbuf, sizeof fbuf);
        if (!fp) {
            fprintf(stderr, "%s: kv auto: no quality-floor table found (docs/quality-floor.csv); only f16 is "
                    "allowed under the floor\n", prog);
        } else if (sjkh_quality_floor_load(fp, &floor, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", prog, err);
            goto done;
        }
    }
    r.floor = floor;
    sjkh_plan_params p = {n_ctx, n_batch, n_threads, n_sessions ? n_sessions : 1,
                          SJKH_WINDOW_F16}; /* f16 windows: an upper bound */
    sjkh_tier_choice *c = calloc(1, sizeof *c);
    if (!c) goto done;
    sjk_status st = sjkh_plan_choose_tier(m, &p, &r, c);
    snprintf(res->reason, sizeof res->reason, "%s", c->reason);
    if (is_auto && floor) {
        size_t n = strlen(res->reason);
        snprintf(res->reason + n, sizeof res->reason - n, " [quality floor: mean KL <= %g, table %s]", r.max_kl,
                 floor->path);
    }
    res->planned_nbytes = c->size.total_nbytes;
    res->fits = st == SJK_OK && c->fits;
    if (st) {
        fprintf(stderr, "%s: %s%s\n", prog, is_auto ? "kv auto: " : "", c->reason);
        free(c);
        goto done;
    }
    fprintf(stderr, "%s: %s\n", prog, res->reason);
    if (snprintf(out, cap, "%s", c->kv) >= (int)cap) {
        free(c);
        goto done;
    }
    free(c);
    ok = 1;
done:
    sjkh_quality_floor_free(floor);
    free(m);
    return ok;
}
