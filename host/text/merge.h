/* merge.h — the two merge algorithms tokenizer.c hands raw fragments to: SentencePiece
 * (tokenizer_spm.c) and byte-level BPE (tokenizer_bpe.c), and the GPT-2 byte mapping of
 * the latter. */
#ifndef SJKH_MERGE_H
#define SJKH_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "merge_heap.h"
#include "vocab.h"

/* Tokenize one raw fragment (no special tokens inside), appending to out. */
sjk_status sjkh_spm_encode_fragment(const sjkh_tokenizer *t, const char *text, size_t n,
                                    int prefix_space, sjkh_idvec *out);
sjk_status sjkh_bpe_encode_fragment(const sjkh_tokenizer *t, const char *text, size_t n,
                                    sjkh_idvec *out);

/* The GPT-2 byte <-> code point mapping (bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to
 * themselves; the other 68 to U+0100.. in byte order). */
uint32_t sjkh_bpe_byte_to_cp(uint8_t b);
/* Inverse: the byte, or -1 for a code point outside the mapping. */
int sjkh_bpe_cp_to_byte(uint32_t cp);

#endif
