/* plan_internal.h — what the two files of libsjkplan share: its public header and a few
 * lines of checked arithmetic and error formatting. libsjkplan depends on the public
 * headers of libsjkhost and libsjkvarn only (the Makefile's INCS_PLAN), so, like the host
 * (host/hcommon.h), it keeps its own copies of these few lines. */
#ifndef SJKH_PLAN_INTERNAL_H
#define SJKH_PLAN_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "sjkplan.h"

#define PLAN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PLAN_MAX(a, b) ((a) > (b) ? (a) : (b))
#define PLAN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* *out = a op b; 0 on overflow. */
static inline int plan_mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int plan_add_ok(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

/* The message into err (may be NULL), with every control byte as '?' (the messages quote
 * names read from model files), and returns st. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline sjk_status plan_fail(sjk_status st, char *err, size_t err_cap, const char *fmt, ...)
{
    if (!err || !err_cap) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_cap, fmt, ap);
    va_end(ap);
    for (unsigned char *c = (unsigned char *)err; *c; c++) *c = *c < 0x20 || *c == 0x7f ? '?' : *c;
    return st;
}

#endif
