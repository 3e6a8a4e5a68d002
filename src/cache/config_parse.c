/* config_parse.c — the one string syntax for cache configurations (README, "KV
 * configuration strings"), shared by the CLI, the host and the benchmarks.
 *
 *   config  := spec (":" option)*
 *   spec    := FORMAT | FORMAT "/" FORMAT          uniform K/V row formats ("q8_0/q4_0")
 *            | "sj" [":" BITS] | "kvarn" [":" BITS]
 *   BITS    := K "/" V ["s"|"t"|"tc"|"tr"|"tf"|"trf"] K, V in 2..8: "4/4", "3/3", "3/3s", "3/3t",
 *                                                   "8/4" (s = scalar body, t = trellis, tc =
 *                                                   trellis along the channel axis, tr = the
 *                                                   real-data codebooks, tf / trf = t / tr
 *                                                   with the float codebooks of record
 *                                                   formats 1-3; a tile
 *                                                   above 4 bits is always scalar; none: sj
 *                                                   is scalar when its tiles of 2..4 bits
 *                                                   are all 4 bits and trellis otherwise,
 *                                                   kvarn scalar)
 *   option  := "tail=" N        fixed tail of N positions (kvarn: extra fp16 exact tail)
 *            | "tail_min=" N | "tail_max=" N        adaptive tail bounds (tail_max 0 = fixed)
 *            | "stage=" FORMAT  staging ring format: tq6_0 | q8_0 | f16
 *            | "sink=" N        fp16 sink positions (multiple of 128)
 *            | "center=" 0|1    store ring rows minus the sink's mean row (sj default 1)
 *            | "balance=" sj|reference|off
 *            | "rot" | "rot=" 0|1                   uniform: store rotated rows
 *            | "rot_block=" N                       rotation block (power of two)
 *            | "edge=" BITS     tiered layers: bits of the first/last layers
 *            | "edges=" N       layers at each end that use the edge tier (default 1)
 *
 * `edge=4/4` makes the first and last `edges` layers the same kind with those bits and
 * the body those bits select (the same suffix rules); everything else in the string applies to
 * both tiers. Errors name the offending part: "config 'sj:9/4': bits '9/4' ...". The
 * syntax is strict: numbers are plain decimals ("tail= 128" and "tail=+128" are both
 * refused), an option may appear once ("tail=128:tail=256" is refused, as is "tail" with
 * "tail_min"/"tail_max"), an empty option (a trailing or doubled ':') is refused, and
 * "rot" / "rot=" apply to uniform formats only (sj and kvarn always rotate). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sjkvarn.h"

sjk_layer_config sjk_layer_config_default(void)
{
    sjk_layer_config c;
    memset(&c, 0, sizeof c);
    c.kind = SJK_KIND_SJ;
    c.k_format = SJK_FMT_F16;
    c.v_format = SJK_FMT_F16;
    c.bits_k = 4;
    c.bits_v = 4;
    c.body = SJK_BODY_SCALAR;
    c.balance = SJK_BALANCE_SJ;
    c.staging = SJK_FMT_TQ6_0_STAGE;
    c.center = 1;
    c.sink = 128;
    c.tail_min = 4096;
    c.tail_max = 8192;
    return c;
}

/* docs/DESIGN.md §2.4: a tile above 4 bits is always scalar; the record's body (of its
 * tiles of 2..4 bits) is scalar when each such tile has 4 bits and trellis when one has
 * 2 or 3. So 4/4, 8/4, 6/4, 8/8 are scalar; 3/3, 3/2, 2/2, 8/3 (scalar K, trellis V) are
 * trellis. */
static uint8_t default_body(uint8_t bk, uint8_t bv)
{
    return (bk == 4 || bk > 4) && (bv == 4 || bv > 4) ? SJK_BODY_SCALAR : SJK_BODY_TRELLIS_I8;
}

static void set_err(char *err, size_t cap, const char *str, const char *fmt, const char *part)
{
    if (!err || !cap) return;
    char what[256];
    snprintf(what, sizeof what, fmt, part);
    snprintf(err, cap, "config '%s': %s", str, what);
}

/* Copies the next ':'-separated token of *s into tok (cap bytes). 0 if it does not fit. */
static int next_token(const char **s, char *tok, size_t cap)
{
    const char *e = strchr(*s, ':');
    size_t n = e ? (size_t)(e - *s) : strlen(*s);
    if (n + 1 > cap) return 0;
    memcpy(tok, *s, n);
    tok[n] = 0;
    *s = e ? e + 1 : *s + n;
    return 1;
}

/* Strict decimal: digits only (no space, no sign), at most 2^32 - 1. */
static int parse_u32(const char *s, uint32_t *out)
{
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v > 0xFFFFFFFFull || s[0] == '-' || s[0] == '+') return 0;
    *out = (uint32_t)v;
    return 1;
}

/* "4/4", "3/3", "3/3s", "3/3t", "3/3tc", "3/3tr", "8/4" -> bits and body. Suffix: s = scalar
 * body, t = trellis with sequences along the token axis, tc = trellis along the channel axis,
 * tr = the token-axis trellis with the codebooks trained on real K/V; t and tr read their
 * codebooks on the int8 grid (SJK_BODY_TRELLIS_I8, _REAL_I8: record format 4), and tf, trf
 * name the same bodies with the float codebooks of formats 1 to 3 (the bodies of files
 * written before format 4); ts is the token-axis trellis on the 128-entry tables
 * (SJK_BODY_TRELLIS_S128, record format 5)
 * (of the tiles of 2..4 bits: a wider tile is scalar, and a trellis suffix needs one tile
 * of 2..4 bits). Without a suffix an sj layer gets the default body of docs/DESIGN.md §2.4
 * (default_body); kvarn is always scalar. */
static int parse_bits(const char *s, int kvarn, uint8_t *bk, uint8_t *bv, uint8_t *body)
{
    if (strlen(s) < 3 || s[1] != '/') return 0;
    if (s[0] < '2' || s[0] > '8' || s[2] < '2' || s[2] > '8') return 0;
    const char *sfx = s + 3;
    static const struct { const char *sfx; uint8_t body; } sfxs[] = {
        {"s", SJK_BODY_SCALAR}, {"t", SJK_BODY_TRELLIS_I8}, {"tc", SJK_BODY_TRELLIS_CHANNEL},
        {"tr", SJK_BODY_TRELLIS_REAL_I8}, {"tf", SJK_BODY_TRELLIS}, {"trf", SJK_BODY_TRELLIS_REAL},
        {"ts", SJK_BODY_TRELLIS_S128}};
    int si = -1;
    for (int i = 0; *sfx && i < (int)(sizeof sfxs / sizeof sfxs[0]); i++)
        if (!strcmp(sfx, sfxs[i].sfx)) si = i;
    if (*sfx && si < 0) return 0;
    /* a trellis body codes tiles of 2..4 bits: "8/8t" has none */
    if (*sfx == 't' && s[0] > '4' && s[2] > '4') return 0;
    *bk = (uint8_t)(s[0] - '0');
    *bv = (uint8_t)(s[2] - '0');
    *body = !*sfx ? (kvarn ? SJK_BODY_SCALAR : default_body(*bk, *bv)) : sfxs[si].body;
    return 1;
}

static int parse_format(const char *s, uint8_t *out)
{
    sjk_format f;
    if (!strcmp(s, "tq6_0s")) s = "tq6_0_stage"; /* the short spelling of the staging format */
    if (sjk_format_from_name(s, &f) != SJK_OK) return 0; /* the one table: format_traits.c */
    *out = (uint8_t)f;
    return 1;
}

sjk_status sjk_cache_config_parse(const char *str, uint32_t n_layers, sjk_layer_config *out,
                                  char *err, size_t err_cap)
{
    if (err && err_cap) err[0] = 0;
    if (!str || !out || n_layers == 0) {
        if (err && err_cap) snprintf(err, err_cap, "config: missing string, output or layers");
        return SJK_ERR_PARAM;
    }
    sjk_layer_config c = sjk_layer_config_default();
    char tok[64];
    const char *s = str;
    size_t slen = strlen(str);
    if (slen && (str[slen - 1] == ':' || strstr(str, "::"))) {
        set_err(err, err_cap, str, "empty option%s", slen && str[slen - 1] == ':' ? " (trailing ':')" : " ('::')");
        return SJK_ERR_PARAM;
    }
    if (!next_token(&s, tok, sizeof tok) || !tok[0]) {
        set_err(err, err_cap, str, "empty or overlong kind '%s'", tok);
        return SJK_ERR_PARAM;
    }
    int compressed = 0;
    if (!strcmp(tok, "sj") || !strcmp(tok, "kvarn")) {
        compressed = 1;
        if (!strcmp(tok, "kvarn")) {
            c.kind = SJK_KIND_KVARN;
            c.balance = SJK_BALANCE_REFERENCE;
            c.staging = SJK_FMT_F16;
            c.center = 0;
            c.tail_min = 0;
            c.tail_max = 0;
        }
        /* Optional bits token. */
        const char *save = s;
        char bt[64];
        if (*s && next_token(&s, bt, sizeof bt) && strchr(bt, '/') && !strchr(bt, '=')) {
            if (!parse_bits(bt, c.kind == SJK_KIND_KVARN, &c.bits_k, &c.bits_v, &c.body)) {
                set_err(err, err_cap, str, "bits '%s': expected K/V with K, V in 2..8 and an optional 's', 't', 'tc', 'tr', 'tf', 'trf' or 'ts' (a trellis needs a width of 2..4)", bt);
                return SJK_ERR_PARAM;
            }
        } else {
            s = save;
        }
    } else {
        char *slash = strchr(tok, '/');
        char kf[32], vf[32];
        if (slash) {
            size_t n = (size_t)(slash - tok);
            if (n >= sizeof kf || strlen(slash + 1) >= sizeof vf) {
                set_err(err, err_cap, str, "format pair '%s' too long", tok);
                return SJK_ERR_PARAM;
            }
            memcpy(kf, tok, n); kf[n] = 0;
            strcpy(vf, slash + 1);
        } else {
            if (strlen(tok) >= sizeof kf) { set_err(err, err_cap, str, "unknown kind '%s'", tok); return SJK_ERR_PARAM; }
            strcpy(kf, tok);
            strcpy(vf, tok);
        }
        c.kind = SJK_KIND_UNIFORM;
        if (!parse_format(kf, &c.k_format) || c.k_format == SJK_FMT_TQ6_0_STAGE) {
            set_err(err, err_cap, str, "unknown kind or K format '%s' (sj, kvarn, f16, q8_0, q4_0, ...)", kf);
            return SJK_ERR_PARAM;
        }
        if (!parse_format(vf, &c.v_format) || c.v_format == SJK_FMT_TQ6_0_STAGE) {
            set_err(err, err_cap, str, "unknown V format '%s'", vf);
            return SJK_ERR_PARAM;
        }
    }

    int have_edge = 0;
    uint8_t ebk = 0, ebv = 0, ebody = 0;
    uint32_t edges = 1;
    static const char *const opt_names[] = {"tail", "tail_min", "tail_max", "stage", "center", "sink",
                                            "balance", "rot", "rot_block", "edge", "edges"};
    unsigned seen = 0; /* bit i: opt_names[i] given */
    while (*s) {
        if (!next_token(&s, tok, sizeof tok)) {
            set_err(err, err_cap, str, "option too long near '%.40s'", s);
            return SJK_ERR_PARAM;
        }
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : "";
        if (eq) *eq = 0;
        int ok = 1, needs_compressed = 1;
        for (unsigned i = 0; i < sizeof opt_names / sizeof opt_names[0]; i++)
            if (!strcmp(tok, opt_names[i])) {
                if (seen & (1u << i)) {
                    if (eq) *eq = '=';
                    set_err(err, err_cap, str, "option '%s' given twice", opt_names[i]);
                    return SJK_ERR_PARAM;
                }
                seen |= 1u << i;
            }
        if ((seen & 1u) && (seen & 6u)) {
            set_err(err, err_cap, str, "%s: 'tail' (fixed) and 'tail_min'/'tail_max' (adaptive) exclude each other",
                    "tail");
            return SJK_ERR_PARAM;
        }
        if (!strcmp(tok, "tail")) {
            ok = parse_u32(val, &c.tail_min);
            c.tail_max = 0;
        } else if (!strcmp(tok, "tail_min")) {
            ok = parse_u32(val, &c.tail_min);
        } else if (!strcmp(tok, "tail_max")) {
            ok = parse_u32(val, &c.tail_max);
        } else if (!strcmp(tok, "stage")) {
            ok = parse_format(val, &c.staging);
            if (ok && c.staging == SJK_FMT_TQ6_0) c.staging = SJK_FMT_TQ6_0_STAGE;
            ok = ok && (c.staging == SJK_FMT_TQ6_0_STAGE || c.staging == SJK_FMT_Q8_0 ||
                        c.staging == SJK_FMT_F16);
        } else if (!strcmp(tok, "center")) {
            if (!strcmp(val, "1")) c.center = 1;
            else if (!strcmp(val, "0")) c.center = 0;
            else ok = 0;
        } else if (!strcmp(tok, "sink")) {
            ok = parse_u32(val, &c.sink) && c.sink % SJK_GROUP == 0;
        } else if (!strcmp(tok, "balance")) {
            if (!strcmp(val, "sj")) c.balance = SJK_BALANCE_SJ;
            else if (!strcmp(val, "reference")) c.balance = SJK_BALANCE_REFERENCE;
            else if (!strcmp(val, "off")) c.balance = SJK_BALANCE_OFF;
            else ok = 0;
        } else if (!strcmp(tok, "rot")) {
            needs_compressed = 0;
            if (compressed) {
                set_err(err, err_cap, str, "option '%s' is for uniform formats (sj and kvarn always rotate)", "rot");
                return SJK_ERR_PARAM;
            }
            if (!eq || !strcmp(val, "1")) c.rotate = 1;
            else if (!strcmp(val, "0")) c.rotate = 0;
            else ok = 0;
        } else if (!strcmp(tok, "rot_block")) {
            needs_compressed = 0;
            ok = parse_u32(val, &c.rot_block) && c.rot_block >= 2 && (c.rot_block & (c.rot_block - 1)) == 0;
        } else if (!strcmp(tok, "edge")) {
            ok = parse_bits(val, c.kind == SJK_KIND_KVARN, &ebk, &ebv, &ebody);
            have_edge = 1;
        } else if (!strcmp(tok, "edges")) {
            ok = parse_u32(val, &edges) && edges >= 1;
        } else {
            if (eq) *eq = '=';
            set_err(err, err_cap, str, "unknown option '%s' (tail, tail_min, tail_max, stage, center, sink, balance, rot, rot_block, edge, edges)", tok);
            return SJK_ERR_PARAM;
        }
        if (eq) *eq = '=';
        if (needs_compressed && !compressed) {
            set_err(err, err_cap, str, "option '%s' needs an sj or kvarn configuration", tok);
            return SJK_ERR_PARAM;
        }
        if (!ok || (eq == NULL && needs_compressed)) {
            set_err(err, err_cap, str, "bad value in option '%s'", tok);
            return SJK_ERR_PARAM;
        }
    }
    if (c.kind == SJK_KIND_KVARN && (c.body != SJK_BODY_SCALAR || ebody != SJK_BODY_SCALAR)) {
        set_err(err, err_cap, str, "%s: kvarn is paper-faithful and has scalar bodies only (drop the 't')", "bits");
        return SJK_ERR_PARAM;
    }
    if (compressed && c.tail_max != 0 && c.tail_max < c.tail_min + SJK_GROUP) {
        set_err(err, err_cap, str, "%s must be 0 (fixed tail) or at least tail_min + 128", "tail_max");
        return SJK_ERR_PARAM;
    }
    for (uint32_t l = 0; l < n_layers; l++) out[l] = c;
    if (have_edge) {
        for (uint32_t i = 0; i < edges && i < n_layers; i++) {
            uint32_t idx[2] = {i, n_layers - 1 - i};
            for (int j = 0; j < 2; j++) {
                out[idx[j]].bits_k = ebk;
                out[idx[j]].bits_v = ebv;
                out[idx[j]].body = ebody;
            }
        }
    }
    return SJK_OK;
}

/* A format's name as a configuration string spells it: the traits table's (format_traits.c),
 * except the staging ring's tq6_0_stage, which a configuration calls "stage=tq6_0". */
static const char *format_name(uint8_t f)
{
    if (f == SJK_FMT_TQ6_0_STAGE) return "tq6_0";
    const sjk_format_info *fi = sjk_format_get((sjk_format)f);
    return fi ? fi->name : "?";
}

sjk_status sjk_layer_config_str(const sjk_layer_config *c, char *dst, size_t dst_cap)
{
    if (!c || !dst || !dst_cap) return SJK_ERR_PARAM;
    char buf[160];
    int n;
    if (c->kind == SJK_KIND_UNIFORM) {
        if (c->k_format == c->v_format) n = snprintf(buf, sizeof buf, "%s", format_name(c->k_format));
        else n = snprintf(buf, sizeof buf, "%s/%s", format_name(c->k_format), format_name(c->v_format));
        if (c->rotate) n += snprintf(buf + n, sizeof buf - (size_t)n, ":rot");
    } else {
        sjk_layer_config d = sjk_layer_config_default();
        int kv = c->kind == SJK_KIND_KVARN;
        /* Trellis bodies always say so ("t", "tc", "tr", "tf", "trf", "ts"); a scalar body says "s"
         * only where the bits alone would select trellis, so every string parses back to the
         * same body. */
        const char *sfx = c->body == SJK_BODY_TRELLIS_I8 ? "t" : c->body == SJK_BODY_TRELLIS_CHANNEL ? "tc"
                        : c->body == SJK_BODY_TRELLIS_REAL_I8 ? "tr" : c->body == SJK_BODY_TRELLIS ? "tf"
                        : c->body == SJK_BODY_TRELLIS_REAL ? "trf" : c->body == SJK_BODY_TRELLIS_S128 ? "ts"
                        : (!kv && default_body(c->bits_k, c->bits_v) != SJK_BODY_SCALAR) ? "s" : "";
        n = snprintf(buf, sizeof buf, "%s:%u/%u%s", kv ? "kvarn" : "sj", c->bits_k, c->bits_v, sfx);
        uint32_t dmin = kv ? 0 : d.tail_min, dmax = kv ? 0 : d.tail_max;
        if (c->tail_max == 0 && (c->tail_min != dmin || dmax != 0))
            n += snprintf(buf + n, sizeof buf - (size_t)n, ":tail=%u", c->tail_min);
        else if (c->tail_max != 0 && (c->tail_min != dmin || c->tail_max != dmax))
            n += snprintf(buf + n, sizeof buf - (size_t)n, ":tail_min=%u:tail_max=%u", c->tail_min, c->tail_max);
        uint8_t dst_stage = kv ? SJK_FMT_F16 : SJK_FMT_TQ6_0_STAGE;
        if (c->staging != dst_stage) n += snprintf(buf + n, sizeof buf - (size_t)n, ":stage=%s", format_name(c->staging));
        if (c->center != (kv ? 0 : 1)) n += snprintf(buf + n, sizeof buf - (size_t)n, ":center=%u", c->center);
        if (c->sink != 128) n += snprintf(buf + n, sizeof buf - (size_t)n, ":sink=%u", c->sink);
        uint8_t dbal = kv ? SJK_BALANCE_REFERENCE : SJK_BALANCE_SJ;
        if (c->balance != dbal) {
            static const char *const bn[] = {"sj", "reference", "off"};
            n += snprintf(buf + n, sizeof buf - (size_t)n, ":balance=%s", c->balance < 3 ? bn[c->balance] : "?");
        }
    }
    if (c->rot_block) n += snprintf(buf + n, sizeof buf - (size_t)n, ":rot_block=%u", c->rot_block);
    if (n < 0 || (size_t)n + 1 > dst_cap) return SJK_ERR_BUFFER;
    memcpy(dst, buf, (size_t)n + 1);
    return SJK_OK;
}
