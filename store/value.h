/* value.h — keys and self-checking values of the prefix store (docs/FORMAT.md
 * "## Prefix-store values", version 1; docs/STORE.md).
 *
 * Key of block i, part P ("g" growing layers, "w" sliding-window layers):
 *
 *   sjkv1:<fingerprint, first 16 bytes, hex>:<P>:<c_i, first 16 bytes, hex>
 *   c_0 = SHA-256(fingerprint || tokens of block 0),  c_i = SHA-256(c_{i-1} || tokens of block i)
 *   (tokens as 128 int32 little-endian)
 *
 * Value:
 *
 *   0    8  magic "SJKSTORE"
 *   8    4  format version (1)
 *   12   4  part (0 growing, 1 window)
 *   16   4  block index i
 *   20   4  tokens per block (128)
 *   24   4  offset-table entries E
 *   28   4  reserved (0)
 *   32   8  payload bytes N
 *   40  32  fingerprint (docs/STORE.md "Fingerprint")
 *   72  32  parent hash c_{i-1} (zeros for block 0)
 *   104 32  chain hash c_i
 *   136 512 the block's token ids, 128 int32
 *   648 24E offset table: per piece {u32 layer, u32 head (0xFFFFFFFF = every head of a
 *           host-held layer), u64 offset into the payload, u64 bytes}
 *   ... N   payload: the pieces back to back (sjkh_session_block_export)
 *   end  4  CRC-32C of every byte before it
 *
 * All integers little-endian. Thread-safe, never allocate. */
#ifndef SJKS_VALUE_H
#define SJKS_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "sjkhost.h"

#define SJKS_VALUE_VERSION 1
#define SJKS_VALUE_HDR_NBYTES 136
#define SJKS_VALUE_TOKENS_NBYTES (4 * SJKH_BLOCK_TOKENS)
#define SJKS_VALUE_ENTRY_NBYTES 24
#define SJKS_KEY_CAP 96
#define SJKS_HASH_NBYTES 32

/* c = H(parent || tokens[0..128)); parent is the fingerprint for block 0. */
void sjks_chain_hash(const uint8_t parent[SJKS_HASH_NBYTES], const int32_t *tokens, uint8_t out[SJKS_HASH_NBYTES]);
/* The key of (fingerprint, part, chain hash) into dst (NUL-terminated); its length. */
size_t sjks_key(char dst[SJKS_KEY_CAP], const uint8_t *fingerprint, int part, const uint8_t *chain);

/* Bytes of a value with n_pieces pieces and payload_nbytes of payload. */
size_t sjks_value_nbytes(size_t n_pieces, size_t payload_nbytes);

typedef struct sjks_value_meta {
    const uint8_t *fingerprint, *parent, *chain; /* 32 bytes each; parent NULL = zeros */
    uint32_t part, block;
    const int32_t *tokens;                       /* [128] */
    const sjkh_block_piece *pieces;
    size_t n_pieces;
} sjks_value_meta;

/* Writes the header, tokens and offset table into dst, whose payload (at
 * dst + sjks_value_payload_offset(n_pieces)) the caller has filled, then the CRC.
 * SJK_ERR_BUFFER if dst_cap < sjks_value_nbytes. */
size_t sjks_value_payload_offset(size_t n_pieces);
sjk_status sjks_value_seal(const sjks_value_meta *m, uint8_t *dst, size_t dst_cap);

/* Checks a fetched value against what the reader expects (every field of m, the exact
 * offset table, the size and the CRC) and gives its payload. SJK_ERR_FORMAT (magic,
 * version), SJK_ERR_CORRUPT (size, CRC, table), SJK_ERR_MISMATCH (fingerprint, part,
 * block, hashes, tokens: another model, configuration or prompt); why names the field. */
sjk_status sjks_value_verify(const sjks_value_meta *m, const uint8_t *src, size_t src_nbytes,
                             const uint8_t **payload, size_t *payload_nbytes, const char **why);

#endif
