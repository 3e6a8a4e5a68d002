/* http.c — libmicrohttpd: the daemon, routing, request bodies, the API key, and how a
 * running job's connection waits without holding a thread.
 *
 * The daemon runs one internal polling thread with suspend/resume. A request body is
 * gathered up to --max-body bytes (413 beyond, decided from Content-Length before any
 * byte is read when the client sends one). A completion request is parsed and
 * tokenized here, claims a slot (503 + Retry-After when every slot is busy) and goes to
 * the engine; then
 *   non-streamed: the connection is suspended until the engine finishes the job; on
 *       resume the access handler runs again and queues the whole reply;
 *   streamed: a 200 text/event-stream response is queued at once; its reader hands out
 *       the SSE bytes the engine has written and suspends the connection when there are
 *       none yet. A client that hangs up makes the write fail; the completion callback
 *       then cancels the job, and the engine frees the slot at its next token.
 * Keep-alive: while a streamed request waits for the engine to start it or sits in a long
 * prefill, nothing would cross the connection for seconds, and proxies or clients with a
 * read timeout would drop it. A small thread looks at the running jobs every quarter of
 * --sse-ping (at most 250 ms) and gives a stream that has queued nothing for --sse-ping
 * seconds an SSE comment line ": ping" (srv_job_keepalive), which clients ignore. It runs
 * outside the engine, so a prefill chunk that holds the engine for long does not delay
 * it: the gap between two writes to a waiting stream is at most --sse-ping plus one tick. */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

/* A /slots action (save and restore write and read whole session files: hundreds of MB at
 * long contexts) runs on its own thread while the connection is suspended, so the HTTP
 * thread keeps serving the streams meanwhile. One at a time (another gets 409). Two
 * references: the request's and the worker's. */
typedef struct slot_task {
    atomic_int refs;
    srv *S;
    uint32_t id;
    char action[16], fname[160];
    int has_fname;
    srv_buf body;
    char msg[600];
    int status;
    pthread_mutex_t mu;
    int done, suspended;
    struct MHD_Connection *conn; /* NULL once the request is gone */
} slot_task;

static void slot_task_unref(slot_task *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    pthread_mutex_destroy(&t->mu);
    srv_buf_free(&t->body);
    free(t);
}

/* Per-request state (libmicrohttpd's con_cls). */
typedef struct req {
    srv_buf body;
    int too_large;
    srv_job *job;   /* a non-streamed completion waiting for its result */
    slot_task *task;/* a /slots action running */
} req;

static MHD_RESULT send_bytes(struct MHD_Connection *c, int status, const char *ctype, const char *p, size_t n,
                             int retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)p, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    MHD_RESULT ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static MHD_RESULT send_json(struct MHD_Connection *c, int status, const srv_buf *b)
{
    return send_bytes(c, status, "application/json", b->p ? b->p : "{}", b->p ? b->n : 2, 0);
}

static MHD_RESULT send_error(srv *S, struct MHD_Connection *c, const srv_error *e)
{
    srv_buf b = {0};
    srv_error_json(e, &b);
    srv_metrics_count(&S->metrics, e->status == 503 ? SRV_M_503 : e->status >= 500 ? SRV_M_5XX : SRV_M_4XX);
    MHD_RESULT ok = send_bytes(c, e->status, "application/json", b.p ? b.p : "{}", b.p ? b.n : 2, e->retry_after_s);
    srv_buf_free(&b);
    return ok;
}

static MHD_RESULT error_reply(srv *S, struct MHD_Connection *c, int status, const char *msg)
{
    srv_error e;
    srv_error_set(&e, status, "%s", msg);
    if (status == 503) e.retry_after_s = 1;
    return send_error(S, c, &e);
}

/* ---- streamed responses ------------------------------------------------------------ */

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    srv_job *j = cls;
    pthread_mutex_lock(&j->mu);
    if (j->out.n > j->out_sent) {
        size_t n = j->out.n - j->out_sent;
        if (n > max) n = max;
        memcpy(buf, j->out.p + j->out_sent, n);
        j->out_sent += n;
        if (j->out_sent == j->out.n) j->out.n = j->out_sent = 0;
        pthread_mutex_unlock(&j->mu);
        return (ssize_t)n;
    }
    if (j->done || !j->conn) {
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    j->suspended = 1;
    MHD_suspend_connection(j->conn);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static void sse_free(void *cls) { srv_job_unref(cls); }

/* ---- routes ---------------------------------------------------------------------------- */

static MHD_RESULT reply_json_obj(struct MHD_Connection *c, int status, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    srv_buf b = {s, s ? strlen(s) : 0, 0};
    MHD_RESULT ok = send_json(c, status, &b);
    free(s);
    return ok;
}

static MHD_RESULT route_health(srv *S, struct MHD_Connection *c)
{
    json_t *o = json_object();
    size_t idle = 0;
    pthread_mutex_lock(&S->mu);
    for (uint32_t i = 0; i < S->o.parallel; i++) idle += !S->slots[i].busy;
    int stopping = S->stopping;
    pthread_mutex_unlock(&S->mu);
    json_object_set_new(o, "status", json_string(stopping ? "stopping" : "ok"));
    json_object_set_new(o, "slots_idle", json_integer((json_int_t)idle));
    json_object_set_new(o, "slots_total", json_integer(S->o.parallel));
    json_object_set_new(o, "kv", json_string(S->kv));
    json_object_set_new(o, "kv_reason", json_string(S->kv_reason));
    return reply_json_obj(c, stopping ? 503 : 200, o);
}

static MHD_RESULT route_models(srv *S, struct MHD_Connection *c)
{
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(S->model_id));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer((json_int_t)S->t_start));
    json_object_set_new(m, "owned_by", json_string("sjkvarn"));
    json_t *meta = json_object();
    json_object_set_new(meta, "arch", json_string(S->info->arch_name));
    json_object_set_new(meta, "n_ctx_train", json_integer(S->info->n_ctx_train));
    json_object_set_new(meta, "n_vocab", json_integer(S->info->n_vocab));
    json_object_set_new(meta, "n_params_bytes", json_integer((json_int_t)S->info->weights_nbytes));
    json_object_set_new(m, "meta", meta);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return reply_json_obj(c, 200, o);
}

static MHD_RESULT route_props(srv *S, struct MHD_Connection *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "model_path", json_string(S->model_path));
    json_object_set_new(o, "model_id", json_string(S->model_id));
    json_object_set_new(o, "arch", json_string(S->info->arch_name));
    json_object_set_new(o, "n_ctx", json_integer(S->o.n_ctx));
    json_object_set_new(o, "n_batch", json_integer(S->o.n_batch));
    json_object_set_new(o, "parallel", json_integer(S->o.parallel));
    json_object_set_new(o, "threads", json_integer(S->o.n_threads));
    json_object_set_new(o, "kv", json_string(S->kv));
    json_object_set_new(o, "kv_reason", json_string(S->kv_reason));
    json_object_set_new(o, "window", json_string(sjkh_window_type_name(S->o.window_type)));
    json_object_set_new(o, "mem_budget", S->o.mem_budget ? json_string(S->o.mem_budget) : json_null());
    json_object_set_new(o, "kv_planned_bytes", json_integer((json_int_t)S->kv_planned_nbytes));
    json_object_set_new(o, "kv_allocated_bytes", json_integer((json_int_t)S->kv_allocated_nbytes));
    json_object_set_new(o, "idle_seal_s", json_real(S->o.idle_seal_s));
    json_object_set_new(o, "max_body_bytes", json_integer((json_int_t)S->o.max_body_nbytes));
    json_object_set_new(o, "default_max_tokens", json_integer(S->o.max_tokens_default));
    const char *style = "none";
    switch (sjkh_tokenizer_chat_style(S->tok)) {
    case SJKH_CHAT_CHATML: style = "chatml"; break;
    case SJKH_CHAT_GEMMA: style = "gemma"; break;
    default: break;
    }
    json_object_set_new(o, "chat_template", json_string(style));
    json_object_set_new(o, "slot_dir", S->o.slot_dir ? json_string(S->o.slot_dir) : json_null());
    json_object_set_new(o, "version", json_string(sjk_version()));
    return reply_json_obj(c, 200, o);
}

static MHD_RESULT route_metrics(srv *S, struct MHD_Connection *c)
{
    srv_buf b = {0};
    srv_metrics_render(S, &b);
    MHD_RESULT ok = send_bytes(c, 200, "text/plain; version=0.0.4", b.p ? b.p : "", b.n, 0);
    srv_buf_free(&b);
    return ok;
}

static MHD_RESULT route_slots(srv *S, struct MHD_Connection *c)
{
    srv_buf b = {0};
    srv_slots_json(S, &b);
    MHD_RESULT ok = send_json(c, 200, &b);
    srv_buf_free(&b);
    return ok;
}

static void *slot_task_main(void *arg)
{
    slot_task *t = arg;
    srv *S = t->S;
    t->status = srv_slot_action(S, t->id, t->action, t->has_fname ? t->fname : NULL, &t->body, t->msg, sizeof t->msg);
    pthread_mutex_lock(&S->mu);
    S->action_running = 0;
    pthread_mutex_unlock(&S->mu);
    pthread_mutex_lock(&t->mu);
    t->done = 1;
    if (t->suspended && t->conn) {
        t->suspended = 0;
        MHD_resume_connection(t->conn);
    }
    pthread_mutex_unlock(&t->mu);
    slot_task_unref(t);
    return NULL;
}

/* The action's reply once its worker is done; else the connection stays suspended. */
static MHD_RESULT slot_task_resumed(srv *S, struct MHD_Connection *c, req *rq)
{
    slot_task *t = rq->task;
    pthread_mutex_lock(&t->mu);
    int done = t->done;
    if (!done) {
        t->suspended = 1;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&t->mu);
    if (!done) return MHD_YES;
    return t->status == 200 ? send_json(c, 200, &t->body) : error_reply(S, c, t->status, t->msg);
}

/* Starts the action on its worker thread (joining the previous one, which has ended). */
static MHD_RESULT slot_task_start(srv *S, struct MHD_Connection *c, req *rq, uint32_t id, const char *action,
                                  const char *fname)
{
    if (strlen(action) >= sizeof rq->task->action || (fname && strlen(fname) >= sizeof rq->task->fname))
        return error_reply(S, c, 400, "action or filename too long");
    pthread_mutex_lock(&S->mu);
    int running = S->action_running;
    if (!running) S->action_running = 1;
    pthread_mutex_unlock(&S->mu);
    if (running) return error_reply(S, c, 409, "another /slots action is running; retry when it ends");
    if (S->action_started) pthread_join(S->action_thread, NULL); /* it has ended */
    S->action_started = 0;
    slot_task *t = calloc(1, sizeof *t);
    if (!t) goto fail;
    atomic_init(&t->refs, 2);
    t->S = S;
    t->id = id;
    snprintf(t->action, sizeof t->action, "%s", action);
    t->has_fname = fname != NULL;
    snprintf(t->fname, sizeof t->fname, "%s", fname ? fname : "");
    pthread_mutex_init(&t->mu, NULL);
    t->conn = c;
    rq->task = t;
    if (pthread_create(&S->action_thread, NULL, slot_task_main, t)) {
        rq->task = NULL;
        pthread_mutex_destroy(&t->mu);
        free(t);
        goto fail;
    }
    S->action_started = 1;
    return slot_task_resumed(S, c, rq);
fail:
    pthread_mutex_lock(&S->mu);
    S->action_running = 0;
    pthread_mutex_unlock(&S->mu);
    return error_reply(S, c, 500, "cannot start the slot action");
}

/* POST /slots/{id}?action=save|restore|erase; the file name from ?filename= or the body
 * {"filename": "..."}. */
static MHD_RESULT route_slot_action(srv *S, struct MHD_Connection *c, const char *idstr, req *rq)
{
    char *end;
    unsigned long id = strtoul(idstr, &end, 10);
    if (!*idstr || *end || id > 1000000) return error_reply(S, c, 404, "no such slot");
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    if (!action) return error_reply(S, c, 400, "action is required (?action=save|restore|erase)");
    const char *fname = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "filename");
    json_t *root = NULL;
    if (!fname && rq->body.n) {
        json_error_t je;
        root = json_loadb(rq->body.p, rq->body.n, 0, &je);
        if (!root || !json_is_object(root)) {
            json_decref(root);
            return error_reply(S, c, 400, "the body must be a JSON object like {\"filename\": \"name\"}");
        }
        json_t *f = json_object_get(root, "filename");
        if (f && !json_is_string(f)) {
            json_decref(root);
            return error_reply(S, c, 400, "filename must be a string");
        }
        fname = f ? json_string_value(f) : NULL;
    }
    MHD_RESULT ok = slot_task_start(S, c, rq, (uint32_t)id, action, fname);
    json_decref(root);
    return ok;
}

/* A non-streamed job: reply if it is finished, else suspend the connection until the
 * engine resumes it (then the access handler runs again and comes here). */
static MHD_RESULT completion_resumed(srv *S, struct MHD_Connection *c, req *rq)
{
    srv_job *j = rq->job;
    pthread_mutex_lock(&j->mu);
    int done = j->done;
    if (!done) {
        j->suspended = 1;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&j->mu);
    if (!done) return MHD_YES;
    if (j->finish == SRV_FINISH_ERROR) return error_reply(S, c, j->err_status ? j->err_status : 500, j->err);
    srv_buf b = {0};
    srv_api_reply(S, j, &b);
    MHD_RESULT ok = send_json(c, 200, &b);
    srv_buf_free(&b);
    return ok;
}

static MHD_RESULT route_completion(srv *S, struct MHD_Connection *c, req *rq, int chat)
{
    srv_metrics_count(&S->metrics, chat ? SRV_M_CHAT : SRV_M_COMPLETIONS);
    srv_error e;
    srv_job *j = srv_api_parse(S, rq->body.p ? rq->body.p : "", rq->body.n, chat, &e);
    if (!j) return send_error(S, c, &e);
    size_t reuse = 0;
    pthread_mutex_lock(&S->mu);
    /* a finishing slot that holds more of this prompt is waited for, at most 2 s */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    int wait = 0;
    srv_slot *sl = NULL;
    while (!S->stopping) {
        sl = srv_slot_claim(S, j->prompt, j->n_prompt, &reuse, &wait);
        if (sl || !wait) break;
        if (pthread_cond_timedwait(&S->cv, &S->mu, &until)) {
            if (!S->stopping) sl = srv_slot_claim(S, j->prompt, j->n_prompt, &reuse, NULL);
            break;
        }
    }
    if (sl) {
        static const char *const pre[2] = {"cmpl-", "chatcmpl-"};
        snprintf(j->id, sizeof j->id, "%s%llx%04x", pre[chat], (unsigned long long)j->created,
                 (unsigned)(((uintptr_t)j >> 4) & 0xffff));
        j->n_cached = reuse;
        j->conn = c;
        srv_job_ref(j); /* the slot's */
        sl->job = j;
        pthread_cond_broadcast(&S->cv);
    }
    int stopping = S->stopping;
    pthread_mutex_unlock(&S->mu);
    if (!sl) {
        srv_job_unref(j);
        return error_reply(S, c, 503, stopping ? "the server is shutting down" : "every session is busy; retry later");
    }
    if (j->stream) {
        srv_job_ref(j); /* the reader's */
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_reader, j, sse_free);
        if (!r) { /* the engine ends the job at its next step; drop the reader's and our references */
            pthread_mutex_lock(&j->mu);
            j->conn = NULL;
            pthread_mutex_unlock(&j->mu);
            atomic_store(&j->cancelled, 1);
            srv_job_unref(j);
            srv_job_unref(j);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_RESULT ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        rq->job = j; /* the request's reference: cancels the job if the client leaves */
        return ok;
    }
    rq->job = j;
    return completion_resumed(S, c, rq); /* suspends until the engine finishes it */
}

static MHD_RESULT on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_nbytes, void **con_cls)
{
    (void)version;
    srv *S = cls;
    req *rq = *con_cls;
    if (!rq) { /* first call: headers only */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S->o.max_body_nbytes) rq->too_large = 1;
        return MHD_YES;
    }
    if (rq->job) {
        if (*upload_nbytes) { *upload_nbytes = 0; return MHD_YES; }
        return rq->job->stream ? MHD_YES : completion_resumed(S, c, rq);
    }
    if (rq->task) {
        if (*upload_nbytes) { *upload_nbytes = 0; return MHD_YES; }
        return slot_task_resumed(S, c, rq);
    }
    if (*upload_nbytes) {
        if (!rq->too_large && rq->body.n + *upload_nbytes > S->o.max_body_nbytes) rq->too_large = 1;
        if (!rq->too_large && srv_buf_add(&rq->body, upload, *upload_nbytes)) rq->too_large = 1;
        *upload_nbytes = 0;
        return MHD_YES;
    }
    /* the whole request is here */
    if (rq->too_large) {
        char m[160];
        snprintf(m, sizeof m, "the request body exceeds %zu bytes (--max-body)", S->o.max_body_nbytes);
        return error_reply(S, c, 413, m);
    }
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (strcmp(url, "/health") && strcmp(url, "/v1/health") &&
        !srv_auth_ok(&S->o, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")))
        return error_reply(S, c, 401, "invalid or missing API key (Authorization: Bearer KEY)");
    static const struct {
        const char *path;
        int post;
    } routes[] = {{"/health", 0}, {"/v1/health", 0}, {"/v1/models", 0}, {"/models", 0}, {"/metrics", 0},
                  {"/slots", 0}, {"/props", 0}, {"/v1/chat/completions", 1}, {"/chat/completions", 1},
                  {"/v1/completions", 1}, {"/completions", 1}};
    int idx = -1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) idx = (int)i;
    if (idx < 0 && !strncmp(url, "/slots/", 7)) {
        if (!post) return error_reply(S, c, 405, "use POST /slots/{id}?action=save|restore|erase");
        srv_metrics_count(&S->metrics, SRV_M_OTHER);
        return route_slot_action(S, c, url + 7, rq);
    }
    if (idx < 0) {
        char m[300];
        snprintf(m, sizeof m, "no route %s %.200s", method, url);
        return error_reply(S, c, 404, m);
    }
    if ((routes[idx].post && !post) || (!routes[idx].post && !get)) {
        char m[120];
        snprintf(m, sizeof m, "%s needs %s", routes[idx].path, routes[idx].post ? "POST" : "GET");
        return error_reply(S, c, 405, m);
    }
    const char *p = routes[idx].path;
    if (routes[idx].post) return route_completion(S, c, rq, strstr(p, "chat") != NULL);
    srv_metrics_count(&S->metrics, SRV_M_OTHER);
    if (strstr(p, "health")) return route_health(S, c);
    if (strstr(p, "models")) return route_models(S, c);
    if (!strcmp(p, "/metrics")) return route_metrics(S, c);
    if (!strcmp(p, "/slots")) return route_slots(S, c);
    return route_props(S, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    req *rq = *con_cls;
    if (!rq) return;
    if (rq->job) {
        srv_job *j = rq->job;
        pthread_mutex_lock(&j->mu);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !j->done) atomic_store(&j->cancelled, 1);
        j->conn = NULL;
        j->suspended = 0;
        pthread_mutex_unlock(&j->mu);
        srv_job_unref(j);
    }
    if (rq->task) {
        pthread_mutex_lock(&rq->task->mu);
        rq->task->conn = NULL;
        rq->task->suspended = 0;
        pthread_mutex_unlock(&rq->task->mu);
        slot_task_unref(rq->task);
    }
    srv_buf_free(&rq->body);
    free(rq);
    *con_cls = NULL;
}

/* ---- keep-alive ----------------------------------------------------------------------- */

static void *keepalive_main(void *arg)
{
    srv *S = arg;
    double every = S->o.sse_ping_s, tick = every / 4 < 0.25 ? every / 4 : 0.25;
    struct timespec ts = {(time_t)tick, (long)((tick - (double)(time_t)tick) * 1e9)};
    while (!atomic_load(&S->keepalive_stop)) {
        nanosleep(&ts, NULL);
        double now = srv_now();
        /* S->mu keeps each slot's job (and the slot's reference to it) alive meanwhile */
        pthread_mutex_lock(&S->mu);
        for (uint32_t i = 0; i < S->o.parallel; i++)
            if (S->slots[i].job) srv_job_keepalive(S->slots[i].job, now, every);
        pthread_mutex_unlock(&S->mu);
    }
    return NULL;
}

int srv_http_start(srv *S, char *err, size_t err_cap)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)S->o.port);
    if (inet_pton(AF_INET, S->o.host, &a.sin_addr) != 1) {
        snprintf(err, err_cap, "--host %s is not an IPv4 address", S->o.host);
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_AUTO;
    S->daemon = MHD_start_daemon(flags, (uint16_t)S->o.port, NULL, NULL, on_request, S, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&a, MHD_OPTION_NOTIFY_COMPLETED, on_completed, S,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)256, MHD_OPTION_END);
    if (!S->daemon) {
        snprintf(err, err_cap, "cannot listen on %s:%u (in use, or not allowed)", S->o.host, S->o.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(S->daemon, MHD_DAEMON_INFO_BIND_PORT);
    S->port = di ? di->port : S->o.port;
    atomic_store(&S->keepalive_stop, 0);
    if (S->o.sse_ping_s > 0) {
        if (pthread_create(&S->keepalive, NULL, keepalive_main, S)) {
            snprintf(err, err_cap, "cannot start the keep-alive thread");
            MHD_stop_daemon(S->daemon);
            S->daemon = NULL;
            return -1;
        }
        S->keepalive_started = 1;
    }
    return 0;
}

void srv_http_quiesce(srv *S)
{
    if (!S->daemon) return;
    MHD_socket fd = MHD_quiesce_daemon(S->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

/* Waits (bounded) for the open connections to finish sending, then stops the daemon. */
void srv_http_stop(srv *S)
{
    if (S->action_started) { /* a slot action finishes its file first (it resumes its connection) */
        pthread_join(S->action_thread, NULL);
        S->action_started = 0;
    }
    if (S->keepalive_started) { /* ends within one tick */
        atomic_store(&S->keepalive_stop, 1);
        pthread_join(S->keepalive, NULL);
        S->keepalive_started = 0;
    }
    if (!S->daemon) return;
    for (int i = 0; i < 300; i++) { /* at most 3 s */
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(S->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!di || di->num_connections == 0) break;
        usleep(10000);
    }
    MHD_stop_daemon(S->daemon);
    S->daemon = NULL;
}
