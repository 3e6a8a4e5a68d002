/* server.h — `sjkvarn serve`: an OpenAI-compatible HTTP server over libsjkhost sessions.
 *
 * Threads and who owns what:
 *
 *   HTTP thread (libmicrohttpd's internal polling thread, http.c)
 *       reads requests, parses them (api.c), tokenizes, claims a slot (slots.c) and hands
 *       the job to the engine; suspends the connection while the job runs and is resumed
 *       by the engine when output is ready (a stream never pins a thread).
 *   engine thread (engine.c)
 *       the only thread that runs the model: prefill chunks, one batched decode step for
 *       every slot that is decoding (sjkh_session_decode_batch), sampling, stop strings,
 *       idle seals. Writes each job's output (job.c) and resumes its connection.
 *   main thread (serve.c)
 *       boot (model, --kv auto, sessions, daemon), then waits for SIGINT/SIGTERM and shuts
 *       down: stop accepting, cancel running jobs at their next token, drain, exit 0.
 *
 * srv.mu guards the slot table's assignment fields (slot.job, slot.busy) and the stop
 * flag; each job has its own mutex for its output. Sessions are touched only by the
 * engine thread (and by /slots actions on idle slots, under srv.mu with the engine told
 * to keep off: slot.busy). */
#ifndef SJK_SERVER_H
#define SJK_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "prefix_store.h"
#include "sjkhost.h"

struct MHD_Daemon;
struct MHD_Connection;
struct sjks_store;
struct sjks_prefill;

/* ---- options (tools/cmd_serve.c fills them) ---------------------------------------- */
typedef struct srv_opts {
    const char *model;        /* name (gemma3-270m) or path */
    const char *kv;           /* "auto" or a configuration string */
    const char *mem_budget;   /* KV budget for all sessions together as given, or NULL */
    size_t mem_budget_nbytes; /* the same in bytes (parsed by the command) */
    const char *kl_floor;     /* --kl-floor, or NULL */
    const char *alias;        /* the model id in /v1/models, or NULL: the file name */
    const char *host;         /* listen address (default 127.0.0.1) */
    const char *api_key;      /* NULL: no key */
    const char *slot_dir;     /* NULL: slot save/restore disabled */
    uint32_t port;            /* 0: any free port (printed) */
    uint32_t n_ctx, n_batch, n_threads, parallel;
    uint32_t window_type;     /* sjkh_window_type */
    double idle_seal_s;       /* 0: off */
    size_t max_body_nbytes;   /* larger request bodies get 413 */
    double sse_ping_s;        /* a stream with nothing to send for this long gets a ": ping"
                                 comment line (0: never) */
    const char *test_fault;   /* TEST ONLY (env SJKVARN_SERVE_TEST_FAULT): a request whose
                                 prompt text contains it fails at its first decode step as if
                                 the forward pass had reported its row corrupt; NULL: off */
    uint32_t max_tokens_default; /* a request without max_tokens */
    const char *prefix_store; /* --prefix-store redis://HOST:PORT[,...], or NULL: no store */
    uint32_t prefix_store_ttl; /* seconds a published block lives (0: the store's default) */
} srv_opts;

srv_opts srv_opts_default(void);

/* ---- growing byte buffer ------------------------------------------------------------- */
typedef struct srv_buf {
    char *p;
    size_t n, cap;
} srv_buf;

/* Appends n bytes (keeps a NUL after them). 0, or -1 when out of memory (buf unchanged). */
int srv_buf_add(srv_buf *b, const void *data, size_t n);
int srv_buf_addf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void srv_buf_free(srv_buf *b);

/* ---- jobs: one completion request in flight (job.c) ------------------------------------ */
typedef enum srv_finish { SRV_FINISH_NONE = 0, SRV_FINISH_STOP, SRV_FINISH_LENGTH, SRV_FINISH_ERROR } srv_finish;

#define SRV_MAX_STOPS 4

typedef struct srv_job {
    atomic_int refs;
    pthread_mutex_t mu;
    /* the request (immutable once queued) */
    int chat, stream, include_usage;
    int32_t *prompt;             /* [n_prompt] token ids */
    size_t n_prompt;
    uint32_t max_tokens;
    sjkh_sampler_params sampling;
    char *stops[SRV_MAX_STOPS];
    size_t n_stops, stop_max_nbytes;
    char id[48];
    long long created;
    char model_id[256];
    /* the connection (under mu) */
    struct MHD_Connection *conn;
    int suspended;
    atomic_int cancelled;        /* the client went away, or the server is stopping */
    /* output (under mu) */
    srv_buf out;                 /* stream: SSE bytes; [out_sent, out.n) not yet sent */
    size_t out_sent;
    double t_out;                /* when bytes were last queued for the client */
    int done;                    /* the engine will write nothing more */
    /* results (engine-written; read by HTTP after done) */
    srv_buf text;                /* generated text so far (stop strings cut) */
    size_t text_emitted;         /* stream: bytes of text already sent as deltas */
    size_t n_gen, n_cached;
    int test_fault;              /* srv_opts.test_fault matched this prompt (engine fails it) */
    srv_finish finish;
    int err_status;              /* HTTP status of an error result (500, ...) */
    char err[256];
    double t_queued, t_first, t_done;
} srv_job;

srv_job *srv_job_new(void);
void srv_job_ref(srv_job *j);
void srv_job_unref(srv_job *j);
/* Engine side: appends SSE bytes (stream) and wakes the connection. */
void srv_job_push(srv_job *j, const char *data, size_t n);
/* Engine side: marks the job finished and wakes the connection. */
void srv_job_finish(srv_job *j);
/* Keep-alive (http.c's thread): a streamed job still running that has queued nothing for
 * `every` seconds gets the SSE comment ": ping" (clients ignore it; proxies see bytes). */
void srv_job_keepalive(srv_job *j, double now, double every);

/* ---- slots: the sessions (slots.c) ----------------------------------------------------- */
typedef enum srv_slot_state { SRV_SLOT_IDLE = 0, SRV_SLOT_PREFILL, SRV_SLOT_DECODE } srv_slot_state;

typedef struct srv_slot {
    uint32_t id;
    sjkh_session *s;
    int32_t *held;        /* [n_ctx] the tokens whose K/V the session holds (n_held = n_past;
                             engine thread, or the holder of an idle slot's busy flag) */
    size_t n_held;
    size_t n_held_seen;   /* n_held when last measured (under srv.mu; what /slots shows) */
    float *logits;        /* [n_vocab] the newest logits */
    /* assignment (under srv.mu) */
    srv_job *job;         /* running job, or NULL */
    int busy;             /* a job or a /slots action holds the slot */
    int finishing;        /* busy, but the job's reply is out and the engine is only
                             publishing its blocks: a claim that would reuse more of this
                             slot than of any idle one waits for it (srv_slot_claim) */
    double last_used;     /* when the last job ended (monotonic seconds) */
    int idle_sealed;      /* sealed back to tail_min since the last job */
    /* generation state (engine thread only) */
    srv_slot_state state;
    size_t n_fed;         /* prompt tokens in the cache */
    int32_t pending;      /* sampled, not yet fed; -1 none */
    sjkh_sampler *sampler;
    size_t n_tokens_done; /* number of sampled tokens */
    size_t max_gen;       /* min(max_tokens, n_ctx - n_prompt): what run would generate */
    int role_sent;
    struct sjks_prefill *pf; /* the prompt's prefill through the prefix store (or plain chunks) */
    size_t pf_base;       /* prompt index of the prefill's position 0 (the reused held prefix) */
    /* memory as last measured by the engine (under srv.mu) */
    sjkh_kv_report kv;
    sjk_cache_memory mem; /* the libsjkvarn cache (zeros for host-f16) */
    uint32_t sealed_positions; /* sum over growing layers of the sealed body end */
} srv_slot;

/* ---- metrics (metrics.c) --------------------------------------------------------------- */
typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[6];          /* by route kind: chat, completions, other, errors 4xx, 5xx, 503 */
    uint64_t prompt_tokens, cached_tokens, gen_tokens;
    uint64_t prefix_hits;          /* requests that reused a session's cache */
    uint64_t idle_seals, decode_steps, decode_rows;
    double prefill_s, decode_s;    /* engine time in each */
    uint64_t prefill_tokens_run;   /* tokens actually prefilled (not cached) */
    /* the prefix store (--prefix-store): the engine copies the store's counters here after
     * each lookup and publish (the store handle itself is the engine's alone) */
    sjks_store_stats store;
    uint64_t store_fallbacks;      /* prefills that recomputed blocks because of a store fault */
    uint64_t store_errors, store_redirects; /* of its Redis connection */
    double store_lookup_s, store_publish_s;
} srv_metrics;

enum { SRV_M_CHAT = 0, SRV_M_COMPLETIONS, SRV_M_OTHER, SRV_M_4XX, SRV_M_5XX, SRV_M_503 };

/* ---- errors in the OpenAI shape (errors.c) ------------------------------------------------
 *   {"error": {"code": 400, "message": "...", "type": "invalid_request_error"}}
 * plus n_prompt_tokens / n_ctx for exceed_context_size_error; 503 adds Retry-After. */
typedef struct srv_error {
    int status;            /* HTTP status; 0 = no error */
    const char *type;      /* invalid_request_error, authentication_error, ... */
    char message[512];
    long long n_prompt_tokens, n_ctx; /* exceed_context_size_error only (else -1) */
    int retry_after_s;     /* 503 only (else 0) */
} srv_error;

/* Sets e to status with the conventional type for it and a formatted message. */
void srv_error_set(srv_error *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void srv_error_json(const srv_error *e, srv_buf *out);
/* 1 when no key is set or `authorization` is "Bearer KEY" (constant-time compare). */
int srv_auth_ok(const srv_opts *o, const char *authorization);

/* ---- the server ------------------------------------------------------------------------- */
typedef struct srv {
    srv_opts o;
    char model_path[4096];
    char model_id[256];
    sjkh_model *model;
    sjkh_tokenizer *tok;
    const sjkh_model_info *info;
    char kv[64];
    char kv_reason[3300];
    size_t kv_planned_nbytes;     /* the plan's total for every session (0: not planned) */
    size_t kv_allocated_nbytes;   /* measured: the sessions' caches as created */
    srv_slot *slots;              /* [o.parallel] */
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* engine: work arrived or stop */
    int stopping;
    int ready;
    srv_metrics metrics;
    struct MHD_Daemon *daemon;
    uint32_t port;                /* the bound port */
    pthread_t action_thread;      /* http.c: the /slots action running off the HTTP thread */
    int action_started, action_running; /* (action_running under mu) */
    pthread_t keepalive;          /* http.c: SSE pings (srv_job_keepalive) */
    int keepalive_started;
    atomic_int keepalive_stop;
    pthread_t engine;
    int engine_started;
    double t_start;
    struct sjks_store *store;     /* --prefix-store (engine thread only), or NULL */
    int32_t *batch_tok;           /* engine scratch [parallel] */
    sjkh_session **batch_ss;      /* [parallel] */
    sjk_status *batch_st;         /* [parallel] */
    float *batch_logits;          /* [parallel][n_vocab] */
    srv_slot **batch_slot;        /* [parallel] */
} srv;

double srv_now(void); /* monotonic seconds */

/* serve.c */
/* Runs the server until SIGINT/SIGTERM; model_path is resolved, o->kv a configuration
 * (not "auto"), kv_reason the line that says why (shown in /props and /health). Returns
 * the exit status: 0 after a clean stop, 1 if it could not start. */
int srv_main(const srv_opts *o, const char *model_path, const char *kv_reason, size_t kv_planned_nbytes);

/* slots.c */
/* The session parameters of every slot (and of the prefix store's fingerprint). */
sjkh_session_params srv_session_params(const srv *S);
sjk_status srv_slots_create(srv *S, char *err, size_t err_cap);
void srv_slots_free(srv *S);
/* Claims the idle slot whose held tokens share the longest prefix with prompt (ties: the
 * least recently used), marks it busy and returns it with *n_reuse = the held tokens it
 * will reuse; NULL when every slot is busy.
 * Caller holds S->mu. */
srv_slot *srv_slot_claim(srv *S, const int32_t *prompt, size_t n_prompt, size_t *n_reuse, int *wait);
/* Measures a slot's memory into its report fields (engine thread, or a busy slot). */
void srv_slot_measure(srv *S, srv_slot *sl);
/* /slots/{id}?action=save|restore|erase with filename (save/restore). Returns the HTTP
 * status; body receives the JSON reply (or the error's message). */
int srv_slot_action(srv *S, uint32_t id, const char *action, const char *filename, srv_buf *body, char *msg,
                    size_t msg_cap);
/* JSON array of the slots for GET /slots. */
void srv_slots_json(srv *S, srv_buf *out);
/* Engine side: seals idle slots whose last job ended --idle-seal seconds ago. */
void srv_slots_idle_seal(srv *S);

/* api.c: request bodies -> jobs, jobs -> response bodies */
/* Parses a /v1/chat/completions (chat = 1) or /v1/completions body, renders and tokenizes
 * the prompt. Returns a job with one reference, or NULL with e set (400 naming the
 * field, 400 exceed_context_size_error, 500 out of memory). */
srv_job *srv_api_parse(srv *S, const char *body, size_t n, int chat, srv_error *e);
/* The whole non-streamed reply of a finished job. */
void srv_api_reply(srv *S, const srv_job *j, srv_buf *out);
/* One SSE event "data: {chunk}\n\n" with a text delta (NULL: none) and finish reason
 * (NULL while running); role_first adds the assistant role (chat, first chunk). */
void srv_api_chunk(const srv_job *j, const char *delta, size_t delta_n, const char *finish, int role_first,
                   srv_buf *out);
/* The usage event (stream_options.include_usage; empty choices) and "data: [DONE]". */
void srv_api_stream_end(const srv_job *j, srv_buf *out);
/* An SSE error event for a stream that fails after its 200 was sent. */
void srv_api_stream_error(const srv_job *j, srv_buf *out);
const char *srv_finish_name(srv_finish f);

/* engine.c */
int srv_engine_start(srv *S);
void srv_engine_stop(srv *S); /* joins */

/* http.c */
int srv_http_start(srv *S, char *err, size_t err_cap);
void srv_http_quiesce(srv *S); /* stop accepting new connections */
void srv_http_stop(srv *S);

/* metrics.c */
void srv_metrics_init(srv_metrics *m);
void srv_metrics_destroy(srv_metrics *m);
void srv_metrics_count(srv_metrics *m, int kind);
void srv_metrics_render(srv *S, srv_buf *out);

#endif
