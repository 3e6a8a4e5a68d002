/* fuzz_gguf.c — libFuzzer target: the GGUF loader (sjkh_gguf_open_memory) and everything
 * that reads a loaded file: every key, array element and tensor, and the tokenizer a GGUF
 * describes (sjkh_tokenizer_from_gguf), which then encodes a short text.
 * Replayed in `make test` by tests/test_fuzz_replay.c (FUZZ_NAME renames the entry). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sjkhost.h"

#ifndef FUZZ_NAME
#define FUZZ_NAME LLVMFuzzerTestOneInput
#endif

int FUZZ_NAME(const uint8_t *data, size_t size);
int FUZZ_NAME(const uint8_t *data, size_t size)
{
    sjkh_gguf *g = NULL;
    char err[256];
    if (sjkh_gguf_open_memory(data, size, &g, err, sizeof err) != SJK_OK) return 0;
    volatile size_t sink = 0;
    int64_t nkv = sjkh_gguf_n_kv(g);
    for (int64_t i = 0; i < nkv; i++) {
        const char *key = sjkh_gguf_key(g, i);
        if (!key) continue;
        sink += strlen(key) + (size_t)sjkh_gguf_kv_type(g, i);
        const char *s;
        size_t len;
        if (sjkh_gguf_get_str(g, key, &s, &len) == SJK_OK && len) sink += (uint8_t)s[len - 1];
        sjkh_gguf_arr a;
        if (sjkh_gguf_get_arr(g, key, &a) == SJK_OK) {
            for (uint64_t j = 0; j < 64; j++) {
                const char *e = sjkh_gguf_arr_str(&a, j, &len);
                if (e && len) sink += (uint8_t)e[0];
            }
        }
    }
    int64_t nt = sjkh_gguf_n_tensors(g);
    for (int64_t i = 0; i < nt; i++) {
        const sjkh_tensor *t = sjkh_gguf_tensor(g, i);
        if (t) sink += (size_t)(uintptr_t)t;
    }
    sjkh_tokenizer *tok = NULL;
    if (sjkh_tokenizer_from_gguf(g, &tok, err, sizeof err) == SJK_OK) {
        int32_t ids[64];
        size_t n = 0;
        static const char text[] = "Hello, world! 123 \xE2\x96\x81 caf\xC3\xA9 <s>";
        if (sjkh_tokenizer_encode(tok, text, sizeof text - 1, SJKH_TOKENIZE_ADD_SPECIAL | SJKH_TOKENIZE_PARSE_SPECIAL,
                                  ids, 64, &n) == SJK_OK) {
            char out[512];
            size_t m;
            sjkh_tokenizer_decode(tok, ids, n, SJKH_DETOK_SPECIAL, out, sizeof out, &m);
        }
        sjkh_tokenizer_free(tok);
    }
    (void)sink;
    sjkh_gguf_close(g);
    return 0;
}
