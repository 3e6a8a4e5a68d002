/* record_params.c — defaults and validation of sjk_record_params. */
#include "codec/record_layout.h"
#include "sjkvarn.h"

sjk_record_params sjk_record_params_default(void)
{
    sjk_record_params p;
    p.head_dim = 256;
    p.bits_k = 4;
    p.bits_v = 4;
    p.body = SJK_BODY_SCALAR;
    p.balance = SJK_BALANCE_SJ;
    return p;
}

sjk_status sjk_record_params_validate(const sjk_record_params *p, const char **bad_field)
{
    const char *bad = NULL;
    if (!p) bad = "params";
    else if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256 && p->head_dim != 512)
        bad = "head_dim";
    else if (p->bits_k < 2 || p->bits_k > SJK_RECORD_MAX_BITS) bad = "bits_k";
    else if (p->bits_v < 2 || p->bits_v > SJK_RECORD_MAX_BITS) bad = "bits_v";
    else if (p->body > SJK_BODY_TRELLIS_S128) bad = "body";
    /* a trellis body needs a tile it applies to (tiles above 4 bits are always scalar) */
    else if (p->body != SJK_BODY_SCALAR && p->bits_k > SJK_TRELLIS_MAX_BITS && p->bits_v > SJK_TRELLIS_MAX_BITS)
        bad = "body";
    else if (p->balance > SJK_BALANCE_OFF) bad = "balance";
    if (bad_field) *bad_field = bad;
    return bad ? SJK_ERR_PARAM : SJK_OK;
}
