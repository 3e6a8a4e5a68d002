/* types.c — the ggml tensor-type traits table (block size and bytes per block).
 *
 * Every type a GGUF file may name that this build can size is listed; `compute` marks
 * the weight types the host's kernels implement (host/kernels/quants.c). A code not listed
 * here is rejected by the loader with its number in the message. */
#include "sjkhost.h"

#include "hcommon.h"

static const sjkh_type_info k_types[SJKH_TYPE_COUNT] = {
    [SJKH_TYPE_F32] = {"f32", 1, 4, 1},
    [SJKH_TYPE_F16] = {"f16", 1, 2, 1},
    [SJKH_TYPE_Q4_0] = {"q4_0", 32, 18, 1},
    [SJKH_TYPE_Q4_1] = {"q4_1", 32, 20, 1},
    [SJKH_TYPE_Q5_0] = {"q5_0", 32, 22, 1},
    [SJKH_TYPE_Q5_1] = {"q5_1", 32, 24, 1},
    [SJKH_TYPE_Q8_0] = {"q8_0", 32, 34, 1},
    [SJKH_TYPE_Q8_1] = {"q8_1", 32, 36, 0},
    [SJKH_TYPE_Q2_K] = {"q2_K", 256, 84, 0},
    [SJKH_TYPE_Q3_K] = {"q3_K", 256, 110, 0},
    [SJKH_TYPE_Q4_K] = {"q4_K", 256, 144, 1},
    [SJKH_TYPE_Q5_K] = {"q5_K", 256, 176, 1},
    [SJKH_TYPE_Q6_K] = {"q6_K", 256, 210, 1},
    [SJKH_TYPE_Q8_K] = {"q8_K", 256, 292, 0},
    [SJKH_TYPE_I8] = {"i8", 1, 1, 0},
    [SJKH_TYPE_I16] = {"i16", 1, 2, 0},
    [SJKH_TYPE_I32] = {"i32", 1, 4, 0},
    [SJKH_TYPE_I64] = {"i64", 1, 8, 0},
    [SJKH_TYPE_F64] = {"f64", 1, 8, 0},
    [SJKH_TYPE_BF16] = {"bf16", 1, 2, 1},
};

const sjkh_type_info *sjkh_type_get(uint32_t type)
{
    if (type >= SJKH_TYPE_COUNT || !k_types[type].name) return NULL;
    return &k_types[type];
}
