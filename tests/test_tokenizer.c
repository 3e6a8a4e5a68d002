/* test_tokenizer.c — the tokenizers against llama.cpp.
 *
 * Golden ids (tests/data/golden/tok-<model>.txt, made by tests/oracle/make_golden.py from
 * llama-cpp-python) for the ~76 KB corpus in tests/data/golden/corpus, in two modes
 * (plain text with BOS; special-token parsing on), must match exactly for every real model
 * (Qwen2.5-Coder-1.5B only under SJK_TEST_BIG=1: CI does not fetch it).
 * The model files come from scripts/fetch-model (SJK_MODEL_DIR or
 * ~/.cache/sjkvarn/models); without them those tests SKIP, and CI counts a skip as a
 * failure. Small hand-made vocabularies pin the algorithms without any model file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support/files.h"
#include "sjkhost.h"
#include "support/models.h"

/* ---- helpers ------------------------------------------------------------------------ */

#define SJKH_ARRAY_LEN_T(a) (sizeof(a) / sizeof((a)[0]))

/* Encodes into a fresh array (caller frees). */
static int32_t *encode(const sjkh_tokenizer *t, const char *s, size_t n, unsigned flags, size_t *n_ids)
{
    size_t cap = 6 * n + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return NULL;
    if (sjkh_tokenizer_encode(t, s, n, flags, ids, cap, n_ids) != SJK_OK) {
        free(ids);
        return NULL;
    }
    return ids;
}

static void print_ids(const char *label, const sjkh_tokenizer *t, const int32_t *ids, size_t n,
                      size_t from, size_t to)
{
    fprintf(stderr, "    %s:", label);
    for (size_t i = from; i < to && i < n; i++) {
        char piece[64];
        size_t pn = 0;
        sjkh_tokenizer_token_to_piece(t, ids[i], SJKH_DETOK_SPECIAL, piece, sizeof piece - 1, &pn);
        piece[pn < sizeof piece ? pn : sizeof piece - 1] = 0;
        for (char *p = piece; *p; p++)
            if ((unsigned char)*p < 0x20) *p = '~';
        fprintf(stderr, " %d'%s'", (int)ids[i], piece);
    }
    fputc('\n', stderr);
}

static sjkh_tokenizer *load_model_tokenizer(const char *file, sjkh_gguf **gout)
{
    char err[256] = "";
    sjkh_gguf *g = NULL;
    if (sjkh_gguf_open(test_model_path(file), &g, err, sizeof err) != SJK_OK) return NULL;
    sjkh_tokenizer *t = NULL;
    sjk_status st = sjkh_tokenizer_from_gguf(g, &t, err, sizeof err);
    if (st != SJK_OK) {
        fprintf(stderr, "  tokenizer_from_gguf(%s): %s\n", file, err);
        sjkh_gguf_close(g);
        return NULL;
    }
    if (gout) *gout = g;
    else sjkh_gguf_close(g);
    return t;
}

/* ---- golden corpus ------------------------------------------------------------------ */

/* Runs every "doc NAME MODE N" record of a golden file against our tokenizer. */
static void check_golden(const char *model_file, const char *golden)
{
    FILE *probe = fopen(test_model_path(model_file), "rb");
    if (!probe) SKIP("%s missing (run scripts/fetch-model)", test_model_path(model_file));
    fclose(probe);
    sjkh_tokenizer *t = load_model_tokenizer(model_file, NULL);
    CHECK(t != NULL);
    if (!t) return;
    size_t gn;
    char *g = test_read_file(test_data_path(golden), &gn);
    CHECKF(g != NULL, "cannot read %s", test_data_path(golden));
    if (!g) {
        sjkh_tokenizer_free(t);
        return;
    }
    size_t n_docs = 0, n_bad = 0, n_tokens = 0, n_bytes = 0;
    char *line = g, *next;
    for (; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (strncmp(line, "doc ", 4) != 0) continue;
        char name[256], mode[32];
        size_t n_want;
        if (sscanf(line, "doc %255s %31s %zu", name, mode, &n_want) != 3 || !next) {
            CHECKF(0, "bad golden line '%s'", line);
            break;
        }
        char *ids_line = next;
        next = strchr(ids_line, '\n');
        if (next) *next++ = 0;
        int32_t *want = malloc((n_want + 1) * sizeof *want);
        char *p = ids_line;
        for (size_t i = 0; i < n_want; i++) want[i] = (int32_t)strtol(p, &p, 10);

        char path[512];
        snprintf(path, sizeof path, "golden/corpus/%s", name);
        size_t tn;
        char *text = test_read_file(test_data_path(path), &tn);
        CHECKF(text != NULL, "cannot read %s", test_data_path(path));
        if (!text) {
            free(want);
            continue;
        }
        unsigned flags = SJKH_TOKENIZE_ADD_SPECIAL;
        if (strcmp(mode, "special") == 0) flags |= SJKH_TOKENIZE_PARSE_SPECIAL;
        size_t n_got = 0;
        int32_t *got = encode(t, text, tn, flags, &n_got);
        CHECKF(got != NULL, "encode failed on %s", name);
        n_docs++;
        n_tokens += n_want;
        n_bytes += tn;
        if (got) {
            size_t i = 0;
            while (i < n_got && i < n_want && got[i] == want[i]) i++;
            if (i < n_got || i < n_want) {
                n_bad++;
                CHECKF(0, "%s %s [%s]: %zu ids vs llama.cpp's %zu, first difference at %zu",
                       model_file, name, mode, n_got, n_want, i);
                size_t from = i > 4 ? i - 4 : 0;
                print_ids("llama.cpp", t, want, n_want, from, i + 6);
                print_ids("ours     ", t, got, n_got, from, i + 6);
            }
        }
        free(got);
        free(want);
        free(text);
    }
    printf("  %s: %zu documents, %zu bytes, %zu tokens; %zu differ from llama.cpp\n",
           model_file, n_docs, n_bytes, n_tokens, n_bad);
    CHECK(n_docs >= 2);
    free(g);
    sjkh_tokenizer_free(t);
}

TEST(test_gemma_matches_llama_cpp_on_corpus)
{
    check_golden("gemma-3-270m-q4_k_m.gguf", "golden/tok-gemma3-270m.txt");
}

TEST(test_smollm2_matches_llama_cpp_on_corpus)
{
    check_golden("SmolLM2-135M-Instruct.Q4_1.gguf", "golden/tok-smollm2-135m.txt");
}

TEST(test_qwen2_5_0_5b_matches_llama_cpp_on_corpus)
{
    check_golden("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "golden/tok-qwen2.5-0.5b.txt");
}

TEST(test_qwen2_5_1_5b_matches_llama_cpp_on_corpus)
{
    check_golden("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "golden/tok-qwen2.5-1.5b.txt");
}

/* ---- real-model vectors -------------------------------------------------------------- */

static int ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

TEST(test_gemma_chat_template_and_bos)
{
    sjkh_tokenizer *t = load_model_tokenizer("gemma-3-270m-q4_k_m.gguf", NULL);
    if (!t) SKIP("%s missing (run scripts/fetch-model)", test_model_path("gemma-3-270m-q4_k_m.gguf"));
    CHECK(sjkh_tokenizer_kind_of(t) == SJKH_TOKENIZER_SPM);
    CHECK(sjkh_tokenizer_bos(t) == 2 && sjkh_tokenizer_eos(t) == 1 && sjkh_tokenizer_add_bos(t));
    CHECK(sjkh_tokenizer_is_eog(t, 1) && sjkh_tokenizer_is_eog(t, 106) && !sjkh_tokenizer_is_eog(t, 2));
    CHECK(sjkh_tokenizer_chat_style(t) == SJKH_CHAT_GEMMA);
    sjkh_chat_message msgs[] = {{"user", "Test"}};
    char text[256];
    size_t n = 0;
    CHECK(sjkh_tokenizer_chat_render(t, msgs, 1, 1, text, sizeof text, &n) == SJK_OK);
    CHECK(strcmp(text, "<start_of_turn>user\nTest<end_of_turn>\n<start_of_turn>model\n") == 0);
    /* docs/BACKGROUND.md, "Engine facts" (from a llama.cpp --verbose-prompt log). */
    static const int32_t want[] = {2, 105, 2364, 107, 3694, 106, 107, 105, 4368, 107};
    size_t n_ids;
    int32_t *ids = encode(t, text, n, SJKH_TOKENIZE_ADD_SPECIAL | SJKH_TOKENIZE_PARSE_SPECIAL, &n_ids);
    CHECK(ids && ids_equal(ids, n_ids, want, 10));
    /* Decoding with specials renders the markers; without, only the text. */
    char back[256];
    size_t bn;
    CHECK(sjkh_tokenizer_decode(t, ids, n_ids, SJKH_DETOK_SPECIAL, back, sizeof back, &bn) == SJK_OK);
    CHECK(strcmp(back, "<bos><start_of_turn>user\nTest<end_of_turn>\n<start_of_turn>model\n") == 0);
    CHECK(sjkh_tokenizer_decode(t, ids, n_ids, 0, back, sizeof back, &bn) == SJK_OK);
    CHECK(strcmp(back, "user\nTest\nmodel\n") == 0);
    /* A system message joins the first user turn. */
    sjkh_chat_message sys[] = {{"system", " Be brief. "}, {"user", "Hi"}, {"assistant", "Hello"}};
    CHECK(sjkh_tokenizer_chat_render(t, sys, 3, 0, text, sizeof text, &n) == SJK_OK);
    CHECK(strcmp(text, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                       "<start_of_turn>model\nHello<end_of_turn>\n") == 0);
    /* Several system messages concatenate; they wait for the next user turn. */
    sjkh_chat_message sys2[] = {{"user", "a"}, {"system", "X"}, {"assistant", "b"}, {"system", " Y"},
                                {"user", "c"}, {"system", "  "}, {"user", "d"}};
    CHECK(sjkh_tokenizer_chat_render(t, sys2, 7, 0, text, sizeof text, &n) == SJK_OK);
    CHECK(strcmp(text, "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
                       "<start_of_turn>user\nXY\n\nc<end_of_turn>\n<start_of_turn>user\nd<end_of_turn>\n") == 0);
    free(ids);
    sjkh_tokenizer_free(t);
}

TEST(test_smollm2_vectors_and_chat_template)
{
    sjkh_tokenizer *t = load_model_tokenizer("SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
    if (!t) SKIP("%s missing (run scripts/fetch-model)", test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    CHECK(sjkh_tokenizer_kind_of(t) == SJKH_TOKENIZER_BPE);
    CHECK(!sjkh_tokenizer_add_bos(t));
    CHECK(sjkh_tokenizer_is_eog(t, 2) && sjkh_tokenizer_is_eog(t, 0) && !sjkh_tokenizer_is_eog(t, 1));
    /* docs/BACKGROUND.md, "Engine facts": third-party vectors, confirmed against llama.cpp. */
    static const struct {
        const char *text;
        int32_t ids[16];
        size_t n;
    } v[] = {
        {"Hello, we can use", {19556, 28, 392, 416, 722}, 5},
        {"Hello world! 123", {19556, 905, 17, 216, 33, 34, 35}, 7},
        {"Caf\xc3\xa9 d\xc3\xa9j\xc3\xa0 vu.", {51, 1939, 2756, 32564, 90, 16739, 386, 101, 30}, 9},
        {"  multiple   spaces", {216, 2701, 256, 5600}, 4},
        {"\n", {198}, 1},
    };
    for (size_t i = 0; i < SJKH_ARRAY_LEN_T(v); i++) {
        size_t n_ids;
        int32_t *ids = encode(t, v[i].text, strlen(v[i].text), SJKH_TOKENIZE_ADD_SPECIAL, &n_ids);
        CHECKF(ids && ids_equal(ids, n_ids, v[i].ids, v[i].n), "vector %zu", i);
        char back[128];
        size_t bn;
        CHECK(ids && sjkh_tokenizer_decode(t, ids, n_ids, 0, back, sizeof back, &bn) == SJK_OK &&
              strcmp(back, v[i].text) == 0);
        free(ids);
    }
    CHECK(sjkh_tokenizer_chat_style(t) == SJKH_CHAT_CHATML);
    sjkh_chat_message msgs[] = {{"user", "What is the capital of France?"}};
    char text[512];
    size_t n = 0;
    CHECK(sjkh_tokenizer_chat_render(t, msgs, 1, 1, text, sizeof text, &n) == SJK_OK);
    CHECK(strcmp(text, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                       "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
                       "<|im_end|>\n<|im_start|>assistant\n") == 0);
    /* An explicit system message replaces the default. */
    sjkh_chat_message sys[] = {{"system", "Be brief."}, {"user", "Hi"}};
    CHECK(sjkh_tokenizer_chat_render(t, sys, 2, 0, text, sizeof text, &n) == SJK_OK);
    CHECK(strcmp(text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n") == 0);
    size_t n_ids;
    int32_t *ids = encode(t, text, n, SJKH_TOKENIZE_ADD_SPECIAL | SJKH_TOKENIZE_PARSE_SPECIAL, &n_ids);
    CHECK(ids && n_ids > 4 && ids[0] == 1 && ids[n_ids - 2] == 2 && ids[n_ids - 1] == 198);
    free(ids);
    /* A too-small buffer reports the size needed. */
    int32_t small[2];
    size_t need = 0;
    CHECK(sjkh_tokenizer_encode(t, "Hello world! 123", 16, 0, small, 2, &need) == SJK_ERR_BUFFER);
    CHECK(need == 7 && small[0] == 19556 && small[1] == 905);
    sjkh_tokenizer_free(t);
}

/* Qwen2's pre-tokenizer and ChatML template (the 0.5B file; the 1.5B has the same
 * vocabulary, merges and template). */
#define QWEN05 "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
TEST(test_qwen2_vectors_and_chat_template)
{
    sjkh_tokenizer *t = load_model_tokenizer(QWEN05, NULL);
    if (!t) SKIP("%s missing (run scripts/fetch-model qwen2.5-0.5b)", test_model_path(QWEN05));
    CHECK(sjkh_tokenizer_kind_of(t) == SJKH_TOKENIZER_BPE);
    CHECK(!sjkh_tokenizer_add_bos(t)); /* tokenizer.ggml.add_bos_token = false */
    /* llama.cpp's vector for the qwen2 pattern: digits one by one, "\n\n" grouped, the
     * space before " x" left alone. */
    static const int32_t want[] = {9707, 1879, 220, 16, 17, 18, 19, 20, 271, 220, 856};
    static const char text[] = "Hello world 12345\n\n  x";
    size_t n_ids;
    int32_t *ids = encode(t, text, sizeof text - 1, SJKH_TOKENIZE_ADD_SPECIAL, &n_ids);
    CHECK(ids && ids_equal(ids, n_ids, want, SJKH_ARRAY_LEN_T(want)));
    if (ids && !ids_equal(ids, n_ids, want, SJKH_ARRAY_LEN_T(want))) print_ids("ours", t, ids, n_ids, 0, n_ids);
    char back[128];
    size_t bn;
    CHECK(ids && sjkh_tokenizer_decode(t, ids, n_ids, 0, back, sizeof back, &bn) == SJK_OK && !strcmp(back, text));
    free(ids);
    /* The template's default system text is inside a Jinja string, with "\n" escaped. */
    CHECK(sjkh_tokenizer_chat_style(t) == SJKH_CHAT_CHATML);
    sjkh_chat_message msgs[] = {{"user", "What is the capital of France?"}};
    char chat[512];
    size_t n = 0;
    CHECK(sjkh_tokenizer_chat_render(t, msgs, 1, 1, chat, sizeof chat, &n) == SJK_OK);
    CHECK(!strcmp(chat, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                        "assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                        "<|im_start|>assistant\n"));
    ids = encode(t, chat, n, SJKH_TOKENIZE_ADD_SPECIAL | SJKH_TOKENIZE_PARSE_SPECIAL, &n_ids);
    /* <|im_start|> ... <|im_start|> "assistant" "\n": specials parsed, no BOS */
    CHECK(ids && n_ids > 4 && ids[0] == 151644 && ids[n_ids - 3] == 151644 && ids[n_ids - 1] == 198);
    free(ids);
    CHECK(sjkh_tokenizer_is_eog(t, 151645) && sjkh_tokenizer_is_eog(t, 151643)); /* <|im_end|>, <|endoftext|> */
    sjkh_tokenizer_free(t);
}

/* Text -> ids -> text is exact for Gemma on valid UTF-8 (byte fallback covers every
 * character). Not on invalid UTF-8 (like llama.cpp, the splitter turns ' ' into "▁" before
 * cutting characters, so a truncated lead byte swallows part of an escaped space), and not
 * on a literal "▁" in the text, which decodes to ' ' as in llama.cpp. */
TEST(test_gemma_roundtrip_random_utf8)
{
    sjkh_tokenizer *t = load_model_tokenizer("gemma-3-270m-q4_k_m.gguf", NULL);
    if (!t) SKIP("%s missing (run scripts/fetch-model)", test_model_path("gemma-3-270m-q4_k_m.gguf"));
    static const uint32_t pool[] = {' ', ' ', '\n', '\t', 'a', 'e', 't', 'Z', '0', '7', '.', '<',
                                    0xE9, 0xDF, 0x3B1, 0x436, 0x5D0, 0x627, 0x915, 0xE01,
                                    0x3042, 0x4E2D, 0xAC00, 0x2580, 0x1F600, 0x1F1F8, 0x10FFFD, 0xFFFD};
    uint64_t s = 0x9E3779B97F4A7C15ull;
    char text[1024], back[2048];
    int bad = 0;
    for (int iter = 0; iter < 300; iter++) {
        size_t n = 0, n_cp = (size_t)(iter % 150) + 1;
        for (size_t i = 0; i < n_cp; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t r = (uint32_t)(s >> 33), cp = r % 3 ? pool[r % SJKH_ARRAY_LEN_T(pool)] : 'a' + (r >> 8) % 26;
            if (cp < 0x80) {
                text[n++] = (char)cp;
            } else if (cp < 0x800) {
                text[n++] = (char)(0xC0 | (cp >> 6));
                text[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                text[n++] = (char)(0xE0 | (cp >> 12));
                text[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                text[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                text[n++] = (char)(0xF0 | (cp >> 18));
                text[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                text[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                text[n++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        size_t n_ids, bn;
        int32_t *ids = encode(t, text, n, 0, &n_ids);
        if (!ids || sjkh_tokenizer_decode(t, ids, n_ids, 0, back, sizeof back, &bn) != SJK_OK ||
            bn != n || memcmp(back, text, n) != 0)
            bad++;
        free(ids);
    }
    CHECKF(bad == 0, "%d of 300 random texts did not round-trip", bad);
    sjkh_tokenizer_free(t);
}

/* ---- tiny hand-made vocabularies (no model file needed) ------------------------------ */

typedef struct tiny_vocab {
    const char *tok[400];
    size_t len[400];
    float score[400];
    int32_t type[400];
    uint32_t n;
} tiny_vocab;

static int32_t tv_add(tiny_vocab *v, const char *s, float score, int32_t type)
{
    v->tok[v->n] = s;
    v->len[v->n] = strlen(s);
    v->score[v->n] = score;
    v->type[v->n] = type;
    return (int32_t)v->n++;
}

static char g_byte_names[256][8];

/* An SPM vocabulary: specials, the 256 byte tokens, then pieces with scores. */
static sjkh_tokenizer *tiny_spm(int add_space_prefix)
{
    static tiny_vocab v;
    memset(&v, 0, sizeof v);
    tv_add(&v, "<unk>", 0, SJKH_TOKEN_UNKNOWN);
    tv_add(&v, "<s>", 0, SJKH_TOKEN_CONTROL);
    tv_add(&v, "</s>", 0, SJKH_TOKEN_CONTROL);
    tv_add(&v, "<|user|>", 0, SJKH_TOKEN_USER_DEFINED);
    for (int b = 0; b < 256; b++) {
        snprintf(g_byte_names[b], sizeof g_byte_names[b], "<0x%02X>", b);
        tv_add(&v, g_byte_names[b], 0, SJKH_TOKEN_BYTE);
    }
    /* 260.. */
    tv_add(&v, "\xE2\x96\x81", -1, SJKH_TOKEN_NORMAL);          /* 260 ▁ */
    tv_add(&v, "a", -2, SJKH_TOKEN_NORMAL);                     /* 261 */
    tv_add(&v, "b", -2, SJKH_TOKEN_NORMAL);                     /* 262 */
    tv_add(&v, "c", -2, SJKH_TOKEN_NORMAL);                     /* 263 */
    tv_add(&v, "ab", -3, SJKH_TOKEN_NORMAL);                    /* 264 */
    tv_add(&v, "bc", -1.5f, SJKH_TOKEN_NORMAL);                 /* 265: beats ab */
    tv_add(&v, "\xE2\x96\x81" "a", -4, SJKH_TOKEN_NORMAL);      /* 266 ▁a */
    tv_add(&v, "abc", -5, SJKH_TOKEN_NORMAL);                   /* 267 */
    tv_add(&v, "aa", -3, SJKH_TOKEN_NORMAL);                    /* 268 */
    sjkh_tokenizer_desc d;
    sjkh_tokenizer_desc_default(&d);
    d.kind = SJKH_TOKENIZER_SPM;
    d.n_tokens = v.n;
    d.tokens = v.tok;
    d.token_nbytes = v.len;
    d.scores = v.score;
    d.types = v.type;
    d.unk_id = 0;
    d.bos_id = 1;
    d.eos_id = 2;
    d.add_bos = 1;
    d.add_space_prefix = add_space_prefix;
    sjkh_tokenizer *t = NULL;
    char err[128];
    if (sjkh_tokenizer_create(&d, &t, err, sizeof err) != SJK_OK) fprintf(stderr, "  %s\n", err);
    return t;
}

#define EXPECT_IDS(t, text, flags, ...)                                                   \
    do {                                                                                  \
        static const int32_t want_[] = {__VA_ARGS__};                                     \
        size_t n_ = 0;                                                                    \
        int32_t *got_ = encode((t), (text), strlen(text), (flags), &n_);                  \
        int ok_ = got_ && ids_equal(got_, n_, want_, sizeof want_ / sizeof want_[0]);     \
        CHECKF(ok_, "encode(\"%s\")", (text));                                            \
        if (!ok_ && got_) print_ids("got", (t), got_, n_, 0, n_);                         \
        free(got_);                                                                       \
    } while (0)

TEST(test_spm_merges_by_score_leftmost_on_ties)
{
    sjkh_tokenizer *t = tiny_spm(0);
    CHECK(t != NULL);
    if (!t) return;
    /* "abc": bc (-1.5) beats ab (-3), then a + bc -> "abc" (-5). */
    EXPECT_IDS(t, "abc", 0, 267);
    EXPECT_IDS(t, "ab", 0, 264);
    /* Ties: "aaa" -> leftmost pair merges first: aa + a. */
    EXPECT_IDS(t, "aaa", 0, 268, 261);
    /* Spaces become ▁; "▁a" is a piece. */
    EXPECT_IDS(t, " a b", 0, 266, 260, 262);
    /* BOS with ADD_SPECIAL. */
    EXPECT_IDS(t, "a", SJKH_TOKENIZE_ADD_SPECIAL, 1, 261);
    /* Byte fallback: 'z' and 'é' (C3 A9) are not pieces. */
    EXPECT_IDS(t, "z\xC3\xA9", 0, 4 + 'z', 4 + 0xC3, 4 + 0xA9);
    /* Empty input: nothing, or just BOS. */
    size_t n = 99;
    int32_t ids[4];
    CHECK(sjkh_tokenizer_encode(t, "", 0, 0, ids, 4, &n) == SJK_OK && n == 0);
    CHECK(sjkh_tokenizer_encode(t, "", 0, SJKH_TOKENIZE_ADD_SPECIAL, ids, 4, &n) == SJK_OK && n == 1 && ids[0] == 1);
    sjkh_tokenizer_free(t);
}

TEST(test_spm_special_partition_user_defined_always)
{
    sjkh_tokenizer *t = tiny_spm(0);
    CHECK(t != NULL);
    if (!t) return;
    /* USER_DEFINED is cut out even without PARSE_SPECIAL; CONTROL only with it. */
    EXPECT_IDS(t, "a<|user|>b", 0, 261, 3, 262);
    EXPECT_IDS(t, "<s>", SJKH_TOKENIZE_PARSE_SPECIAL, 1);
    EXPECT_IDS(t, "a</s><s>", SJKH_TOKENIZE_PARSE_SPECIAL, 261, 2, 1);
    /* Without PARSE_SPECIAL "<s>" is ordinary text (bytes here). */
    EXPECT_IDS(t, "<s>", 0, 4 + '<', 4 + 's', 4 + '>');
    sjkh_tokenizer_free(t);
}

TEST(test_spm_space_prefix_and_decode)
{
    sjkh_tokenizer *t = tiny_spm(1);
    CHECK(t != NULL);
    if (!t) return;
    /* add_space_prefix: a space before the text at the start and after a special token. */
    EXPECT_IDS(t, "a", 0, 266);
    EXPECT_IDS(t, "a<|user|>a", 0, 266, 3, 266);
    size_t n;
    int32_t ids[8];
    CHECK(sjkh_tokenizer_encode(t, "a b", 3, SJKH_TOKENIZE_ADD_SPECIAL, ids, 8, &n) == SJK_OK);
    char out[32];
    size_t on;
    /* The leading space the prefix added is dropped again (BOS renders as nothing). */
    CHECK(sjkh_tokenizer_decode(t, ids + 1, n - 1, 0, out, sizeof out, &on) == SJK_OK && strcmp(out, "a b") == 0);
    /* Byte tokens decode to their byte; CONTROL only with SPECIAL. */
    int32_t b[3] = {1, 4 + 0xC3, 4 + 0xA9};
    CHECK(sjkh_tokenizer_decode(t, b, 3, 0, out, sizeof out, &on) == SJK_OK && strcmp(out, "\xC3\xA9") == 0);
    CHECK(sjkh_tokenizer_decode(t, b, 3, SJKH_DETOK_SPECIAL, out, sizeof out, &on) == SJK_OK &&
          strcmp(out, "<s>\xC3\xA9") == 0);
    /* Too small: the needed size comes back. */
    CHECK(sjkh_tokenizer_decode(t, b, 3, SJKH_DETOK_SPECIAL, out, 2, &on) == SJK_ERR_BUFFER && on == 5);
    CHECK(sjkh_tokenizer_decode(t, (int32_t[]){9999}, 1, 0, out, sizeof out, &on) == SJK_ERR_RANGE);
    sjkh_tokenizer_free(t);
}

/* A byte-level BPE vocabulary: the 256 mapped byte characters plus a few merges. */
static sjkh_tokenizer *tiny_bpe(sjkh_bpe_pre pre)
{
    static tiny_vocab v;
    static char chars[256][4];
    static const char *merges[] = {"a b", "ab c", "\xC4\xA0 a", "1 2", "a \xC4\xA0", "' s"};
    static size_t merge_len[6];
    memset(&v, 0, sizeof v);
    tv_add(&v, "<|endoftext|>", 0, SJKH_TOKEN_CONTROL); /* 0 */
    for (int b = 0; b < 256; b++) {
        /* GPT-2 mapping, written out independently of the library. */
        unsigned cp;
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) cp = (unsigned)b;
        else if (b <= 0x20) cp = 0x100u + (unsigned)b;
        else if (b <= 0xA0) cp = 0x121u + (unsigned)(b - 0x7F);
        else cp = 0x143u;
        if (cp < 0x80) {
            chars[b][0] = (char)cp;
        } else {
            chars[b][0] = (char)(0xC0 | (cp >> 6));
            chars[b][1] = (char)(0x80 | (cp & 0x3F));
        }
        tv_add(&v, chars[b], 0, SJKH_TOKEN_NORMAL); /* 1 + b */
    }
    tv_add(&v, "ab", 0, SJKH_TOKEN_NORMAL);          /* 257 */
    tv_add(&v, "abc", 0, SJKH_TOKEN_NORMAL);         /* 258 */
    tv_add(&v, "\xC4\xA0" "a", 0, SJKH_TOKEN_NORMAL); /* 259 Ġa */
    tv_add(&v, "12", 0, SJKH_TOKEN_NORMAL);          /* 260 */
    tv_add(&v, "a\xC4\xA0", 0, SJKH_TOKEN_NORMAL);   /* 261 aĠ */
    tv_add(&v, "'s", 0, SJKH_TOKEN_NORMAL);          /* 262 */
    for (int i = 0; i < 6; i++) merge_len[i] = strlen(merges[i]);
    sjkh_tokenizer_desc d;
    sjkh_tokenizer_desc_default(&d);
    d.kind = SJKH_TOKENIZER_BPE;
    d.pre = pre;
    d.n_tokens = v.n;
    d.tokens = v.tok;
    d.token_nbytes = v.len;
    d.types = v.type;
    d.n_merges = 6;
    d.merges = merges;
    d.merge_nbytes = merge_len;
    d.unk_id = 0;
    d.eos_id = 0;
    sjkh_tokenizer *t = NULL;
    char err[128];
    if (sjkh_tokenizer_create(&d, &t, err, sizeof err) != SJK_OK) fprintf(stderr, "  %s\n", err);
    return t;
}

TEST(test_bpe_pretokenizer_word_boundaries)
{
    sjkh_tokenizer *t = tiny_bpe(SJKH_BPE_PRE_SMOLLM);
    CHECK(t != NULL);
    if (!t) return;
    const int32_t sp = 1 + ' ';
    EXPECT_IDS(t, "abc", 0, 258);
    /* " a" is one word (optional space + letters): Ġa merges; "a " never does, because a
     * word never ends in the space that starts the next one. */
    EXPECT_IDS(t, "a a", 0, 1 + 'a', 259);
    /* Lone trailing space stays its own word; two spaces before a word: first alone. */
    EXPECT_IDS(t, "a ", 0, 1 + 'a', sp);
    EXPECT_IDS(t, "a  a", 0, 1 + 'a', sp, 259);
    /* smollm splits every digit: "12" cannot merge. */
    EXPECT_IDS(t, "12", 0, 1 + '1', 1 + '2');
    /* Contractions: "'s" is one word (lower case only). */
    EXPECT_IDS(t, "a's", 0, 1 + 'a', 262);
    EXPECT_IDS(t, "a'S", 0, 1 + 'a', 1 + '\'', 1 + 'S');
    /* Letters are \p{L}: "é" (C3 A9) joins the word "abé". */
    EXPECT_IDS(t, "ab\xC3\xA9", 0, 257, 1 + 0xC3, 1 + 0xA9);
    /* Non-ASCII space (U+3000) is whitespace: "a　a" -> a, [E3 80 80], a. */
    EXPECT_IDS(t, "a\xE3\x80\x80" "a", 0, 1 + 'a', 1 + 0xE3, 1 + 0x80, 1 + 0x80, 1 + 'a');
    /* CONTROL text is plain text without PARSE_SPECIAL; an id with it; no BOS ever. */
    EXPECT_IDS(t, "<|endoftext|>", SJKH_TOKENIZE_PARSE_SPECIAL | SJKH_TOKENIZE_ADD_SPECIAL, 0);
    sjkh_tokenizer_free(t);

    t = tiny_bpe(SJKH_BPE_PRE_GPT2);
    CHECK(t != NULL);
    if (!t) return;
    EXPECT_IDS(t, "12", 0, 260); /* gpt-2 keeps digit runs together */
    sjkh_tokenizer_free(t);
}

TEST(test_bpe_decode_undoes_byte_mapping)
{
    sjkh_tokenizer *t = tiny_bpe(SJKH_BPE_PRE_SMOLLM);
    CHECK(t != NULL);
    if (!t) return;
    const char *text = "a b\n\tz\x01\x7f \xC3\xA9";
    size_t n;
    int32_t *ids = encode(t, text, strlen(text), 0, &n);
    char out[64];
    size_t on;
    CHECK(ids && sjkh_tokenizer_decode(t, ids, n, 0, out, sizeof out, &on) == SJK_OK &&
          on == strlen(text) && memcmp(out, text, on) == 0);
    free(ids);
    /* Invalid UTF-8 becomes U+FFFD (EF BF BD) before the byte mapping, as in llama.cpp. */
    ids = encode(t, "\xff", 1, 0, &n);
    CHECK(ids && n == 3 && ids[0] == 1 + 0xEF && ids[1] == 1 + 0xBF && ids[2] == 1 + 0xBD);
    free(ids);
    sjkh_tokenizer_free(t);
}

TEST(test_tokenizer_create_rejects_bad_descriptions)
{
    sjkh_tokenizer_desc d;
    sjkh_tokenizer *t = (sjkh_tokenizer *)1;
    char err[128] = "";
    sjkh_tokenizer_desc_default(&d);
    CHECK(sjkh_tokenizer_create(&d, &t, err, sizeof err) == SJK_ERR_PARAM && t == NULL);
    const char *toks[] = {"a", "b"};
    size_t lens[] = {1, 1};
    d.n_tokens = 2;
    d.tokens = toks;
    d.token_nbytes = lens;
    d.bos_id = 2;
    CHECK(sjkh_tokenizer_create(&d, &t, err, sizeof err) == SJK_ERR_PARAM && strstr(err, "bos_id"));
    d.bos_id = -1;
    d.kind = SJKH_TOKENIZER_BPE; /* no merges */
    CHECK(sjkh_tokenizer_create(&d, &t, err, sizeof err) == SJK_ERR_PARAM);
    d.kind = SJKH_TOKENIZER_SPM;
    CHECK(sjkh_tokenizer_create(&d, &t, err, sizeof err) == SJK_OK && t);
    /* No byte tokens: a character outside the vocabulary cannot be encoded. */
    int32_t ids[4];
    size_t n;
    CHECK(sjkh_tokenizer_encode(t, "z", 1, 0, ids, 4, &n) == SJK_ERR_UNSUPPORTED);
    CHECK(sjkh_tokenizer_encode(t, "ab", 2, 0, ids, 4, &n) == SJK_OK && n == 2);
    CHECK(sjkh_tokenizer_chat_render(t, NULL, 0, 1, (char *)ids, sizeof ids, &n) == SJK_ERR_UNSUPPORTED);
    sjkh_tokenizer_free(t);
}


/* ---- GGUF metadata the tokenizer reads ------------------------------------------------ */

typedef struct gbuf {
    uint8_t b[4096];
    size_t n;
} gbuf;

static void g_put(gbuf *g, const void *p, size_t n)
{
    memcpy(g->b + g->n, p, n);
    g->n += n;
}
static void g_u32(gbuf *g, uint32_t v) { g_put(g, &v, 4); }
static void g_u64(gbuf *g, uint64_t v) { g_put(g, &v, 8); }
static void g_str(gbuf *g, const char *s)
{
    g_u64(g, strlen(s));
    g_put(g, s, strlen(s));
}
static void g_kv_str(gbuf *g, const char *k, const char *v)
{
    g_str(g, k);
    g_u32(g, 8);
    g_str(g, v);
}
static void g_kv_u32(gbuf *g, const char *k, uint32_t v)
{
    g_str(g, k);
    g_u32(g, 4);
    g_u32(g, v);
}
static void g_kv_strs(gbuf *g, const char *k, const char *const *v, size_t n)
{
    g_str(g, k);
    g_u32(g, 9);
    g_u32(g, 8);
    g_u64(g, n);
    for (size_t i = 0; i < n; i++) g_str(g, v[i]);
}

/* A GGUF with only tokenizer metadata: model, pre (or NULL), 5 tokens, one merge, a bos
 * id. */
static sjk_status tokenizer_from_meta(const char *model, const char *pre, uint32_t bos, char *err,
                                      size_t err_cap, sjkh_tokenizer **t)
{
    static const char *const toks[] = {"<s>", "a", "b", "ab", "\xE2\x96\x81"};
    static const char *const merges[] = {"a b"};
    gbuf g = {{0}, 0};
    g_put(&g, "GGUF", 4);
    g_u32(&g, 3);
    g_u64(&g, 0);
    g_u64(&g, pre ? 5 : 4);
    g_kv_str(&g, "tokenizer.ggml.model", model);
    if (pre) g_kv_str(&g, "tokenizer.ggml.pre", pre);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 5);
    g_kv_strs(&g, "tokenizer.ggml.merges", merges, 1);
    g_kv_u32(&g, "tokenizer.ggml.bos_token_id", bos);
    sjkh_gguf *gg = NULL;
    *t = NULL;
    sjk_status st = sjkh_gguf_open_memory(g.b, g.n, &gg, err, err_cap);
    if (st != SJK_OK) return st;
    st = sjkh_tokenizer_from_gguf(gg, t, err, err_cap);
    sjkh_gguf_close(gg);
    return st;
}

TEST(test_tokenizer_from_gguf_rejects_unknown_metadata)
{
    char err[256] = "";
    sjkh_tokenizer *t = NULL;
    CHECK(tokenizer_from_meta("llama", NULL, 0, err, sizeof err, &t) == SJK_OK && t);
    /* SPM defaults: BOS and a space prefix; the tokenizer outlives the GGUF handle. */
    EXPECT_IDS(t, "ab", SJKH_TOKENIZE_ADD_SPECIAL, 0, 4, 3);
    sjkh_tokenizer_free(t);
    CHECK(tokenizer_from_meta("gpt2", "smollm", 0, err, sizeof err, &t) == SJK_OK && t);
    EXPECT_IDS(t, "ab", SJKH_TOKENIZE_ADD_SPECIAL, 3);
    sjkh_tokenizer_free(t);
    CHECK(tokenizer_from_meta("gpt2", "qwen2", 0, err, sizeof err, &t) == SJK_OK && t);
    sjkh_tokenizer_free(t);
    CHECK(tokenizer_from_meta("gpt2", "deepseek-r1-qwen", 0, err, sizeof err, &t) == SJK_OK && t);
    sjkh_tokenizer_free(t);
    /* an unknown pre-tokenizer names the key and the value */
    CHECK(tokenizer_from_meta("gpt2", "llama-bpe", 0, err, sizeof err, &t) == SJK_ERR_UNSUPPORTED &&
          strstr(err, "llama-bpe") && strstr(err, "tokenizer.ggml.pre") && !t);
    CHECK(tokenizer_from_meta("gpt2", NULL, 0, err, sizeof err, &t) == SJK_ERR_UNSUPPORTED && !t);
    CHECK(tokenizer_from_meta("t5", NULL, 0, err, sizeof err, &t) == SJK_ERR_UNSUPPORTED && strstr(err, "t5"));
    CHECK(tokenizer_from_meta("llama", NULL, 5, err, sizeof err, &t) == SJK_ERR_FORMAT &&
          strstr(err, "bos_token_id") && !t);
}

int main(void)
{
    RUN(test_spm_merges_by_score_leftmost_on_ties);
    RUN(test_spm_special_partition_user_defined_always);
    RUN(test_spm_space_prefix_and_decode);
    RUN(test_bpe_pretokenizer_word_boundaries);
    RUN(test_bpe_decode_undoes_byte_mapping);
    RUN(test_tokenizer_create_rejects_bad_descriptions);
    RUN(test_tokenizer_from_gguf_rejects_unknown_metadata);
    RUN(test_gemma_chat_template_and_bos);
    RUN(test_smollm2_vectors_and_chat_template);
    RUN(test_qwen2_vectors_and_chat_template);
    RUN(test_gemma_roundtrip_random_utf8);
    RUN(test_gemma_matches_llama_cpp_on_corpus);
    RUN(test_smollm2_matches_llama_cpp_on_corpus);
    RUN(test_qwen2_5_0_5b_matches_llama_cpp_on_corpus);
    if (test_big()) RUN(test_qwen2_5_1_5b_matches_llama_cpp_on_corpus);
    return test_summary();
}
