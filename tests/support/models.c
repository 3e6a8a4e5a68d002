/* models.c — the test suite's one rule for where a model file lives (models.h). */
#include "models.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void test_model_dir(char *dst, unsigned long dst_cap)
{
    const char *dir = getenv("SJK_MODEL_DIR"), *home = getenv("HOME");
    if (dir && *dir) snprintf(dst, dst_cap, "%s", dir);
    else snprintf(dst, dst_cap, "%s/.cache/sjkvarn/models", home ? home : ".");
}

const char *test_model_path(const char *file)
{
    static char buf[4096];
    char dir[3072];
    test_model_dir(dir, sizeof dir);
    snprintf(buf, sizeof buf, "%s/%s", dir, file);
    return buf;
}

const char *test_model_find(const char *file)
{
    const char *p = test_model_path(file);
    return access(p, R_OK) == 0 ? p : NULL;
}
