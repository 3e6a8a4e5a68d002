/* models.c — the table of known models and the -m resolver (tools/models.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models.h"

/* Each file is what scripts/fetch-model stores (it holds the sha256 of each). */
const sjk_model_entry sjk_models[] = {
    {"gemma3-270m", "gemma-3-270m-q4_k_m.gguf", "Gemma 3 270M Q4_K_M (18 layers, 1 KV head, D 256, sliding window)"},
    {"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct Q4_1 (30 layers, 9/3 heads, D 64)"},
    {"qwen2.5-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
     "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (24 layers, 14/2 heads, D 64)"},
    {"qwen2.5-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
     "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (28 layers, 12/2 heads, D 128, 32K context)"},
};
const size_t sjk_n_models = sizeof sjk_models / sizeof sjk_models[0];

const sjk_model_entry *sjk_model_find(const char *name)
{
    for (size_t i = 0; i < sjk_n_models; i++)
        if (!strcmp(name, sjk_models[i].name)) return &sjk_models[i];
    return NULL;
}

const sjk_model_entry *sjk_model_match(const char *name_or_path)
{
    const char *base = strrchr(name_or_path, '/');
    base = base ? base + 1 : name_or_path;
    for (size_t i = 0; i < sjk_n_models; i++)
        if (!strcmp(base, sjk_models[i].name) || !strcmp(base, sjk_models[i].file)) return &sjk_models[i];
    return NULL;
}

const char *sjk_model_dir(char *buf, size_t cap)
{
    const char *dir = getenv("SJK_MODEL_DIR"), *home = getenv("HOME");
    if (dir && *dir) snprintf(buf, cap, "%s", dir);
    else snprintf(buf, cap, "%s/.cache/sjkvarn/models", home && *home ? home : ".");
    return buf;
}

const char *sjk_model_names(char *buf, size_t cap)
{
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; i < sjk_n_models && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", sjk_models[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
    return buf;
}

void sjk_model_usage(FILE *f)
{
    fprintf(f, "\nKnown models (-m NAME; scripts/fetch-model NAME stores them in\n"
               "${SJK_MODEL_DIR:-$HOME/.cache/sjkvarn/models}):\n");
    for (size_t i = 0; i < sjk_n_models; i++) fprintf(f, "  %-14s %s\n", sjk_models[i].name, sjk_models[i].description);
}

int sjk_cli_resolve_model(const char *prog, const char *name, char *path, size_t cap)
{
    struct stat sb;
    const sjk_model_entry *e = sjk_model_find(name);
    if (e) {
        char dir[4096];
        if (snprintf(path, cap, "%s/%s", sjk_model_dir(dir, sizeof dir), e->file) >= (int)cap) {
            fprintf(stderr, "%s: model directory path too long\n", prog);
            return 0;
        }
        if (stat(path, &sb) == 0) return 1;
        fprintf(stderr, "%s: model '%s' is not in the cache (%s); fetch it with\n  scripts/fetch-model %s\n", prog,
                name, path, name);
        return 0;
    }
    if (snprintf(path, cap, "%s", name) >= (int)cap) {
        fprintf(stderr, "%s: -m: path too long\n", prog);
        return 0;
    }
    if (stat(path, &sb) != 0) {
        char names[512];
        fprintf(stderr, "%s: -m %s: no such file, and not a known model name (%s)\n", prog, name,
                sjk_model_names(names, sizeof names));
        return 0;
    }
    return 1;
}

void sjk_cli_model_key(const char *name_or_path, char *key, size_t cap)
{
    const sjk_model_entry *e = sjk_model_match(name_or_path);
    if (e) {
        snprintf(key, cap, "%s", e->name);
        return;
    }
    const char *base = strrchr(name_or_path, '/');
    snprintf(key, cap, "%s", base ? base + 1 : name_or_path);
    size_t n = strlen(key);
    if (n > 5 && !strcmp(key + n - 5, ".gguf")) key[n - 5] = 0;
}
