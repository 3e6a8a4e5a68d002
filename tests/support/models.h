/* models.h — where the tests find the real GGUF models: $SJK_MODEL_DIR/FILE when
 * SJK_MODEL_DIR is set and not empty, else ~/.cache/sjkvarn/models/FILE (where
 * scripts/fetch-model puts them). Only libc: any test may link it. */
#ifndef SJK_TEST_MODELS_H
#define SJK_TEST_MODELS_H

/* Copies the directory (no trailing slash) into dst (dst_cap bytes, truncated). */
void test_model_dir(char *dst, unsigned long dst_cap);
/* The path of FILE in that directory, in a static buffer that the next call of either
 * function overwrites. */
const char *test_model_path(const char *file);
/* The same path if the file is readable, NULL if not (the caller SKIPs). */
const char *test_model_find(const char *file);

#endif
