/* cli_parse.c — see cli_parse.h. */
#include "cli_parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sjkhost.h"
#include "sjkvarn.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int sjk_cli_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !is_digit(*s)) return 0;
    uint64_t v = 0;
    for (; *s; s++) {
        if (!is_digit(*s)) return 0;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* [-] digits [. digits] [e [+-] digits], at least one digit before the exponent. */
static int real_syntax(const char *s, int allow_minus)
{
    if (*s == '-' && allow_minus) s++;
    int nd = 0;
    while (is_digit(*s)) s++, nd++;
    if (*s == '.') {
        s++;
        while (is_digit(*s)) s++, nd++;
    }
    if (!nd) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!is_digit(*s)) return 0;
        while (is_digit(*s)) s++;
    }
    return *s == 0;
}

int sjk_cli_parse_real(const char *s, double lo, double hi, double *out)
{
    if (!s || !real_syntax(s, lo < 0)) return 0;
    errno = 0;
    char *end;
    double d = strtod(s, &end);
    if (errno || *end || !isfinite(d) || !(d >= lo && d <= hi)) return 0;
    *out = d;
    return 1;
}

int sjk_cli_parse_size(const char *s, size_t *out)
{
    if (!s) return 0;
    const char *p = s;
    while (is_digit(*p) || *p == '.') p++;
    char num[64];
    size_t nn = (size_t)(p - s);
    if (nn == 0 || nn >= sizeof num) return 0;
    memcpy(num, s, nn);
    num[nn] = 0;
    double v;
    if (!sjk_cli_parse_real(num, 0, 1e300, &v) || strchr(num, 'e')) return 0;
    double mult = 1;
    if (*p) {
        static const char units[] = "KMGT";
        char u0 = *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        const char *u = u0 ? strchr(units, u0) : NULL;
        const char *rest = p + 1;
        if (!u) {
            if (!(u0 == 'B' && !*rest)) return 0;
        } else {
            double base;
            if (!*rest || ((rest[0] == 'i' || rest[0] == 'I') && (rest[1] == 'B' || rest[1] == 'b') && !rest[2]))
                base = 1024;
            else if ((rest[0] == 'B' || rest[0] == 'b') && !rest[1]) base = 1000;
            else return 0;
            mult = pow(base, (double)(u - units) + 1);
        }
    }
    double bytes = floor(v * mult);
    if (!(bytes >= 1) || bytes >= 18446744073709551615.0 || bytes > (double)SIZE_MAX) return 0;
    *out = (size_t)bytes;
    return 1;
}

static int bad(const char *prog, const char *flag, const char *what, const char *v)
{
    if (v) fprintf(stderr, "%s: %s needs %s, got '%s'\n", prog, flag, what, v);
    else fprintf(stderr, "%s: %s needs %s\n", prog, flag, what);
    return 0;
}

int sjk_cli_flag_u64(const char *prog, const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (sjk_cli_parse_u64(v, lo, hi, out)) return 1;
    char what[96];
    snprintf(what, sizeof what, "an integer in [%llu, %llu]", (unsigned long long)lo, (unsigned long long)hi);
    return bad(prog, flag, what, v);
}

int sjk_cli_flag_u32(const char *prog, const char *flag, const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t x;
    if (!sjk_cli_flag_u64(prog, flag, v, lo, hi, &x)) return 0;
    *out = (uint32_t)x;
    return 1;
}

int sjk_cli_flag_real(const char *prog, const char *flag, const char *v, double lo, double hi, double *out)
{
    if (sjk_cli_parse_real(v, lo, hi, out)) return 1;
    char what[96];
    snprintf(what, sizeof what, "a number in [%g, %g]", lo, hi);
    return bad(prog, flag, what, v);
}

int sjk_cli_flag_size(const char *prog, const char *flag, const char *v, size_t *out)
{
    if (sjk_cli_parse_size(v, out)) return 1;
    return bad(prog, flag, "a size (512M, 8G, 8GiB, bytes)", v);
}

int sjk_cli_flag_window(const char *prog, const char *flag, const char *v, uint32_t *out)
{
    for (uint32_t t = 0; v && sjkh_window_type_name(t); t++)
        if (!strcmp(v, sjkh_window_type_name(t))) {
            *out = t;
            return 1;
        }
    return bad(prog, flag, "f16 or q8_0", v);
}

uint32_t sjk_cli_threads_default(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > SJKH_SESSION_MAX_THREADS ? SJKH_SESSION_MAX_THREADS : (uint32_t)n;
}

int sjk_cli_flag_threads(const char *prog, const char *flag, const char *v, uint32_t *out)
{
    return sjk_cli_flag_u32(prog, flag, v, 1, SJKH_SESSION_MAX_THREADS, out);
}

int sjk_cli_check_kv(const char *prog, const char *flag, const char *kv, int allow_auto)
{
    if (!kv || !*kv) return bad(prog, flag, "a KV configuration (f16, q8_0/q4_0, sj:4/4, ...)", kv);
    if (strlen(kv) > SJKH_KV_STR_MAX) {
        fprintf(stderr, "%s: %s '%.40s...' is longer than %d characters\n", prog, flag, kv, SJKH_KV_STR_MAX);
        return 0;
    }
    if (!strcmp(kv, "host-f16") || (allow_auto && !strcmp(kv, "auto"))) return 1;
    sjk_layer_config c;
    char err[256], rest[SJKH_KV_STR_MAX + 1];
    unsigned mask;
    int exact = sjkh_kv_parse_exact(kv, rest, sizeof rest, &mask, err, sizeof err);
    if (exact < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, flag, err);
        return 0;
    }
    if (exact) kv = rest;
    if (sjk_cache_config_parse(kv, 1, &c, err, sizeof err) != SJK_OK) {
        fprintf(stderr, "%s: %s: %s\n", prog, flag, err);
        return 0;
    }
    return 1;
}
