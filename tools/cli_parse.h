/* cli_parse.h — the one way every sjkvarn command reads its arguments.
 *
 * Numbers are strict: the whole string is the number, in decimal, with nothing before or
 * after it (no space, no sign unless negatives are allowed, no hex, no "inf"/"nan"), and
 * an integer flag refuses "2.7" rather than reading 2. Every flag of every command goes
 * through these, so `-n 2.7`, `--act-quant 0.5`, `tail= 128` and `-t 1e3` are refused
 * alike. Each sjk_cli_flag_* prints "PROG: FLAG needs ..., got 'VALUE'" and returns 0 on
 * a bad value, 1 with *out set otherwise. */
#ifndef SJK_CLI_PARSE_H
#define SJK_CLI_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Strict decimal integer in [lo, hi]: 1 with *out, else 0. */
int sjk_cli_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* Strict decimal real ("0.8", ".5", "2", "1e-3", "-0.5" if lo < 0), finite, in [lo, hi]. */
int sjk_cli_parse_real(const char *s, double lo, double hi, double *out);
/* Sizes: a decimal number (a fraction allowed) and an optional unit: K, M, G, T (also
 * KiB, MiB, GiB, TiB, k, m, g, t: powers of 1024), KB, MB, GB, TB (powers of 1000) or B.
 * "512M", "8G", "8GiB", "1.5G", "123456". 0 for anything else, 0 bytes, or beyond
 * SIZE_MAX. */
int sjk_cli_parse_size(const char *s, size_t *out);

int sjk_cli_flag_u32(const char *prog, const char *flag, const char *v, uint32_t lo, uint32_t hi, uint32_t *out);
int sjk_cli_flag_u64(const char *prog, const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out);
int sjk_cli_flag_real(const char *prog, const char *flag, const char *v, double lo, double hi, double *out);
int sjk_cli_flag_size(const char *prog, const char *flag, const char *v, size_t *out);
/* --window: "f16" or "q8_0" (sjkh_window_type). */
int sjk_cli_flag_window(const char *prog, const char *flag, const char *v, uint32_t *out);

/* The thread rule of every command: -t N takes 1..SJKH_SESSION_MAX_THREADS (256); the
 * default is the online CPUs, clamped to the same range. A session's libsjkvarn cache
 * runs min(N, SJK_CACHE_MAX_THREADS) of them (host/model/kv.h, the same in run, eval,
 * bench and plan). The KV scratch grows with N (per-thread attention buffers), so plan
 * takes the same -t as run. */
uint32_t sjk_cli_threads_default(void);
int sjk_cli_flag_threads(const char *prog, const char *flag, const char *v, uint32_t *out);

/* The one check of a KV configuration string for every command (run, eval, plan,
 * bench): "host-f16", "auto" when allow_auto, or a string sjk_cache_config_parse
 * accepts; at most SJKH_KV_STR_MAX characters. Prints why and returns 0 otherwise. */
int sjk_cli_check_kv(const char *prog, const char *flag, const char *kv, int allow_auto);

#endif
