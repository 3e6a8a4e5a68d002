/* models.h — the models the commands know by name (one table for run, eval, plan, bench,
 * --kv auto and any later command).
 *
 * A known name ("gemma3-270m") stands for one file that scripts/fetch-model downloads,
 * checks and stores in the model directory, ${SJK_MODEL_DIR:-$HOME/.cache/sjkvarn/models}.
 * Anything else given to -m is a path to a GGUF file. The table is immutable; nothing here
 * allocates. */
#ifndef SJK_MODELS_H
#define SJK_MODELS_H

#include <stddef.h>
#include <stdio.h>

typedef struct sjk_model_entry {
    const char *name;        /* what -m accepts, and scripts/fetch-model's argument */
    const char *file;        /* the file's name in the model directory */
    const char *description; /* one line for --help and errors */
} sjk_model_entry;

/* The known models, in the order help texts list them. */
extern const sjk_model_entry sjk_models[];
extern const size_t sjk_n_models;

/* The entry named name (exact match), or NULL. */
const sjk_model_entry *sjk_model_find(const char *name);
/* The entry whose name or file name equals the base name of name_or_path, or NULL. */
const sjk_model_entry *sjk_model_match(const char *name_or_path);

/* The model directory: $SJK_MODEL_DIR if set and non-empty, else $HOME/.cache/sjkvarn/models.
 * Returns buf. */
const char *sjk_model_dir(char *buf, size_t cap);

/* The known names joined by ", " ("gemma3-270m, smollm2-135m, ..."). Returns buf. */
const char *sjk_model_names(char *buf, size_t cap);

/* Prints the known models for a --help text: a heading line, then one line per model
 * (name, description). */
void sjk_model_usage(FILE *f);

/* Resolves -m: a known name to its file in the model directory, anything else to itself as
 * a path. Returns 1 with path filled when that file exists, or 0 after printing why on
 * stderr, prefixed by prog: a known name whose file is missing (with the fetch command), or
 * a path that does not exist (with the known names). */
int sjk_cli_resolve_model(const char *prog, const char *name, char *path, size_t cap);

/* The model's key (in the quality-floor table, in reports): the known name for a known
 * name or file, else the file's base name without ".gguf". */
void sjk_cli_model_key(const char *name_or_path, char *key, size_t cap);

#endif
