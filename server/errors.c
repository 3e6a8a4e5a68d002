/* errors.c — error replies in the OpenAI shape and the API key check.
 *
 *   {"error": {"code": 400, "message": "...", "type": "invalid_request_error"}}
 *
 * Types by status, as OpenAI-compatible local servers use them: 400 invalid_request_error
 * (exceed_context_size_error when the prompt does not fit, with n_prompt_tokens and
 * n_ctx), 401 authentication_error, 404 not_found_error, 405 invalid_request_error, 409
 * invalid_request_error, 413 invalid_request_error, 500 server_error, 501
 * not_supported_error, 503 unavailable_error. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static const char *type_of(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

void srv_error_set(srv_error *e, int status, const char *fmt, ...)
{
    e->status = status;
    e->type = type_of(status);
    e->n_prompt_tokens = e->n_ctx = -1;
    e->retry_after_s = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

void srv_error_json(const srv_error *e, srv_buf *out)
{
    json_t *err = json_object();
    json_object_set_new(err, "code", json_integer(e->status));
    json_object_set_new(err, "message", json_string(e->message));
    json_object_set_new(err, "type", json_string(e->type));
    if (e->n_prompt_tokens >= 0) {
        json_object_set_new(err, "n_prompt_tokens", json_integer(e->n_prompt_tokens));
        json_object_set_new(err, "n_ctx", json_integer(e->n_ctx));
    }
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    char *s = json_dumps(root, JSON_COMPACT);
    if (s) srv_buf_add(out, s, strlen(s));
    else srv_buf_addf(out, "{\"error\":{\"code\":%d,\"message\":\"error\",\"type\":\"%s\"}}", e->status, e->type);
    free(s);
    json_decref(root);
}

int srv_auth_ok(const srv_opts *o, const char *authorization)
{
    if (!o->api_key || !*o->api_key) return 1;
    if (!authorization || strncmp(authorization, "Bearer ", 7)) return 0;
    const char *got = authorization + 7, *want = o->api_key;
    size_t ng = strlen(got), nw = strlen(want);
    unsigned diff = (unsigned)(ng ^ nw);
    for (size_t i = 0; i < nw; i++) diff |= (unsigned)(unsigned char)want[i] ^ (unsigned)(unsigned char)(i < ng ? got[i] : 0);
    return diff == 0;
}
