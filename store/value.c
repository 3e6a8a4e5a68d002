/* value.c — prefix-store keys and values (value.h has the layout). */
#include <string.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "sha256.h"
#include "value.h"

_Static_assert(SJKS_VALUE_HDR_NBYTES == 40 + 3 * SJKS_HASH_NBYTES, "prefix-store value header");

void sjks_chain_hash(const uint8_t parent[SJKS_HASH_NBYTES], const int32_t *tokens, uint8_t out[SJKS_HASH_NBYTES])
{
    uint8_t t[SJKS_VALUE_TOKENS_NBYTES];
    for (int i = 0; i < SJKH_BLOCK_TOKENS; i++) sjk_wr_u32le(t + 4 * i, (uint32_t)tokens[i]);
    sjks_sha256 c;
    sjks_sha256_init(&c);
    sjks_sha256_update(&c, parent, SJKS_HASH_NBYTES);
    sjks_sha256_update(&c, t, sizeof t);
    sjks_sha256_final(&c, out);
}

static void hex(char *dst, const uint8_t *src, size_t n)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = d[src[i] >> 4];
        dst[2 * i + 1] = d[src[i] & 15];
    }
}

size_t sjks_key(char dst[SJKS_KEY_CAP], const uint8_t *fingerprint, int part, const uint8_t *chain)
{
    size_t n = 0;
    memcpy(dst, "sjkv1:", 6);
    n = 6;
    hex(dst + n, fingerprint, 16);
    n += 32;
    dst[n++] = ':';
    dst[n++] = part == SJKH_BLOCK_WINDOW ? 'w' : 'g';
    dst[n++] = ':';
    hex(dst + n, chain, 16);
    n += 32;
    dst[n] = 0;
    return n;
}

size_t sjks_value_payload_offset(size_t n_pieces)
{
    return SJKS_VALUE_HDR_NBYTES + SJKS_VALUE_TOKENS_NBYTES + n_pieces * SJKS_VALUE_ENTRY_NBYTES;
}

size_t sjks_value_nbytes(size_t n_pieces, size_t payload_nbytes)
{
    return sjks_value_payload_offset(n_pieces) + payload_nbytes + 4;
}

static size_t payload_of(const sjks_value_meta *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_pieces; i++) n += m->pieces[i].nbytes;
    return n;
}

/* The header, tokens and table as the writer produces them, into dst (payload_offset bytes). */
static void head(const sjks_value_meta *m, uint8_t *dst)
{
    static const uint8_t zeros[SJKS_HASH_NBYTES];
    memset(dst, 0, sjks_value_payload_offset(m->n_pieces));
    memcpy(dst, "SJKSTORE", 8);
    sjk_wr_u32le(dst + 8, SJKS_VALUE_VERSION);
    sjk_wr_u32le(dst + 12, m->part);
    sjk_wr_u32le(dst + 16, m->block);
    sjk_wr_u32le(dst + 20, SJKH_BLOCK_TOKENS);
    sjk_wr_u32le(dst + 24, (uint32_t)m->n_pieces);
    uint64_t pn = payload_of(m);
    sjk_wr_u32le(dst + 32, (uint32_t)pn);
    sjk_wr_u32le(dst + 36, (uint32_t)(pn >> 32));
    memcpy(dst + 40, m->fingerprint, SJKS_HASH_NBYTES);
    memcpy(dst + 72, m->parent ? m->parent : zeros, SJKS_HASH_NBYTES);
    memcpy(dst + 104, m->chain, SJKS_HASH_NBYTES);
    uint8_t *t = dst + SJKS_VALUE_HDR_NBYTES;
    for (int i = 0; i < SJKH_BLOCK_TOKENS; i++) sjk_wr_u32le(t + 4 * i, (uint32_t)m->tokens[i]);
    uint8_t *e = t + SJKS_VALUE_TOKENS_NBYTES;
    uint64_t off = 0;
    for (size_t i = 0; i < m->n_pieces; i++, e += SJKS_VALUE_ENTRY_NBYTES) {
        uint64_t nb = m->pieces[i].nbytes;
        sjk_wr_u32le(e, m->pieces[i].layer);
        sjk_wr_u32le(e + 4, m->pieces[i].head);
        sjk_wr_u32le(e + 8, (uint32_t)off);
        sjk_wr_u32le(e + 12, (uint32_t)(off >> 32));
        sjk_wr_u32le(e + 16, (uint32_t)nb);
        sjk_wr_u32le(e + 20, (uint32_t)(nb >> 32));
        off += nb;
    }
}

sjk_status sjks_value_seal(const sjks_value_meta *m, uint8_t *dst, size_t dst_cap)
{
    size_t po = sjks_value_payload_offset(m->n_pieces), pn = payload_of(m), total = po + pn + 4;
    if (dst_cap < total) return SJK_ERR_BUFFER;
    head(m, dst);
    sjk_wr_u32le(dst + po + pn, sjk_crc32c(0, dst, po + pn));
    return SJK_OK;
}

sjk_status sjks_value_verify(const sjks_value_meta *m, const uint8_t *src, size_t n, const uint8_t **payload,
                             size_t *payload_nbytes, const char **why)
{
#define BAD(code, what) do { if (why) *why = (what); return (code); } while (0)
    size_t po = sjks_value_payload_offset(m->n_pieces), pn = payload_of(m);
    if (n < SJKS_VALUE_HDR_NBYTES || memcmp(src, "SJKSTORE", 8)) BAD(SJK_ERR_FORMAT, "magic");
    if (sjk_rd_u32le(src + 8) != SJKS_VALUE_VERSION) BAD(SJK_ERR_FORMAT, "version");
    if (n != po + pn + 4) BAD(SJK_ERR_CORRUPT, "size");
    if (sjk_crc32c(0, src, n - 4) != sjk_rd_u32le(src + n - 4)) BAD(SJK_ERR_CORRUPT, "CRC-32C");
    if (memcmp(src + 40, m->fingerprint, SJKS_HASH_NBYTES)) BAD(SJK_ERR_MISMATCH, "fingerprint");
    if (sjk_rd_u32le(src + 12) != m->part) BAD(SJK_ERR_MISMATCH, "part");
    if (sjk_rd_u32le(src + 16) != m->block) BAD(SJK_ERR_MISMATCH, "block index");
    if (memcmp(src + 104, m->chain, SJKS_HASH_NBYTES)) BAD(SJK_ERR_MISMATCH, "chain hash");
    static const uint8_t zeros[SJKS_HASH_NBYTES];
    if (memcmp(src + 72, m->parent ? m->parent : zeros, SJKS_HASH_NBYTES)) BAD(SJK_ERR_MISMATCH, "parent hash");
    const uint8_t *t = src + SJKS_VALUE_HDR_NBYTES;
    for (int i = 0; i < SJKH_BLOCK_TOKENS; i++)
        if (sjk_rd_u32le(t + 4 * i) != (uint32_t)m->tokens[i]) BAD(SJK_ERR_MISMATCH, "token ids");
    /* the rest of the header and the table: exactly what this reader would write */
    if (sjk_rd_u32le(src + 20) != SJKH_BLOCK_TOKENS || sjk_rd_u32le(src + 24) != m->n_pieces ||
        sjk_rd_u32le(src + 28) != 0 || sjk_rd_u32le(src + 32) != (uint32_t)pn ||
        sjk_rd_u32le(src + 36) != (uint32_t)((uint64_t)pn >> 32))
        BAD(SJK_ERR_CORRUPT, "header fields");
    const uint8_t *e = t + SJKS_VALUE_TOKENS_NBYTES;
    uint64_t off = 0;
    for (size_t i = 0; i < m->n_pieces; i++, e += SJKS_VALUE_ENTRY_NBYTES) {
        uint64_t nb = m->pieces[i].nbytes;
        if (sjk_rd_u32le(e) != m->pieces[i].layer || sjk_rd_u32le(e + 4) != m->pieces[i].head ||
            (sjk_rd_u32le(e + 8) | (uint64_t)sjk_rd_u32le(e + 12) << 32) != off ||
            (sjk_rd_u32le(e + 16) | (uint64_t)sjk_rd_u32le(e + 20) << 32) != nb)
            BAD(SJK_ERR_CORRUPT, "offset table");
        off += nb;
    }
    *payload = src + po;
    *payload_nbytes = pn;
    return SJK_OK;
#undef BAD
}
