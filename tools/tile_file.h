/* tile_file.h — tile capture files: the balanced K and V tiles a cache coded, as
 * `sjkvarn capture-tiles` writes them and `sjkvarn train-codebook --data tiles:FILE`
 * reads them (byte layout: docs/FORMAT.md "Tile capture files").
 *
 * A tile is what the trellis tile layer is given (src/codec/trellis.h): G tokens by D
 * channels of balanced values, token-major y[t*D + d], the column scales divided out;
 * rows = channels for a K tile, tokens for a V tile. A measurement file, not a cache:
 * nothing in libsjkvarn reads it. */
#ifndef SJK_TILE_FILE_H
#define SJK_TILE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SJK_TILE_FILE_MAGIC "SJKTILE1"

/* Tiles in memory, all of one shape. */
typedef struct sjk_tile_set {
    uint32_t D, G;
    size_t n;      /* tiles */
    uint8_t *rows; /* [n] sjk_trellis_rows of each tile (0 = K, 1 = V) */
    float *y;      /* [n][G*D] */
    size_t cap;    /* tiles allocated */
} sjk_tile_set;

/* Appends one tile (copies y); 0 on allocation failure or a shape other than the set's
 * first tile's. */
int sjk_tile_set_add(sjk_tile_set *s, uint32_t D, uint32_t G, unsigned rows, const float *y);
void sjk_tile_set_free(sjk_tile_set *s);

/* Puts the tiles in a canonical order: K tiles first, then by their bytes. The cache seals
 * records on several threads, so the order in which an observer sees them varies from
 * run to run while the tiles themselves do not; sorted, the same texts give the same file
 * (and training, which samples tiles evenly through a set, the same tables). 0 on
 * allocation failure. */
int sjk_tile_set_sort(sjk_tile_set *s);

/* Writes the whole set (the sjk_cli_out callback shape): 0 on success. */
int sjk_tile_set_write(void *set, FILE *f);

/* Reads the tiles of one kind (rows 0 = K, 1 = V; -1 = both) from each file of a comma
 * list into s (appending). Prints "PROG: PATH: why" and returns 0 for a missing file, a
 * bad magic, a truncated tile, a non-finite value or a shape unlike the set's. */
int sjk_tile_set_load(const char *prog, const char *paths, int rows, sjk_tile_set *s);

#endif
