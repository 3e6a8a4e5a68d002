/* json_lite.h — a strict JSON checker for tests that look at the CLI's JSON output
 * (RFC 8259: one value, optional surrounding whitespace; no comments, no trailing commas).
 * It builds no tree: it validates and reports the member names of the first object level,
 * which is what an output-shape check needs. */
#ifndef SJK_TEST_JSON_LITE_H
#define SJK_TEST_JSON_LITE_H

#include <stddef.h>

/* Validates text[0..n). Returns 1 if it is exactly one JSON value, else 0 with err
 * (if non-NULL) naming the byte offset and what was expected.
 *
 * keys (may be NULL): a comma-separated list of member names, e.g. "format,snr_db".
 * When given, the "records" of the document must each hold every listed name as a
 * direct member: the document itself if it is an object, or every element of it if it
 * is an array (each element must then be an object, and the array must not be empty).
 * *n_records (if non-NULL) receives the number of records checked. */
int json_lite_check(const char *text, size_t n, const char *keys, size_t *n_records, char *err,
                    size_t err_cap);

#endif
