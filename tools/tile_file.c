/* tile_file.c — reading and writing tile capture files (tile_file.h). */
#include "tile_file.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int sjk_tile_set_add(sjk_tile_set *s, uint32_t D, uint32_t G, unsigned rows, unsigned stage, const float *y)
{
    if (s->n == 0) {
        s->D = D;
        s->G = G;
        s->stage = (uint8_t)stage;
    } else if (s->D != D || s->G != G || s->stage != stage) {
        return 0;
    }
    const size_t m = (size_t)D * G;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint8_t *r = realloc(s->rows, cap);
        if (!r) return 0;
        s->rows = r;
        float *ny = realloc(s->y, cap * m * sizeof *ny);
        if (!ny) return 0;
        s->y = ny;
        s->cap = cap;
    }
    s->rows[s->n] = (uint8_t)rows;
    memcpy(s->y + s->n * m, y, m * sizeof *y);
    s->n++;
    return 1;
}

void sjk_tile_set_free(sjk_tile_set *s)
{
    free(s->rows);
    free(s->y);
    memset(s, 0, sizeof *s);
}

static const sjk_tile_set *g_sort_set; /* qsort has no context argument */

static int tile_cmp(const void *a, const void *b)
{
    const size_t i = *(const size_t *)a, j = *(const size_t *)b, m = (size_t)g_sort_set->D * g_sort_set->G;
    if (g_sort_set->rows[i] != g_sort_set->rows[j]) return g_sort_set->rows[i] < g_sort_set->rows[j] ? -1 : 1;
    int c = memcmp(g_sort_set->y + i * m, g_sort_set->y + j * m, m * sizeof(float));
    return c ? c : (i < j ? -1 : i > j);
}

int sjk_tile_set_sort(sjk_tile_set *s)
{
    if (s->n < 2) return 1;
    const size_t m = (size_t)s->D * s->G;
    size_t *idx = malloc(s->n * sizeof *idx);
    float *y = malloc(s->n * m * sizeof *y);
    uint8_t *rows = malloc(s->n);
    if (!idx || !y || !rows) {
        free(idx);
        free(y);
        free(rows);
        return 0;
    }
    for (size_t i = 0; i < s->n; i++) idx[i] = i;
    g_sort_set = s;
    qsort(idx, s->n, sizeof *idx, tile_cmp);
    g_sort_set = NULL;
    for (size_t i = 0; i < s->n; i++) {
        memcpy(y + i * m, s->y + idx[i] * m, m * sizeof *y);
        rows[i] = s->rows[idx[i]];
    }
    free(s->y);
    free(s->rows);
    free(idx);
    s->y = y;
    s->rows = rows;
    s->cap = s->n;
    return 1;
}

/* Header of each tile: D, G (u32 LE), rows (u8), stage (u8), two zero bytes. */
int sjk_tile_set_write(void *set, FILE *f)
{
    const sjk_tile_set *s = set;
    const size_t m = (size_t)s->D * s->G;
    if (fwrite(SJK_TILE_FILE_MAGIC, 1, 8, f) != 8) return 1;
    for (size_t i = 0; i < s->n; i++) {
        uint8_t h[12] = {0};
        sjk_wr_u32le(h, s->D);
        sjk_wr_u32le(h + 4, s->G);
        h[8] = s->rows[i];
        h[9] = s->stage;
        if (fwrite(h, 1, sizeof h, f) != sizeof h) return 1;
        /* the values as little-endian fp32 (the byte order of every supported host) */
        if (fwrite(s->y + i * m, sizeof(float), m, f) != m) return 1;
    }
    return 0;
}

static const char *stage_name(unsigned stage)
{
    return stage == SJK_TILE_ROTATED ? "rotated tiles, before balancing (capture-tiles --stage rotated)"
                                     : "balanced tiles (capture-tiles --stage balanced)";
}

static int load_one(const char *prog, const char *path, int rows, sjk_tile_stage stage, sjk_tile_set *s)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: cannot open\n", prog, path);
        return 0;
    }
    char magic[8];
    int ok = fread(magic, 1, 8, f) == 8, v1 = ok && !memcmp(magic, SJK_TILE_FILE_MAGIC_V1, 8);
    ok = ok && (v1 || !memcmp(magic, SJK_TILE_FILE_MAGIC, 8));
    if (!ok) fprintf(stderr, "%s: %s: not a tile capture file\n", prog, path);
    float *y = NULL;
    size_t cap = 0;
    for (size_t i = 0; ok; i++) {
        uint8_t h[12];
        size_t got = fread(h, 1, sizeof h, f);
        if (got == 0 && feof(f)) break;
        uint32_t D = sjk_rd_u32le(h), G = sjk_rd_u32le(h + 4);
        const unsigned st = v1 ? SJK_TILE_BALANCED : h[9]; /* format 1 holds balanced tiles only */
        if (got != sizeof h || D < 16 || D > 4096 || G < 16 || G > 4096 || h[8] > 1 || st > SJK_TILE_ROTATED) {
            fprintf(stderr, "%s: %s: tile %zu: bad header\n", prog, path, i);
            ok = 0;
            break;
        }
        if (st != (unsigned)stage) {
            fprintf(stderr, "%s: %s: holds %s; this needs %s\n", prog, path, stage_name(st), stage_name(stage));
            ok = 0;
            break;
        }
        size_t m = (size_t)D * G;
        if (m > cap) {
            float *ny = realloc(y, m * sizeof *ny);
            if (!ny) {
                fprintf(stderr, "%s: out of memory\n", prog);
                ok = 0;
                break;
            }
            y = ny;
            cap = m;
        }
        if (fread(y, sizeof(float), m, f) != m) {
            fprintf(stderr, "%s: %s: tile %zu is truncated\n", prog, path, i);
            ok = 0;
            break;
        }
        for (size_t j = 0; j < m; j++)
            if (!isfinite(y[j])) {
                fprintf(stderr, "%s: %s: tile %zu holds a non-finite value\n", prog, path, i);
                ok = 0;
                break;
            }
        if (!ok) break;
        if (rows >= 0 && h[8] != (unsigned)rows) continue;
        if (!sjk_tile_set_add(s, D, G, h[8], st, y)) {
            fprintf(stderr, "%s: %s: tile %zu is %ux%u, the others %ux%u (or out of memory)\n", prog, path, i, G, D,
                    s->G, s->D);
            ok = 0;
        }
    }
    free(y);
    fclose(f);
    return ok;
}

int sjk_tile_set_load(const char *prog, const char *paths, int rows, sjk_tile_stage stage, sjk_tile_set *s)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", paths) >= (int)sizeof buf) {
        fprintf(stderr, "%s: file list too long\n", prog);
        return 0;
    }
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (!load_one(prog, p, rows, stage, s)) return 0;
    return 1;
}
