/* json_lite.c — see json_lite.h. A recursive-descent validator; depth is bounded so a
 * hostile input cannot exhaust the stack. */
#include "json_lite.h"

#include <stdio.h>
#include <string.h>

#define JL_MAX_DEPTH 256
#define JL_MAX_KEYS 32

typedef struct jl {
    const char *s;
    size_t n, i;
    const char *fail;        /* what was expected at i, or NULL */
    /* required names of a record, and which the current record has shown */
    size_t n_keys;
    const char *key[JL_MAX_KEYS];
    size_t key_len[JL_MAX_KEYS];
    unsigned seen;
} jl;

static void ws(jl *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int bad(jl *p, const char *what)
{
    if (!p->fail) p->fail = what;
    return 0;
}

static int hexd(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* A string at p->i; *b, *len receive its raw contents (escapes not decoded). */
static int string(jl *p, size_t *b, size_t *len)
{
    if (p->i >= p->n || p->s[p->i] != '"') return bad(p, "a string");
    size_t start = ++p->i;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            if (b) *b = start, *len = p->i - start;
            p->i++;
            return 1;
        }
        if (c < 0x20) return bad(p, "no control character inside a string");
        if (c == '\\') {
            if (++p->i >= p->n) break;
            char e = p->s[p->i];
            if (e == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (p->i + (size_t)k >= p->n || !hexd(p->s[p->i + (size_t)k])) return bad(p, "four hex digits after \\u");
                p->i += 4;
            } else if (!strchr("\"\\/bfnrt", e) || !e) {
                return bad(p, "a valid escape");
            }
        }
        p->i++;
    }
    return bad(p, "the end of the string");
}

static int digits(jl *p)
{
    size_t s = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    return p->i > s;
}

static int number(jl *p)
{
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i < p->n && p->s[p->i] == '0') p->i++;
    else if (!digits(p)) return bad(p, "a number");
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (!digits(p)) return bad(p, "digits after the decimal point");
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (!digits(p)) return bad(p, "exponent digits");
    }
    return 1;
}

static int lit(jl *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k)) return bad(p, "a value");
    p->i += k;
    return 1;
}

/* record = 1: this object is a record; note its member names. */
static int value(jl *p, int depth, int record);

static int object(jl *p, int depth, int record)
{
    p->i++; /* '{' */
    ws(p);
    if (p->i < p->n && p->s[p->i] == '}') { p->i++; return 1; }
    for (;;) {
        size_t b = 0, len = 0;
        ws(p);
        if (!string(p, &b, &len)) return 0;
        if (record)
            for (size_t k = 0; k < p->n_keys; k++)
                if (len == p->key_len[k] && !memcmp(p->s + b, p->key[k], len)) p->seen |= 1u << k;
        ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') return bad(p, "':'");
        p->i++;
        if (!value(p, depth + 1, 0)) return 0;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == '}') { p->i++; return 1; }
        return bad(p, "',' or '}'");
    }
}

static int value(jl *p, int depth, int record)
{
    if (depth > JL_MAX_DEPTH) return bad(p, "less nesting");
    ws(p);
    if (p->i >= p->n) return bad(p, "a value");
    char c = p->s[p->i];
    if (c == '{') return object(p, depth, record);
    if (c == '[') {
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ']') { p->i++; return 1; }
        for (;;) {
            if (!value(p, depth + 1, 0)) return 0;
            ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == ']') { p->i++; return 1; }
            return bad(p, "',' or ']'");
        }
    }
    if (c == '"') return string(p, NULL, NULL);
    if (c == 't') return lit(p, "true");
    if (c == 'f') return lit(p, "false");
    if (c == 'n') return lit(p, "null");
    return number(p);
}

static void set_err(char *err, size_t cap, const char *fmt, size_t at, const char *what)
{
    if (err && cap) snprintf(err, cap, fmt, at, what);
}

/* One record (an object) at p->i: validates it and checks that it has every key. */
static int record(jl *p, size_t *n_records, char *err, size_t err_cap)
{
    size_t at = p->i;
    p->seen = 0;
    if (p->i >= p->n || p->s[p->i] != '{') {
        set_err(err, err_cap, "at byte %zu: %s", at, "an object (a record)");
        return 0;
    }
    if (!value(p, 1, 1)) return 0;
    for (size_t k = 0; k < p->n_keys; k++)
        if (!(p->seen & (1u << k))) {
            char what[96];
            snprintf(what, sizeof what, "member \"%.*s\"", (int)p->key_len[k], p->key[k]);
            set_err(err, err_cap, "record at byte %zu lacks %s", at, what);
            return 0;
        }
    if (n_records) (*n_records)++;
    return 1;
}

int json_lite_check(const char *text, size_t n, const char *keys, size_t *n_records, char *err, size_t err_cap)
{
    jl p;
    memset(&p, 0, sizeof p);
    p.s = text;
    p.n = n;
    if (n_records) *n_records = 0;
    if (err && err_cap) err[0] = 0;
    for (const char *k = keys; k && *k && p.n_keys < JL_MAX_KEYS;) {
        const char *e = strchr(k, ',');
        size_t len = e ? (size_t)(e - k) : strlen(k);
        p.key[p.n_keys] = k;
        p.key_len[p.n_keys++] = len;
        k += len + (e ? 1 : 0);
    }
    int ok;
    ws(&p);
    if (!keys) {
        ok = value(&p, 0, 0);
    } else if (p.i < p.n && p.s[p.i] == '[') {
        p.i++;
        ws(&p);
        ok = 1;
        if (p.i < p.n && p.s[p.i] == ']') {
            set_err(err, err_cap, "at byte %zu: %s", p.i, "records in the array");
            return 0;
        }
        for (;;) {
            ws(&p);
            if (!(ok = record(&p, n_records, err, err_cap))) break;
            ws(&p);
            if (p.i < p.n && p.s[p.i] == ',') { p.i++; continue; }
            if (p.i < p.n && p.s[p.i] == ']') { p.i++; break; }
            ok = bad(&p, "',' or ']'");
            break;
        }
    } else {
        ok = record(&p, n_records, err, err_cap);
    }
    if (ok) {
        ws(&p);
        if (p.i != p.n) ok = bad(&p, "the end of the text");
    }
    if (!ok && p.fail && !(err && err_cap && err[0])) set_err(err, err_cap, "at byte %zu: expected %s", p.i, p.fail);
    return ok;
}
