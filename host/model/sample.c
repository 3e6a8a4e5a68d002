/* sample.c — token sampling: greedy, or temperature + top-k + top-p with a seeded
 * xorshift PRNG. The candidate buffer is sized at create; sampling never allocates. */
#include <math.h>
#include <stdlib.h>

#include "hcommon.h"
#include "sjkhost.h"

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct sjkh_sampler {
    sjkh_sampler_params p;
    uint32_t n_vocab;
    uint64_t state;
    cand *c; /* [n_vocab] */
};

sjkh_sampler_params sjkh_sampler_params_default(void)
{
    sjkh_sampler_params p = {0.8f, 40, 0.95f, 0};
    return p;
}

sjk_status sjkh_sampler_create(const sjkh_sampler_params *p, uint32_t n_vocab, sjkh_sampler **out)
{
    *out = NULL;
    if (!p || !n_vocab || !(p->temp == p->temp) || !(p->top_p == p->top_p)) return SJK_ERR_PARAM;
    sjkh_sampler *s = calloc(1, sizeof *s);
    if (!s) return SJK_ERR_NOMEM;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    if (!s->c) {
        free(s);
        return SJK_ERR_NOMEM;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->state = p->seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (!s->state) s->state = 1;
    *out = s;
    return SJK_OK;
}

void sjkh_sampler_free(sjkh_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s);
}

static double next_unit(sjkh_sampler *s) /* [0, 1) */
{
    uint64_t x = s->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->state = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int32_t sjkh_sampler_sample(sjkh_sampler *s, const float *logits)
{
    uint32_t V = s->n_vocab, best = 0;
    for (uint32_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->p.temp <= 0) return (int32_t)best;

    /* candidates: top_k by partial selection (k small) or all */
    uint32_t k = (s->p.top_k > 0 && (uint32_t)s->p.top_k < V) ? (uint32_t)s->p.top_k : V;
    for (uint32_t i = 0; i < V; i++) s->c[i] = (cand){isnan(logits[i]) ? -INFINITY : logits[i], (int32_t)i};
    if (k < V) {
        /* keep the k largest in c[0..k): simple selection into a sorted prefix */
        uint32_t n = 0;
        for (uint32_t i = 0; i < V; i++) {
            cand x = s->c[i];
            if (n == k && cmp_cand(&x, &s->c[k - 1]) >= 0) continue;
            uint32_t j = n < k ? n++ : k - 1;
            while (j > 0 && cmp_cand(&x, &s->c[j - 1]) < 0) {
                s->c[j] = s->c[j - 1];
                j--;
            }
            s->c[j] = x;
        }
    } else {
        qsort(s->c, V, sizeof *s->c, cmp_cand);
    }
    double mx = s->c[0].logit, sum = 0;
    float inv_t = 1.0f / s->p.temp;
    for (uint32_t i = 0; i < k; i++) {
        double e = exp(((double)s->c[i].logit - mx) * inv_t);
        s->c[i].logit = (float)e;
        sum += e;
    }
    uint32_t n = k;
    if (s->p.top_p < 1.0f) {
        double acc = 0;
        for (uint32_t i = 0; i < k; i++) {
            acc += s->c[i].logit / sum;
            if (acc >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    double tot = 0;
    for (uint32_t i = 0; i < n; i++) tot += s->c[i].logit;
    double r = next_unit(s) * tot, acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += s->c[i].logit;
        if (r < acc) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
