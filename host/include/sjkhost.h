/* sjkhost.h — the public API of libsjkhost, the CPU inference host (GGUF models, tokenizers,
 * forward passes) that runs real models through libsjkvarn caches. Depends on sjkvarn.h;
 * libsjkvarn never depends on this.
 *
 * Conventions are those of sjkvarn.h: fallible calls return an sjk_status (SJK_OK = 0);
 * calls that can fail for a reason worth telling a user also take (err, err_cap), a
 * caller-owned buffer that receives one NUL-terminated line naming what was wrong (it may
 * be NULL). Nothing here calls exit() or abort(). */
#ifndef SJKHOST_H
#define SJKHOST_H

#include <stddef.h>
#include <stdint.h>

#include "sjkvarn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host library's version (same as the codec's). */
const char *sjkh_version(void);

/* ====================================================================================
 * GGUF (v2 and v3, little-endian) — read-only view of a model file
 *
 *   +-------+---------+-----------+--------+----------------+----------------+-----+------+
 *   | GGUF  | version | n_tensors | n_kv   | kv pairs ...   | tensor infos   | pad | data |
 *   | 4 B   | u32     | u64       | u64    | key,type,value | name,dims,type,| to  |      |
 *   |       |         |           |        |                | offset         |align|      |
 *   +-------+---------+-----------+--------+----------------+----------------+-----+------+
 *
 * The whole file is mapped read-only. sjkh_gguf_open checks every length, count, offset,
 * dimension product and the alignment before anything is exposed, so every pointer
 * handed out afterwards lies inside the mapping. A handle is immutable after open and may
 * be read from many threads at once. Pointers into the file (string bytes, array data,
 * tensor data) stay valid until sjkh_gguf_close; they are NOT NUL-terminated and NOT
 * aligned for their element type (read them with memcpy or the accessors below), except
 * tensor data, which is aligned to the file's alignment relative to the mapping.
 * ==================================================================================== */

typedef struct sjkh_gguf sjkh_gguf;

/* Metadata value types (GGUF codes). */
typedef enum sjkh_gguf_vtype {
    SJKH_GGUF_UINT8 = 0,
    SJKH_GGUF_INT8 = 1,
    SJKH_GGUF_UINT16 = 2,
    SJKH_GGUF_INT16 = 3,
    SJKH_GGUF_UINT32 = 4,
    SJKH_GGUF_INT32 = 5,
    SJKH_GGUF_FLOAT32 = 6,
    SJKH_GGUF_BOOL = 7,
    SJKH_GGUF_STRING = 8,
    SJKH_GGUF_ARRAY = 9,
    SJKH_GGUF_UINT64 = 10,
    SJKH_GGUF_INT64 = 11,
    SJKH_GGUF_FLOAT64 = 12,
    SJKH_GGUF_VTYPE_COUNT
} sjkh_gguf_vtype;

/* ggml tensor types (the codes stored in GGUF tensor infos). */
typedef enum sjkh_type {
    SJKH_TYPE_F32 = 0,
    SJKH_TYPE_F16 = 1,
    SJKH_TYPE_Q4_0 = 2,
    SJKH_TYPE_Q4_1 = 3,
    SJKH_TYPE_Q5_0 = 6,
    SJKH_TYPE_Q5_1 = 7,
    SJKH_TYPE_Q8_0 = 8,
    SJKH_TYPE_Q8_1 = 9,
    SJKH_TYPE_Q2_K = 10,
    SJKH_TYPE_Q3_K = 11,
    SJKH_TYPE_Q4_K = 12,
    SJKH_TYPE_Q5_K = 13,
    SJKH_TYPE_Q6_K = 14,
    SJKH_TYPE_Q8_K = 15,
    SJKH_TYPE_I8 = 24,
    SJKH_TYPE_I16 = 25,
    SJKH_TYPE_I32 = 26,
    SJKH_TYPE_I64 = 27,
    SJKH_TYPE_F64 = 28,
    SJKH_TYPE_BF16 = 30,
    SJKH_TYPE_COUNT = 40 /* codes are < SJKH_TYPE_COUNT */
} sjkh_type;

/* Traits of a tensor type. `compute` is 1 for the weight types the host can multiply
 * with (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K). */
typedef struct sjkh_type_info {
    const char *name;       /* "q4_K", ... */
    uint32_t block_values;  /* values per block (1 for plain types) */
    uint32_t block_nbytes;  /* bytes per block */
    int compute;
} sjkh_type_info;

/* Traits of a type code, or NULL for a code this build does not know. Thread-safe. */
const sjkh_type_info *sjkh_type_get(uint32_t type);

/* One tensor. Dimensions follow ggml: ne[0] is contiguous; unused trailing ne are 1.
 * A 2-D weight with ne = [n_in, n_out] holds n_out rows of row_nbytes each. */
typedef struct sjkh_tensor {
    const char *name;       /* NUL-terminated, owned by the handle */
    uint32_t type;          /* sjkh_type */
    uint32_t n_dims;        /* 1..4 */
    uint64_t ne[4];
    uint64_t n_values;      /* ne[0]*ne[1]*ne[2]*ne[3] (checked) */
    size_t row_nbytes;      /* bytes of one ne[0]-row */
    size_t nbytes;          /* bytes of the whole tensor */
    uint64_t file_offset;   /* absolute offset of the data in the file */
    const void *data;       /* into the mapping */
} sjkh_tensor;

/* An array value. For numeric arrays `data` points at count packed little-endian
 * elements (unaligned); for string arrays use sjkh_gguf_arr_str. */
typedef struct sjkh_gguf_arr {
    uint32_t elem_type;     /* sjkh_gguf_vtype, never ARRAY */
    uint64_t count;
    const void *data;       /* numeric arrays only; NULL for strings */
    const sjkh_gguf *g;     /* owner (string lookups) */
    int64_t kv;             /* owning key index (string lookups) */
} sjkh_gguf_arr;

/* Maps and validates a GGUF file. On success *out owns the mapping (close it with
 * sjkh_gguf_close). Errors: SJK_ERR_IO (open/stat/mmap, errno kept), SJK_ERR_FORMAT
 * (not GGUF, unsupported version, big-endian, unknown value or tensor type),
 * SJK_ERR_CORRUPT (a length, count, offset or size that does not fit), SJK_ERR_NOMEM.
 * err receives a one-line explanation. */
sjk_status sjkh_gguf_open(const char *path, sjkh_gguf **out, char *err, size_t err_cap);

/* Same over caller memory (which must outlive the handle and stay unchanged). */
sjk_status sjkh_gguf_open_memory(const void *data, size_t nbytes, sjkh_gguf **out,
                                 char *err, size_t err_cap);

/* Unmaps and frees. NULL is fine. */
void sjkh_gguf_close(sjkh_gguf *g);

uint32_t sjkh_gguf_version(const sjkh_gguf *g);
uint32_t sjkh_gguf_alignment(const sjkh_gguf *g);
/* Size of the mapped file. */
size_t sjkh_gguf_file_nbytes(const sjkh_gguf *g);

/* --- metadata ---------------------------------------------------------------------- */
int64_t sjkh_gguf_n_kv(const sjkh_gguf *g);
/* Index of a key, or -1. O(log n_kv). */
int64_t sjkh_gguf_find_key(const sjkh_gguf *g, const char *key);
/* Key name (NUL-terminated) and value type of entry i (NULL / VTYPE_COUNT if out of range). */
const char *sjkh_gguf_key(const sjkh_gguf *g, int64_t i);
sjkh_gguf_vtype sjkh_gguf_kv_type(const sjkh_gguf *g, int64_t i);

/* Typed getters by key. They return SJK_ERR_RANGE when the key is absent (the caller
 * decides whether that is an error), SJK_ERR_FORMAT when the stored type cannot be
 * converted exactly: get_u64/get_i64 accept any integer type (and BOOL) whose value fits;
 * get_u32 likewise; get_f32 accepts FLOAT32, FLOAT64 and integers; get_bool accepts BOOL
 * and integers 0/1. get_str gives the bytes (not NUL-terminated) and their length. */
sjk_status sjkh_gguf_get_u64(const sjkh_gguf *g, const char *key, uint64_t *out);
sjk_status sjkh_gguf_get_i64(const sjkh_gguf *g, const char *key, int64_t *out);
sjk_status sjkh_gguf_get_u32(const sjkh_gguf *g, const char *key, uint32_t *out);
sjk_status sjkh_gguf_get_f32(const sjkh_gguf *g, const char *key, float *out);
sjk_status sjkh_gguf_get_bool(const sjkh_gguf *g, const char *key, int *out);
sjk_status sjkh_gguf_get_str(const sjkh_gguf *g, const char *key, const char **s, size_t *len);
/* Copies a string value into buf as a NUL-terminated string, every control byte (below
 * 0x20, 0x7f: a NUL, an escape sequence) replaced by '?', so the copy is safe to print;
 * SJK_ERR_BUFFER if it does not fit (buf then holds a truncated copy). The raw bytes are
 * sjkh_gguf_get_str's. */
sjk_status sjkh_gguf_get_cstr(const sjkh_gguf *g, const char *key, char *buf, size_t cap);
sjk_status sjkh_gguf_get_arr(const sjkh_gguf *g, const char *key, sjkh_gguf_arr *out);

/* Bytes of one value of a numeric type (1, 2, 4 or 8); 0 for STRING, ARRAY or an
 * unknown code. */
size_t sjkh_gguf_vtype_nbytes(uint32_t vtype);

/* Array element accessors (i < count is the caller's job; out-of-range gives 0 / NULL).
 * arr_i64 reads any integer element type; arr_f32 reads FLOAT32/FLOAT64/integers. */
int64_t sjkh_gguf_arr_i64(const sjkh_gguf_arr *a, uint64_t i);
float sjkh_gguf_arr_f32(const sjkh_gguf_arr *a, uint64_t i);
/* String element i: bytes (not NUL-terminated) and length. O(1). */
const char *sjkh_gguf_arr_str(const sjkh_gguf_arr *a, uint64_t i, size_t *len);

/* --- tensors ----------------------------------------------------------------------- */
int64_t sjkh_gguf_n_tensors(const sjkh_gguf *g);
const sjkh_tensor *sjkh_gguf_tensor(const sjkh_gguf *g, int64_t i);
/* By name, or NULL. O(log n_tensors). */
const sjkh_tensor *sjkh_gguf_find_tensor(const sjkh_gguf *g, const char *name);

/* ====================================================================================
 * Tokenizers — text <-> token ids exactly as llama.cpp does it for the two model kinds
 *
 *   SPM (tokenizer.ggml.model "llama", Gemma 3): spaces become U+2581, then adjacent
 *       symbols merge greedily by vocabulary score (highest first, leftmost on ties);
 *       characters that end up outside the vocabulary fall back to <0xXX> byte tokens.
 *   BPE (tokenizer.ggml.model "gpt2", SmolLM2, pre-tokenizer "smollm"): the text is split
 *       into words (every \p{N} digit alone, then the GPT-2 pattern), each word's bytes are
 *       mapped to printable code points, and pairs merge by rank from the merges list.
 *
 * Both first cut the text at special tokens (docs/BACKGROUND.md, "Engine facts"): USER_DEFINED
 * tokens always, CONTROL and UNKNOWN ones only with SJKH_TOKENIZE_PARSE_SPECIAL; longest
 * first (ties: lower id first), leftmost occurrences. A tokenizer is immutable after
 * create and may be used from many threads at once; it owns copies of every string, so
 * it outlives the GGUF handle or arrays it was made from. Encoding allocates scratch
 * memory per call (it is not on the cache's hot path).
 * ==================================================================================== */

typedef struct sjkh_tokenizer sjkh_tokenizer;

typedef enum sjkh_tokenizer_kind {
    SJKH_TOKENIZER_SPM = 1, /* SentencePiece-style merges by score, byte fallback */
    SJKH_TOKENIZER_BPE = 2  /* GPT-2 byte-level BPE, merges by rank */
} sjkh_tokenizer_kind;

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
typedef enum sjkh_token_type {
    SJKH_TOKEN_NORMAL = 1,
    SJKH_TOKEN_UNKNOWN = 2,
    SJKH_TOKEN_CONTROL = 3,
    SJKH_TOKEN_USER_DEFINED = 4,
    SJKH_TOKEN_UNUSED = 5,
    SJKH_TOKEN_BYTE = 6
} sjkh_token_type;

/* BPE pre-tokenizers (tokenizer.ggml.pre). */
typedef enum sjkh_bpe_pre {
    SJKH_BPE_PRE_SMOLLM = 0, /* "smollm": every \p{N} alone, then the GPT-2 pattern */
    SJKH_BPE_PRE_GPT2 = 1,   /* the GPT-2 pattern alone (digit runs stay together) */
    SJKH_BPE_PRE_QWEN2 = 2   /* "qwen2", "deepseek-r1-qwen": Qwen2's pattern (case-insensitive
                                contractions, one non-letter before a letter run, digits
                                one by one, newline runs grouped) */
} sjkh_bpe_pre;

/* A vocabulary given as plain arrays (what the GGUF keys tokenizer.ggml.* hold). Strings
 * are (pointer, length) pairs and need no NUL. Ids of absent special tokens are -1. */
typedef struct sjkh_tokenizer_desc {
    sjkh_tokenizer_kind kind;
    sjkh_bpe_pre pre;              /* BPE only */
    uint32_t n_tokens;
    const char *const *tokens;     /* [n_tokens] token texts (BPE: byte-mapped form) */
    const size_t *token_nbytes;    /* [n_tokens] */
    const float *scores;           /* [n_tokens] merge scores (SPM), or NULL: all 0 */
    const int32_t *types;          /* [n_tokens] sjkh_token_type, or NULL: all NORMAL */
    uint32_t n_merges;             /* BPE: merges "left right", rank = index */
    const char *const *merges;     /* [n_merges] */
    const size_t *merge_nbytes;    /* [n_merges] */
    int32_t bos_id, eos_id, eot_id, unk_id, pad_id;
    int add_bos, add_eos;          /* what SJKH_TOKENIZE_ADD_SPECIAL adds */
    int add_space_prefix;          /* SPM: prepend " " to text after BOS/special/start */
    const char *chat_template;     /* tokenizer.chat_template, or NULL (style detection) */
    size_t chat_template_nbytes;
} sjkh_tokenizer_desc;

/* Fills d with an empty SPM description: no tokens, every id -1, all flags 0. */
void sjkh_tokenizer_desc_default(sjkh_tokenizer_desc *d);

/* Builds a tokenizer from arrays. SJK_ERR_PARAM (with err naming the field) for a bad
 * kind, no tokens, a missing merges list for BPE, a special id out of range or a merge
 * without a separating space; SJK_ERR_NOMEM. */
sjk_status sjkh_tokenizer_create(const sjkh_tokenizer_desc *d, sjkh_tokenizer **out,
                                 char *err, size_t err_cap);

/* Builds the tokenizer a GGUF file describes (tokenizer.ggml.model "llama" or "gpt2";
 * for "gpt2" tokenizer.ggml.pre must be "smollm", the pre-tokenizer implemented here).
 * Missing add_bos/add_eos/add_space_prefix keys and special ids take llama.cpp's defaults
 * for the kind (SPM: BOS yes, space prefix yes, bos 1 / eos 2 / unk 0; BPE: no BOS).
 * SJK_ERR_FORMAT (a key of the wrong type, an id outside the vocabulary) or
 * SJK_ERR_UNSUPPORTED (another model or pre-tokenizer), with a message, otherwise. */
sjk_status sjkh_tokenizer_from_gguf(const sjkh_gguf *g, sjkh_tokenizer **out, char *err,
                                    size_t err_cap);

/* Frees. NULL is fine. */
void sjkh_tokenizer_free(sjkh_tokenizer *t);

enum {
    SJKH_TOKENIZE_ADD_SPECIAL = 1u,  /* add BOS/EOS as the vocabulary asks (add_bos, add_eos) */
    SJKH_TOKENIZE_PARSE_SPECIAL = 2u /* turn CONTROL/UNKNOWN token texts in the input into ids */
};

/* Tokenizes text_nbytes bytes of text (any bytes; invalid UTF-8 is handled as llama.cpp
 * does). Writes up to ids_cap ids and sets *n_ids to the full count; SJK_ERR_BUFFER when
 * that exceeds ids_cap (call again with a bigger buffer; text_nbytes * 6 + 8 always
 * suffices, about text_nbytes / 3 is typical). SJK_ERR_NOMEM; SJK_ERR_UNSUPPORTED if a
 * byte has no fallback token (SPM). Allocates scratch per call; thread-safe. */
sjk_status sjkh_tokenizer_encode(const sjkh_tokenizer *t, const char *text, size_t text_nbytes,
                                 unsigned flags, int32_t *ids, size_t ids_cap, size_t *n_ids);

enum { SJKH_DETOK_SPECIAL = 1u /* render CONTROL/UNKNOWN tokens as their text */ };

/* The bytes of one token: NORMAL tokens with U+2581 -> " " (SPM) or the byte mapping
 * undone (BPE); BYTE tokens their byte; USER_DEFINED their text; CONTROL and UNKNOWN
 * nothing unless SJKH_DETOK_SPECIAL. Writes up to dst_cap bytes (no NUL), *n = length;
 * SJK_ERR_BUFFER if it does not fit, SJK_ERR_RANGE for an id outside the vocabulary. */
sjk_status sjkh_tokenizer_token_to_piece(const sjkh_tokenizer *t, int32_t id, unsigned flags,
                                         char *dst, size_t dst_cap, size_t *n);

/* Concatenated pieces of n_ids tokens (with add_space_prefix, one leading space of the
 * first piece is dropped). *n = total length; the text is NUL-terminated when
 * dst_cap > *n. SJK_ERR_BUFFER when it does not fit, SJK_ERR_RANGE for a bad id. */
sjk_status sjkh_tokenizer_decode(const sjkh_tokenizer *t, const int32_t *ids, size_t n_ids,
                                 unsigned flags, char *dst, size_t dst_cap, size_t *n);

sjkh_tokenizer_kind sjkh_tokenizer_kind_of(const sjkh_tokenizer *t);
uint32_t sjkh_tokenizer_n_tokens(const sjkh_tokenizer *t);
int32_t sjkh_tokenizer_bos(const sjkh_tokenizer *t); /* -1 if none */
int32_t sjkh_tokenizer_eos(const sjkh_tokenizer *t); /* -1 if none */
int sjkh_tokenizer_add_bos(const sjkh_tokenizer *t);
/* 1 if generation should stop at id: EOS, EOT and the end-of-turn / end-of-text /
 * repository-marker CONTROL tokens llama.cpp also treats as end of generation. */
int sjkh_tokenizer_is_eog(const sjkh_tokenizer *t, int32_t id);
/* Text (not NUL-terminated) and type of a token; NULL / 0 for an id out of range. */
const char *sjkh_tokenizer_token_text(const sjkh_tokenizer *t, int32_t id, size_t *nbytes);
int sjkh_tokenizer_token_type(const sjkh_tokenizer *t, int32_t id);
/* Id of the token whose text is exactly these bytes, or -1. */
int32_t sjkh_tokenizer_find(const sjkh_tokenizer *t, const char *text, size_t nbytes);

/* --- chat templates ------------------------------------------------------------------
 * CHATML (SmolLM2-Instruct):  [<|im_start|>system\n{default}<|im_end|>\n when the first
 *     message is not a system message and the GGUF template carries a default]
 *     then <|im_start|>{role}\n{content}<|im_end|>\n per message;
 *     generation prompt <|im_start|>assistant\n.
 * GEMMA: system text (trimmed) + "\n\n" joins the next user turn; per message
 *     <start_of_turn>{role, assistant -> model}\n{trimmed content}<end_of_turn>\n;
 *     generation prompt <start_of_turn>model\n. No <bos> in the text: encode the result
 *     with ADD_SPECIAL | PARSE_SPECIAL, which adds BOS where the vocabulary asks for it. */
typedef enum sjkh_chat_style {
    SJKH_CHAT_NONE = 0,
    SJKH_CHAT_CHATML = 1,
    SJKH_CHAT_GEMMA = 2
} sjkh_chat_style;

typedef struct sjkh_chat_message {
    const char *role;    /* "system", "user", "assistant" (NUL-terminated) */
    const char *content; /* NUL-terminated */
} sjkh_chat_message;

/* The style this vocabulary uses (from its template text and special tokens). */
sjkh_chat_style sjkh_tokenizer_chat_style(const sjkh_tokenizer *t);

/* Renders a conversation as text in the tokenizer's style. *n = length; NUL-terminated
 * when dst_cap > *n; SJK_ERR_BUFFER if it does not fit, SJK_ERR_UNSUPPORTED when the
 * style is NONE, SJK_ERR_PARAM for NULL roles/contents. */
sjk_status sjkh_tokenizer_chat_render(const sjkh_tokenizer *t, const sjkh_chat_message *msgs,
                                      size_t n_msgs, int add_generation_prompt, char *dst,
                                      size_t dst_cap, size_t *n);

/* ====================================================================================
 * Models and sessions — forward passes of `gemma3` and `llama` GGUF models
 *
 * A model is the mapped GGUF plus pointers to its weights; it is immutable after load and
 * may be shared by many sessions (threads). A session is one sequence: its KV cache, its
 * thread pool and its activation buffers, all sized at create; feeding tokens never
 * allocates. Layers whose cache grows with the context (every llama layer; the global
 * layers of gemma3) use the configured cache; gemma3's sliding-window layers keep their
 * own window of sliding_window positions, in fp16 or q8_0 (window_type).
 * ==================================================================================== */

typedef struct sjkh_model sjkh_model;
typedef struct sjkh_session sjkh_session;

typedef enum sjkh_arch { SJKH_ARCH_LLAMA = 1, SJKH_ARCH_GEMMA3 = 2, SJKH_ARCH_QWEN2 = 3 } sjkh_arch;

typedef struct sjkh_model_info {
    sjkh_arch arch;
    const char *arch_name;     /* "llama", "gemma3", "qwen2" */
    uint32_t n_layers, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    uint32_t n_ctx_train;      /* the model's context length */
    uint32_t sliding_window;   /* gemma3 local layers; 0 = none */
    uint32_t n_global_layers;  /* layers whose cache grows with the context */
    float rms_eps, rope_base, rope_base_local;
    size_t weights_nbytes;     /* tensor bytes in the file */
} sjkh_model_info;

/* Maps and checks a model: architecture, hyper-parameters, every tensor present with the
 * right shape and a supported type. SJK_ERR_IO, SJK_ERR_FORMAT / SJK_ERR_CORRUPT (bad
 * file), SJK_ERR_UNSUPPORTED (unknown architecture or tensor type), SJK_ERR_NOMEM; err
 * says which key or tensor. */
sjk_status sjkh_model_load(const char *path, sjkh_model **out, char *err, size_t err_cap);
void sjkh_model_free(sjkh_model *m);
const sjkh_model_info *sjkh_model_get_info(const sjkh_model *m);
const sjkh_gguf *sjkh_model_gguf(const sjkh_model *m);
/* 1 if layer il's cache grows with the context (full attention). */
int sjkh_model_layer_is_global(const sjkh_model *m, uint32_t il);

/* Storage of gemma3's sliding-window layers (sjkh_session_params.window_type; the
 * growing layers take `kv`). Each window layer holds window + n_batch rows. */
typedef enum sjkh_window_type {
    SJKH_WINDOW_F16 = 0,  /* fp16 rows, 2 B per value (llama.cpp's f16-cache numerics) */
    SJKH_WINDOW_Q8_0 = 1  /* ggml q8_0 blocks (fp16 scale + 32 int8, 34 B per 32 values:
                             8.5 bits, 0.53x the bytes); needs head_dim % 32 == 0 */
} sjkh_window_type;

/* "f16", "q8_0", or NULL for an unknown value (the CLI's --window parses these names:
 * tools/cli_parse.h). */
const char *sjkh_window_type_name(uint32_t t);

/* The most threads one session runs (its own pool), and the longest KV configuration
 * string it keeps (session files store it in 128 bytes). */
#define SJKH_SESSION_MAX_THREADS 256
#define SJKH_KV_STR_MAX 127

typedef struct sjkh_session_params {
    uint32_t n_ctx;        /* positions this session can hold (<= n_ctx_train) */
    uint32_t n_batch;      /* most tokens per forward pass (prefill chunk), >= 1 */
    uint32_t n_threads;    /* threads including the caller, 1..SJKH_SESSION_MAX_THREADS; its
                              libsjkvarn cache runs min(n_threads, SJK_CACHE_MAX_THREADS) */
    const char *kv;        /* cache configuration for the growing layers: "host-f16" (the
                              host's own fp16 cache) or any libsjkvarn configuration
                              string ("f16", "q8_0/q4_0", "sj:4/4", ...) */
    uint32_t act_quant;    /* 1 (default): activations are quantized to 8 bits before every
                              quantized-weight matmul, as llama.cpp does (matches llama.cpp's
                              numerics). Chunks of fewer than 16 tokens multiply them with
                              integer block dots; longer (prefill) chunks, on CPUs with
                              AVX-512, expand them back to f32 and take the f32 panel kernel:
                              the same terms summed in another float order, ~2.5x faster.
                              0: exact activations: every matmul takes
                              the f32 activations against weight rows dequantized on the fly
                              to f32, and the GELU is computed in f32 rather than through
                              ggml's f16 table, so the logits are a continuous function of
                              K/V (for KL studies that compare caches; slower) */
    uint32_t window_type;  /* sjkh_window_type of the sliding-window layers (default
                              SJKH_WINDOW_F16); models without such layers ignore it */
} sjkh_session_params;

/* n_ctx 4096, n_batch 512, n_threads 1, kv "f16", act_quant 1, window_type f16. */
sjkh_session_params sjkh_session_params_default(void);

sjk_status sjkh_session_create(const sjkh_model *m, const sjkh_session_params *p,
                               sjkh_session **out, char *err, size_t err_cap);
void sjkh_session_free(sjkh_session *s);

/* Runs n tokens at positions n_past … n_past + n − 1 (split into n_batch chunks) and
 * advances n_past. logits: NULL, [n_vocab] (the last token's) when all_logits is 0, or
 * [n][n_vocab] when it is 1. SJK_ERR_PARAM or SJK_ERR_RANGE (with err) if the arguments
 * are bad, the context would overflow or a token id is outside the vocabulary: checked
 * first, nothing is appended then.
 * A failure in the middle of a chunk — SJK_ERR_CORRUPT when a layer's output turns
 * non-finite (the model's weights hold NaN or Inf; err names the layer), or the KV cache
 * refusing positions it was sized for (an internal error, not expected after the checks
 * above) — leaves the chunks before it fed, and the failing chunk in some layers and not
 * in others (n_past says nothing reliable about that chunk; logits hold nothing useful).
 * The session then refuses every feed and sjkh_session_save with an error until
 * sjkh_session_reset, or a successful sjkh_session_load, starts it over. Non-finite
 * logits from the output projection (SJK_ERR_CORRUPT, err says so) come after every layer
 * took the chunk: n_past counts it and the session stays usable. */
sjk_status sjkh_session_feed(sjkh_session *s, const int32_t *tokens, size_t n, float *logits,
                             int all_logits, char *err, size_t err_cap);
/* One decode step of n different sessions in one forward pass (a server's sessions that
 * decode at the same moment): session ss[i] takes tokens[i] at its own next position.
 * Every matmul multiplies the n rows at once (each weight row is read once per step for
 * all of them); each row's K/V goes to, and its query attends, its own session's cache.
 * logits [n][n_vocab]. The pass runs on ss[0]'s threads and activation buffers, so
 * n <= ss[0]'s n_batch; all sessions must come from the same model with the same
 * act_quant and n_threads, each at most once, each with room for one more position.
 * Otherwise SJK_ERR_PARAM / SJK_ERR_RANGE (with err) and no session changes. A cache that
 * refuses row i, or non-finite activations or logits in row i (SJK_ERR_CORRUPT), fail
 * that row alone: status[i] receives the error and that session refuses feeds until a
 * reset (its layers may disagree), the other rows advance as usual and status[j] =
 * SJK_OK. A session whose earlier feed failed is refused (its status, nothing changes).
 * With n < 16 (below the prefill matmul path) each row's logits are bit-identical to
 * those of sjkh_session_feed of that token alone (tests/test_host_batch.c). */
sjk_status sjkh_session_decode_batch(sjkh_session *const *ss, size_t n, const int32_t *tokens, float *logits,
                                     sjk_status *status, char *err, size_t err_cap);
uint32_t sjkh_session_n_past(const sjkh_session *s);
/* Forgets every position (the cache is emptied, its memory kept). */
sjk_status sjkh_session_reset(sjkh_session *s);
/* Forgets positions >= keep, so that a prompt sharing only the first `keep` tokens with
 * what the session holds continues from there. It may keep fewer: *kept receives how
 * many positions remain (the start of a sealed record that contains `keep`, or 0 when a
 * sliding-window layer's ring no longer holds the rows the next position would see);
 * feed the tokens from *kept on. keep >= n_past keeps everything. */
sjk_status sjkh_session_truncate(sjkh_session *s, uint32_t keep, uint32_t *kept);

/* Session files: save the session's whole KV state (every layer, the position count)
 * and one pending token (the sampled token not yet fed, or -1) to path, atomically
 * (temporary file, fsync, rename, directory fsync), with CRC-32C checksums and the model
 * fingerprint (docs/FORMAT.md "## Session files"). Load restores into a session created
 * from the same model with the same n_ctx, n_batch, kv and window_type (n_threads may
 * differ): after it the next token's logits are bit-identical to the saved session's.
 * Load validates everything before it changes anything: SJK_ERR_FORMAT (not a session
 * file, another version), SJK_ERR_CORRUPT (checksum, truncation, bounds),
 * SJK_ERR_MISMATCH (another model or session shape), SJK_ERR_IO, SJK_ERR_NOMEM; err says
 * what. Every restored value is checked: a non-finite fp16 value or q8_0 block scale in
 * any layer is SJK_ERR_CORRUPT. Save refuses a path that exists and is not a regular file
 * (SJK_ERR_PARAM: a device node or FIFO is never replaced); load refuses to open one (a
 * FIFO never blocks it). Save allocates one buffer the size of the cache part; load one
 * the size of the file. */
sjk_status sjkh_session_save(sjkh_session *s, const char *path, int32_t pending_token, char *err,
                             size_t err_cap);
sjk_status sjkh_session_load(sjkh_session *s, const char *path, int32_t *pending_token, char *err,
                             size_t err_cap);
/* Checks, before a long generation, that sjkh_session_save(path) could write: path is
 * missing or a regular file (SJK_ERR_PARAM, err says why), its name fits, and a temporary
 * file can be created beside it (SJK_ERR_IO with errno: a read-only or missing
 * directory). Creates and removes one temporary file; changes nothing else. */
sjk_status sjkh_session_save_check(const char *path, char *err, size_t err_cap);
/* 32 bytes identifying a model file (CRC-32C of its hyper-parameters, tensor table, size
 * and sampled tensor data; not cryptographic). */
void sjkh_model_fingerprint(const sjkh_model *m, uint8_t out[SJK_FINGERPRINT_NBYTES]);

/* What a session file's host container says (sjkh_session_file_inspect). */
typedef struct sjkh_session_file_info {
    uint32_t version;          /* 1 or 2 (docs/FORMAT.md "Session files") */
    uint32_t n_past, n_layers, n_ctx, n_batch;
    uint32_t window_type;      /* sjkh_window_type (0 in version 1) */
    int32_t pending_token;     /* -1: none */
    uint8_t fingerprint[SJK_FINGERPRINT_NBYTES];
    char kv[128];              /* the KV configuration string (NUL-terminated) */
    uint64_t host_nbytes;      /* host section, its CRC included */
    uint64_t cache_offset;     /* where the cache part (a cache file) starts */
    uint64_t cache_nbytes;     /* its bytes (0: no libsjkvarn cache) */
    int header_ok;             /* 1: the header's CRC-32C matched */
    int host_ok;               /* 1: the host section's CRC-32C matched */
} sjkh_session_file_info;

/* Reads a session file from memory without a model: magic, version, header CRC, the
 * sizes of the two parts against the file, the host section's CRC. The cache part is
 * left to sjk_cache_file_inspect (data + cache_offset, cache_nbytes bytes); the layout
 * of the host section depends on the model, so only sjkh_session_load checks it row by
 * row. *info is filled as far as the file could be read, also on error. SJK_OK when
 * every check passed; SJK_ERR_FORMAT (not a session file, another version),
 * SJK_ERR_CORRUPT (checksum, truncation, sizes); err says what. Never allocates. */
sjk_status sjkh_session_file_inspect(const void *data, size_t nbytes, sjkh_session_file_info *info,
                                     char *err, size_t err_cap);

/* ---- prefix blocks (host/model/session_block.c; store/ shares them, docs/STORE.md) --------
 * Block i is positions [128 i, 128 i + 128) of every layer, in two parts: GROWING (every
 * growing layer: sjk_cache_block_export's bytes per KV head, or a host-f16 layer's fp16
 * slots) and WINDOW (every sliding-window layer's slots as its ring holds them). Bytes
 * carry no configuration: key them by the model and the session's kv / window_type.
 *
 * Publisher: feed the prompt up to the cut (sjkh_session_block_cut), sjkh_session_seal_to
 * it, export blocks [0, cut) of GROWING and [window_first(cut), cut) of WINDOW, then feed
 * the rest. Reader (a fresh session with the same model, kv and window_type): import
 * GROWING blocks 0 .. n-1 in order and WINDOW blocks window_first(n) .. n-1, then
 * sjkh_session_block_finish(n) and feed the rest of the prompt: the state is byte for byte
 * the publisher's at the cut, so (same n_batch and threads) the logits are bit-identical.
 * A rejected import (SJK_ERR_CORRUPT from the cache's checks) resets the session. */
enum { SJKH_BLOCK_TOKENS = 128, SJKH_BLOCK_GROWING = 0, SJKH_BLOCK_WINDOW = 1 };
/* Blocks a prompt of n_tokens publishes: leaves at least one token to feed and, for a
 * compressed cache, the newest tail_min positions unsealed (where an idle seal would
 * stop). 0 if none. */
uint32_t sjkh_session_block_cut(const sjkh_session *s, uint32_t n_tokens);
/* Seals the compressed growing layers up to pos (sjk_cache_seal_to); a no-op otherwise. */
sjk_status sjkh_session_seal_to(sjkh_session *s, uint32_t pos);
/* The first window block a reader of n_blocks needs (0 without window layers). */
uint32_t sjkh_session_block_window_first(const sjkh_session *s, uint32_t n_blocks);
sjk_status sjkh_session_block_nbytes(const sjkh_session *s, int part, uint32_t block, size_t *nbytes);
/* The pieces of a block's bytes, in order: per layer of the part, one per KV head (a
 * layer in the libsjkvarn cache) or one for all heads (head = UINT32_MAX: a host layer's
 * slots). out NULL: count only, in *n; SJK_ERR_BUFFER when more than cap. */
typedef struct sjkh_block_piece {
    uint32_t layer, head;
    size_t nbytes;
} sjkh_block_piece;
sjk_status sjkh_session_block_pieces(const sjkh_session *s, int part, uint32_t block, sjkh_block_piece *out,
                                     size_t cap, size_t *n);
/* SJK_ERR_RANGE: the block is not final, or (WINDOW) no longer in the ring. dst NULL:
 * size only. */
sjk_status sjkh_session_block_export(sjkh_session *s, int part, uint32_t block, void *dst, size_t dst_cap,
                                     size_t *nbytes);
/* Into a session with n_past 0, GROWING blocks in order from 0; SJK_ERR_RANGE out of
 * order, SJK_ERR_BUFFER for a wrong size, SJK_ERR_CORRUPT (session reset) for bytes the
 * cache never writes. */
sjk_status sjkh_session_block_import(sjkh_session *s, int part, uint32_t block, const void *src,
                                     size_t src_nbytes);
/* Ends an import of n_blocks: checks every growing layer holds 128 n positions and the
 * window blocks cover what the window needs, then sets n_past = 128 n. */
sjk_status sjkh_session_block_finish(sjkh_session *s, uint32_t n_blocks);

/* The analysis option ":exact=LIST" at the end of a KV configuration string (the KL
 * study's region attribution, docs/EVAL.md "Where the error comes from"): attention reads
 * an fp16 copy in which the regions LIST names (sink, body, ring, uniform, each
 * optionally .k or .v; k, v, all, none; joined by '+') hold the exact rows and the rest
 * the rows the cache decodes. Splits it off cfg: *rest receives the string without it,
 * *mask its bits (bit 2 r + h: region r = sjk_region, h = 0 for K, 1 for V). Returns 1
 * when present, 0 when absent (rest is then not written), -1 when malformed (err says
 * why). */
int sjkh_kv_parse_exact(const char *cfg, char *rest, size_t rest_cap, unsigned *mask, char *err, size_t err_cap);

typedef struct sjkh_kv_report {
    size_t total_nbytes;     /* every cache the session holds (growing + window layers) */
    size_t growing_nbytes;   /* the configured cache of the growing layers */
    size_t window_nbytes;    /* sliding-window caches */
    size_t occupied_nbytes;  /* bytes holding live K/V now */
    double bits_per_value;   /* occupied bits per K/V value of the growing layers */
} sjkh_kv_report;
sjk_status sjkh_session_kv_report(const sjkh_session *s, sjkh_kv_report *r);

/* What a session allocates for its KV, before there is a session (the planner,
 * libsjkplan, prices with these, so its estimates equal sjkh_session_kv_report):
 *  sjkh_kv_host_layer_nbytes: the bytes (K and V) of one layer the host holds itself,
 *    a "host-f16" growing layer (window = 0: n_ctx rows) or a sliding-window ring
 *    (min(n_ctx, window + max_rows) rows, fp16 or q8_0 by window_type) of n_kv_heads x
 *    head_dim values a row; max_rows is the session's batch, min(n_batch, n_ctx). 0 on
 *    overflow, or for a q8_0 window whose head_dim is not a multiple of 32.
 *  sjkh_kv_cache_threads: the threads a session of n_threads threads gives its
 *    libsjkvarn cache (sjk_cache_params.n_threads): n_threads, at least 1, at most
 *    SJK_CACHE_MAX_THREADS (the session's own pool may be larger).
 * Pure functions: thread-safe, no allocation. */
size_t sjkh_kv_host_layer_nbytes(uint32_t n_kv_heads, uint32_t head_dim, uint32_t n_ctx, uint32_t max_rows,
                                 uint32_t window, uint32_t window_type);
uint32_t sjkh_kv_cache_threads(uint32_t n_threads);
/* The libsjkvarn cache that holds the session's growing layers (sequence 0, layer i =
 * the i-th growing layer), or NULL for "host-f16". Owned by the session; for reports
 * (sjk_cache_memory_report, sjk_cache_length) and sjk_cache_seal_idle between feeds,
 * never for appends. */
sjk_cache *sjkh_session_cache(sjkh_session *s);

/* ---- sampling ------------------------------------------------------------------------
 * temp <= 0: greedy (first maximum). Otherwise softmax(logits / temp), restricted to the
 * top_k most likely (top_k <= 0: all), then to the smallest prefix whose probability
 * reaches top_p (top_p >= 1: all), then a draw from a seeded PRNG (same seed, same
 * logits -> same tokens). */
typedef struct sjkh_sampler_params {
    float temp;
    int32_t top_k;
    float top_p;
    uint64_t seed;
} sjkh_sampler_params;

typedef struct sjkh_sampler sjkh_sampler;
sjkh_sampler_params sjkh_sampler_params_default(void); /* temp 0.8, top_k 40, top_p 0.95, seed 0 */
sjk_status sjkh_sampler_create(const sjkh_sampler_params *p, uint32_t n_vocab, sjkh_sampler **out);
void sjkh_sampler_free(sjkh_sampler *s);
/* Picks a token id from logits [n_vocab]. Never allocates. */
int32_t sjkh_sampler_sample(sjkh_sampler *s, const float *logits);

#ifdef __cplusplus
}
#endif
#endif
