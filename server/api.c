/* api.c — the OpenAI request and response bodies (docs/SERVER.md lists every field).
 *
 * Parsing checks each field's type and range and names the field in the error, renders
 * the prompt (chat: the model's template, as `sjkvarn run --chat` does; completions: the
 * text as it is, as `sjkvarn run -p`), tokenizes it and refuses a prompt longer than the
 * context (exceed_context_size_error), so a job that reaches the engine always fits.
 * Unknown fields are ignored, as OpenAI-compatible servers do. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define BAD(...) (srv_error_set(e, 400, __VA_ARGS__), (void)0)

const char *srv_finish_name(srv_finish f)
{
    switch (f) {
    case SRV_FINISH_STOP: return "stop";
    case SRV_FINISH_LENGTH: return "length";
    case SRV_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

/* A JSON string of n bytes; bytes that are not valid UTF-8 become U+FFFD. */
static json_t *json_text(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j) return j;
    srv_buf b = {0};
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        json_t *one = len && i + len <= n ? json_stringn(s + i, len) : NULL;
        if (one) {
            json_decref(one);
            srv_buf_add(&b, s + i, len);
            i += len;
        } else {
            srv_buf_add(&b, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
    j = json_stringn(b.p ? b.p : "", b.n);
    srv_buf_free(&b);
    return j;
}

/* Content of a message: a string, or an array of {"type":"text","text":...} parts. */
static int message_content(json_t *c, size_t i, srv_buf *dst, srv_error *e)
{
    if (json_is_string(c)) return srv_buf_add(dst, json_string_value(c), json_string_length(c)) ? -1 : 0;
    if (!json_is_array(c)) {
        BAD("messages[%zu].content must be a string or an array of text parts", i);
        return -1;
    }
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part)
    {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
            BAD("messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": string}", i, k);
            return -1;
        }
        if (srv_buf_add(dst, json_string_value(text), json_string_length(text))) return -1;
    }
    return 0;
}

/* Renders messages with the model's chat template into *text. */
static int render_chat(srv *S, json_t *msgs, srv_buf *text, srv_error *e)
{
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        BAD(msgs ? "messages must be a non-empty array" : "messages is required");
        return -1;
    }
    size_t n = json_array_size(msgs);
    if (n > 4096) {
        BAD("messages has %zu entries (at most 4096)", n);
        return -1;
    }
    sjkh_chat_message *cm = calloc(n, sizeof *cm);
    srv_buf *content = calloc(n, sizeof *content);
    int rc = -1;
    size_t total = 0;
    if (!cm || !content) {
        srv_error_set(e, 500, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m)) {
            BAD("messages[%zu] must be an object", i);
            goto done;
        }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) {
            BAD("messages[%zu].role must be a string", i);
            goto done;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            BAD("messages[%zu].role '%s' is not system, user, assistant or developer", i, json_string_value(role));
            goto done;
        }
        json_t *c = json_object_get(m, "content");
        if (!c || json_is_null(c)) {
            if (srv_buf_add(&content[i], "", 0)) goto oom;
        } else if (message_content(c, i, &content[i], e)) {
            if (!e->status) goto oom;
            goto done;
        }
        if (strlen(content[i].p) != content[i].n) {
            BAD("messages[%zu].content contains a NUL character", i);
            goto done;
        }
        cm[i].role = r;
        cm[i].content = content[i].p;
        total += content[i].n;
    }
    size_t need = total + 64 * n + 4096, got = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        text->n = 0;
        if (text->cap < need + 1) {
            srv_buf_free(text);
            if (!(text->p = malloc(need + 1))) goto oom;
            text->cap = need + 1;
        }
        sjk_status st = sjkh_tokenizer_chat_render(S->tok, cm, n, 1, text->p, text->cap, &got);
        if (st == SJK_OK) {
            text->n = got;
            rc = 0;
            goto done;
        }
        if (st == SJK_ERR_UNSUPPORTED) {
            srv_error_set(e, 501, "the model has no chat template: use /v1/completions");
            goto done;
        }
        if (st != SJK_ERR_BUFFER) {
            srv_error_set(e, 500, "cannot render the chat template (%s)", sjk_status_str(st));
            goto done;
        }
        need = got;
    }
oom:
    srv_error_set(e, 500, "out of memory");
done:
    if (content)
        for (size_t i = 0; i < n; i++) srv_buf_free(&content[i]);
    free(content);
    free(cm);
    return rc;
}

static int get_number(json_t *root, const char *key, double lo, double hi, double *out, srv_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) {
        BAD("%s must be a number", key);
        return -1;
    }
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        BAD("%s must be in [%g, %g], got %g", key, lo, hi, d);
        return -1;
    }
    *out = d;
    return 1;
}

static int get_int(json_t *root, const char *key, long long lo, long long hi, long long *out, srv_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) {
        BAD("%s must be an integer", key);
        return -1;
    }
    long long d = (long long)json_integer_value(v);
    if (d < lo || d > hi) {
        BAD("%s must be in [%lld, %lld], got %lld", key, lo, hi, d);
        return -1;
    }
    *out = d;
    return 1;
}

static int get_bool(json_t *root, const char *key, int *out, srv_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        BAD("%s must be a boolean", key);
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

static int add_stop(srv_job *j, json_t *s, srv_error *e)
{
    if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 256) {
        BAD("stop must be a non-empty string of at most 256 bytes or an array of up to %d of them", SRV_MAX_STOPS);
        return -1;
    }
    size_t n = json_string_length(s);
    char *c = malloc(n + 1);
    if (!c) {
        srv_error_set(e, 500, "out of memory");
        return -1;
    }
    memcpy(c, json_string_value(s), n + 1);
    j->stops[j->n_stops++] = c;
    if (n > j->stop_max_nbytes) j->stop_max_nbytes = n;
    return 0;
}

static int parse_fields(srv *S, json_t *root, srv_job *j, srv_error *e)
{
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model) && !json_is_string(model)) {
        BAD("model must be a string");
        return -1;
    }
    long long v;
    double d;
    int r;
    j->max_tokens = S->o.max_tokens_default;
    if ((r = get_int(root, "max_tokens", 1, 1 << 24, &v, e)) < 0) return -1;
    if (r) j->max_tokens = (uint32_t)v;
    if ((r = get_int(root, "max_completion_tokens", 1, 1 << 24, &v, e)) < 0) return -1;
    if (r) j->max_tokens = (uint32_t)v;
    sjkh_sampler_params sp = sjkh_sampler_params_default();
    sp.seed = (uint64_t)j->created * 6364136223846793005ull + (uint64_t)(uintptr_t)j;
    if ((r = get_number(root, "temperature", 0, 2, &d, e)) < 0) return -1;
    if (r) sp.temp = (float)d;
    if ((r = get_number(root, "top_p", 0, 1, &d, e)) < 0) return -1;
    if (r) {
        if (d <= 0) {
            BAD("top_p must be in (0, 1], got %g", d);
            return -1;
        }
        sp.top_p = (float)d;
    }
    if ((r = get_int(root, "top_k", 0, 1 << 30, &v, e)) < 0) return -1;
    if (r) sp.top_k = (int32_t)v;
    if ((r = get_int(root, "seed", -(1ll << 62), 1ll << 62, &v, e)) < 0) return -1;
    if (r) sp.seed = (uint64_t)v;
    j->sampling = sp;
    if ((r = get_int(root, "n", 1, 1, &v, e)) < 0) {
        BAD("n must be 1 (one choice per request)");
        return -1;
    }
    if (get_bool(root, "stream", &j->stream, e) < 0) return -1;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            BAD("stream_options must be an object");
            return -1;
        }
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu)) {
            BAD("stream_options.include_usage must be a boolean");
            return -1;
        }
        j->include_usage = iu && json_is_true(iu);
    }
    json_t *stop = json_object_get(root, "stop");
    if (stop && !json_is_null(stop)) {
        if (json_is_array(stop)) {
            if (json_array_size(stop) > SRV_MAX_STOPS) {
                BAD("stop has %zu strings (at most %d)", json_array_size(stop), SRV_MAX_STOPS);
                return -1;
            }
            size_t k;
            json_t *s;
            json_array_foreach(stop, k, s) if (add_stop(j, s, e)) return -1;
        } else if (add_stop(j, stop, e)) {
            return -1;
        }
    }
    return 0;
}

srv_job *srv_api_parse(srv *S, const char *body, size_t n, int chat, srv_error *e)
{
    e->status = 0;
    json_error_t jerr;
    json_t *root = json_loadb(body, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        BAD("the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return NULL;
    }
    srv_job *j = NULL;
    srv_buf text = {0};
    if (!json_is_object(root)) {
        BAD("the body must be a JSON object");
        goto fail;
    }
    if (!(j = srv_job_new())) {
        srv_error_set(e, 500, "out of memory");
        goto fail;
    }
    j->chat = chat;
    snprintf(j->model_id, sizeof j->model_id, "%s", S->model_id);
    if (parse_fields(S, root, j, e)) goto fail;
    unsigned flags = SJKH_TOKENIZE_ADD_SPECIAL;
    if (chat) {
        if (render_chat(S, json_object_get(root, "messages"), &text, e)) goto fail;
        flags |= SJKH_TOKENIZE_PARSE_SPECIAL;
    } else {
        json_t *p = json_object_get(root, "prompt");
        if (json_is_array(p) && json_array_size(p) == 1) p = json_array_get(p, 0);
        if (!json_is_string(p)) {
            BAD(p ? "prompt must be a string (or an array of one string)" : "prompt is required");
            goto fail;
        }
        if (srv_buf_add(&text, json_string_value(p), json_string_length(p))) {
            srv_error_set(e, 500, "out of memory");
            goto fail;
        }
    }
    j->test_fault = S->o.test_fault && text.p && strstr(text.p, S->o.test_fault) != NULL;
    /* text_nbytes * 2 + 2 tokens, as `sjkvarn run` sizes it, then the exact count */
    size_t cap = text.n * 2 + 8, got = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(j->prompt);
        if (!(j->prompt = malloc(cap * sizeof *j->prompt))) {
            srv_error_set(e, 500, "out of memory");
            goto fail;
        }
        sjk_status st = sjkh_tokenizer_encode(S->tok, text.p ? text.p : "", text.n, flags, j->prompt, cap, &got);
        if (st == SJK_OK) break;
        if (st != SJK_ERR_BUFFER || attempt) {
            srv_error_set(e, st == SJK_ERR_NOMEM ? 500 : 400, "cannot tokenize the prompt (%s)", sjk_status_str(st));
            goto fail;
        }
        cap = got;
    }
    j->n_prompt = got;
    if (got == 0) {
        BAD("%s is empty", chat ? "messages" : "prompt");
        goto fail;
    }
    if (got > S->o.n_ctx) {
        BAD("the prompt has %zu tokens, more than the context of %u", got, S->o.n_ctx);
        e->n_prompt_tokens = (long long)got;
        e->n_ctx = S->o.n_ctx;
        e->type = "exceed_context_size_error";
        goto fail;
    }
    srv_buf_free(&text);
    json_decref(root);
    return j;
fail:
    srv_buf_free(&text);
    srv_job_unref(j);
    json_decref(root);
    return NULL;
}

static json_t *usage_json(const srv_job *j)
{
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer((json_int_t)j->n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer((json_int_t)j->n_gen));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)(j->n_prompt + j->n_gen)));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer((json_int_t)j->n_cached));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

static json_t *envelope(const srv_job *j, const char *object)
{
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(j->id));
    json_object_set_new(r, "object", json_string(object));
    json_object_set_new(r, "created", json_integer(j->created));
    json_object_set_new(r, "model", json_string(j->model_id));
    return r;
}

static void dump(json_t *r, srv_buf *out, const char *pre, const char *post)
{
    char *s = json_dumps(r, JSON_COMPACT);
    if (s) {
        srv_buf_add(out, pre, strlen(pre));
        srv_buf_add(out, s, strlen(s));
        srv_buf_add(out, post, strlen(post));
    }
    free(s);
    json_decref(r);
}

void srv_api_reply(srv *S, const srv_job *j, srv_buf *out)
{
    (void)S;
    json_t *r = envelope(j, j->chat ? "chat.completion" : "text_completion");
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    json_t *text = json_text(j->text.p ? j->text.p : "", j->text.n);
    if (j->chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", text);
        json_object_set_new(c, "message", m);
    } else {
        json_object_set_new(c, "text", text);
        json_object_set_new(c, "logprobs", json_null());
    }
    const char *fin = srv_finish_name(j->finish);
    json_object_set_new(c, "finish_reason", fin ? json_string(fin) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, c);
    json_object_set_new(r, "choices", choices);
    json_object_set_new(r, "usage", usage_json(j));
    dump(r, out, "", "");
}

void srv_api_chunk(const srv_job *j, const char *delta, size_t delta_n, const char *finish, int role_first,
                   srv_buf *out)
{
    json_t *r = envelope(j, j->chat ? "chat.completion.chunk" : "text_completion");
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    if (j->chat) {
        json_t *d = json_object();
        if (role_first) json_object_set_new(d, "role", json_string("assistant"));
        if (delta) json_object_set_new(d, "content", json_text(delta, delta_n));
        json_object_set_new(c, "delta", d);
    } else {
        json_object_set_new(c, "text", json_text(delta ? delta : "", delta ? delta_n : 0));
        json_object_set_new(c, "logprobs", json_null());
    }
    json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, c);
    json_object_set_new(r, "choices", choices);
    dump(r, out, "data: ", "\n\n");
}

void srv_api_stream_end(const srv_job *j, srv_buf *out)
{
    if (j->include_usage) {
        json_t *r = envelope(j, j->chat ? "chat.completion.chunk" : "text_completion");
        json_object_set_new(r, "choices", json_array());
        json_object_set_new(r, "usage", usage_json(j));
        dump(r, out, "data: ", "\n\n");
    }
    srv_buf_add(out, "data: [DONE]\n\n", 14);
}

void srv_api_stream_error(const srv_job *j, srv_buf *out)
{
    srv_error e;
    srv_error_set(&e, j->err_status ? j->err_status : 500, "%s", j->err);
    srv_buf b = {0};
    srv_error_json(&e, &b);
    srv_buf_add(out, "data: ", 6);
    srv_buf_add(out, b.p ? b.p : "{}", b.p ? b.n : 2);
    srv_buf_add(out, "\n\n", 2);
    srv_buf_free(&b);
}
