/* sjkhost.h — the public API of libsjkhost, the CPU inference host (GGUF models, tokenizers,
 * forward passes) that runs real models through libsjkvarn caches. Depends on sjkvarn.h;
 * libsjkvarn never depends on this. */
#ifndef SJKHOST_H
#define SJKHOST_H

#include "sjkvarn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host library's version (same as the codec's). */
const char *sjkh_version(void);

#ifdef __cplusplus
}
#endif
#endif
