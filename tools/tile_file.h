/* tile_file.h — tile capture files: the K and V tiles a cache coded, as `sjkvarn
 * capture-tiles` writes them and `sjkvarn train-codebook --data tiles:FILE` and `sjkvarn
 * bench balance --tiles FILE` read them (byte layout: docs/FORMAT.md "Tile capture files").
 *
 * A tile is G tokens by D channels, token-major y[t*D + d]; rows = channels for a K tile,
 * tokens for a V tile. Its stage says where it was taken: balanced (what the trellis tile
 * layer is given, src/codec/trellis.h: the column scales divided out) or rotated (what
 * the balancing is given, src/codec/record.h: the record's rows after the rotation). A
 * measurement file, not a cache: nothing in libsjkvarn reads it. */
#ifndef SJK_TILE_FILE_H
#define SJK_TILE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SJK_TILE_FILE_MAGIC "SJKTILE2"    /* written: the stage in byte 9 of each tile header */
#define SJK_TILE_FILE_MAGIC_V1 "SJKTILE1" /* read: every tile balanced */

/* Where a tile was taken (byte 9 of its header). */
typedef enum sjk_tile_stage {
    SJK_TILE_BALANCED = 0, /* balanced, as the trellis tile layer gets it */
    SJK_TILE_ROTATED = 1   /* rotated, as the balancing gets it */
} sjk_tile_stage;

/* Tiles in memory, all of one shape and stage. */
typedef struct sjk_tile_set {
    uint32_t D, G;
    uint8_t stage; /* sjk_tile_stage of every tile */
    size_t n;      /* tiles */
    uint8_t *rows; /* [n] sjk_trellis_rows of each tile (0 = K, 1 = V) */
    float *y;      /* [n][G*D] */
    size_t cap;    /* tiles allocated */
} sjk_tile_set;

/* Appends one tile (copies y); 0 on allocation failure or a shape or stage other than the
 * set's first tile's. */
int sjk_tile_set_add(sjk_tile_set *s, uint32_t D, uint32_t G, unsigned rows, unsigned stage, const float *y);
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
 * list into s (appending); every tile must be of the given stage. Prints "PROG: PATH:
 * why" and returns 0 for a missing file, a bad magic, a truncated tile, a non-finite
 * value, a shape unlike the set's or a tile of the other stage. */
int sjk_tile_set_load(const char *prog, const char *paths, int rows, sjk_tile_stage stage, sjk_tile_set *s);

#endif
