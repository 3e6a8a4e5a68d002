/* embed_cache.c — how an inference engine embeds the sjkvarn cache.
 *
 * A toy "model" (2 layers, 8 query heads over 2 KV heads of D = 128) prefills a prompt in
 * chunks and then decodes. Per layer and step the engine appends the layer's post-RoPE
 * K/V rows and calls attend with its post-RoPE queries; the cache rotates, stages, seals
 * and compresses on its own. Build: cc embed_cache.c $(pkg-config --cflags --libs sjkvarn)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sjkvarn.h"

enum { LAYERS = 2, HKV = 2, HQ = 8, D = 128, CHUNK = 64, PROMPT = 700, GEN = 40 };

/* Stand-in for the model's projections + RoPE: deterministic pseudo-random rows. */
static void fake_rows(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) x[i] = sinf(0.37f * (float)(i % 1013) + 1.3f * (float)seed) + 0.1f * (float)(i % 7);
}

int main(void)
{
    sjk_cache_params p = sjk_cache_params_default();
    p.n_layers = LAYERS;
    p.n_kv_heads = HKV;
    p.n_q_heads = HQ;
    p.head_dim = D;
    p.max_pos = PROMPT + GEN;
    p.max_q_rows = CHUNK;
    p.n_threads = 2;
    char err[256];
    /* Any configuration string works here: "f16", "q8_0/q4_0", "sj:3/3t", "kvarn:4/4"... */
    if (sjk_cache_config_parse("sj:4/4:tail_min=256:tail_max=512", 1, &p.layer, err, sizeof err) != SJK_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t need;
    if (sjk_cache_estimate(&p, &need) != SJK_OK) return 1;
    printf("cache needs %.2f MiB\n", (double)need / (1 << 20));
    sjk_cache *cache;
    sjk_status st = sjk_cache_create(&p, &cache);
    if (st != SJK_OK) { fprintf(stderr, "create: %s\n", sjk_status_str(st)); return 1; }

    static float k[CHUNK * HKV * D], v[CHUNK * HKV * D], q[CHUNK * HQ * D], out[CHUNK * HQ * D];
    unsigned pos = 0;
    while (pos < PROMPT + GEN) {
        /* Prefill in chunks of CHUNK rows, then one row per generated token. */
        unsigned n = pos < PROMPT ? (PROMPT - pos < CHUNK ? PROMPT - pos : CHUNK) : 1;
        for (unsigned layer = 0; layer < LAYERS; layer++) {
            fake_rows(k, (size_t)n * HKV * D, pos * 3 + layer);
            fake_rows(v, (size_t)n * HKV * D, pos * 5 + layer);
            fake_rows(q, (size_t)n * HQ * D, pos * 7 + layer);
            if ((st = sjk_cache_append(cache, 0, layer, k, v, n)) != SJK_OK ||
                (st = sjk_cache_attend(cache, 0, layer, q, n, 1.0f / sqrtf(D), out)) != SJK_OK) {
                fprintf(stderr, "step at %u: %s\n", pos, sjk_status_str(st));
                sjk_cache_free(cache);
                return 1;
            }
            /* ... out feeds the layer's output projection ... */
        }
        pos += n;
    }
    sjk_cache_seal_idle(cache, 0); /* e.g. while waiting for the user */
    sjk_cache_memory m;
    sjk_cache_memory_report(cache, &m);
    printf("%u positions: %.2f bits/value occupied, %.2f allocated, out[0] = %.4f\n", pos,
           m.occupied_bits_per_value, m.allocated_bits_per_value, out[0]);
    sjk_cache_free(cache);
    return isfinite(out[0]) ? 0 : 1;
}
