/* kv_auto.h — `--kv auto --mem-budget SIZE` (the automatic cache tier of plan/include/sjkplan.h).
 *
 * Wiring into a command is two calls:
 *   in the flag loop:   else if ((r = sjk_kv_auto_flag(&ka, prog, flag, value)) != 0) ...
 *                       (r > 0: consumed the value; r < 0: bad value, message printed)
 *   before the session: sjk_kv_auto_resolve(&ka, prog, path, name, ctx, batch, threads,
 *                                           kv, chosen, sizeof chosen)
 * resolve passes an explicit --kv through unchanged (checking it against --mem-budget
 * when one is given) and replaces "auto" with the ladder's choice, logging why on
 * stderr. */
#ifndef SJK_KV_AUTO_H
#define SJK_KV_AUTO_H

#include <stddef.h>
#include <stdint.h>

#include "models.h" /* sjk_cli_resolve_model, sjk_cli_model_key */

typedef struct sjk_kv_auto_opts {
    const char *budget;     /* --mem-budget SIZE (512M, 8G, 8GiB, bytes) */
    const char *kl_floor;   /* --kl-floor X | off (default SJK_KV_AUTO_KL_FLOOR) */
    const char *floor_path; /* --quality-floor FILE (default: see sjk_cli_floor_path) */
} sjk_kv_auto_opts;

/* The default quality floor: the largest measured mean KL (nats) a rung may have. A
 * policy choice, not a measurement (docs/PLAN.md). */
#define SJK_KV_AUTO_KL_FLOOR 0.02

/* Usage lines for the three flags (for a command's --help). */
extern const char sjk_kv_auto_usage[];

/* If flag is --mem-budget, --kl-floor or --quality-floor: stores value and returns 1, or
 * prints why it is bad and returns -1. Returns 0 for any other flag. */
int sjk_kv_auto_flag(sjk_kv_auto_opts *o, const char *prog, const char *flag, const char *value);

/* The floor to apply: the --kl-floor value, -1 for "off", else SJK_KV_AUTO_KL_FLOOR. */
double sjk_kv_auto_kl_floor(const sjk_kv_auto_opts *o);

/* The quality-floor table to read: o->floor_path, else $SJK_QUALITY_FLOOR, else
 * docs/quality-floor.csv beside the executable (., .., ../..), else in the working
 * directory. Returns path or NULL when none exists. */
const char *sjk_cli_floor_path(const sjk_kv_auto_opts *o, char *buf, size_t cap);

/* See the top of the file. Returns 1 with the configuration to use in out, or 0 after
 * printing why (a bad budget, nothing fits: with what would). */
int sjk_kv_auto_resolve(const sjk_kv_auto_opts *o, const char *prog, const char *model_path,
                        const char *model_name, uint32_t n_ctx, uint32_t n_batch, uint32_t n_threads,
                        const char *kv, char *out, size_t cap);

/* The same for n_sessions sessions sharing the budget (sjkvarn serve --parallel), with
 * the outcome kept: the configuration, the one-line reason (as logged), the plan's total
 * for all sessions (0 when nothing was planned) and whether it fits the budget (1 without
 * a budget). An explicit --kv that does not fit still returns 1 with fits = 0. */
typedef struct sjk_kv_auto_result {
    char kv[64];
    char reason[3300];
    size_t planned_nbytes;
    int fits;
} sjk_kv_auto_result;
int sjk_kv_auto_resolve_sessions(const sjk_kv_auto_opts *o, const char *prog, const char *model_path,
                                 const char *model_name, uint32_t n_ctx, uint32_t n_batch, uint32_t n_threads,
                                 uint32_t n_sessions, const char *kv, sjk_kv_auto_result *res);

#endif
