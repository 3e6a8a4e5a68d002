/* test_attention.c — the attention kernels and the configuration strings.
 *
 * Every SIMD kernel table against the scalar reference on the same chunk (random
 * queries, keys, records, causal visibility), tolerance 1e-5 relative to the state's
 * magnitude; thread counts do not change results beyond summation order; every spelling
 * the README lists parses, and bad strings name their bad part. */
#include <math.h>
#include <stdint.h>

#include "attention/attn_kernels.h"
#include "codec/format.h"
#include "codec/record.h"
#include "codec/trellis.h"
#include "cache/cache_internal.h"
#include "common/fp16.h"
#include "common/rng.h"
#include "harness.h"
#include "sjkvarn.h"

#define MAXD 512
#define G SJK_GROUP

/* The tolerance of a SIMD kernel with int16 softmax weights against its reference: the
 * integer sums are exact, but the weights come from each side's own exp, which may
 * differ in the last bit, and where that moves a weight across a rounding boundary its
 * int16 form moves by one step, 1/32767 of the row's largest weight: a change of the
 * output of up to about that, a few times at worst. 1e-5 plus two steps. */
#define Q16_WEIGHT_TOL (1e-5 + 2.0 / 32767)

typedef struct state { float m[16], l[16], acc[16 * MAXD]; } state;

static void state_init(state *s, size_t R, size_t D, sjk_rng *r)
{
    for (size_t i = 0; i < R; i++) {
        /* half the rows start empty, half with a prior state */
        if (i % 2) { s->m[i] = -INFINITY; s->l[i] = 0; }
        else { s->m[i] = (float)sjk_rng_normal(r); s->l[i] = 1.0f + (float)sjk_rng_uniform(r); }
        for (size_t d = 0; d < D; d++) s->acc[i * D + d] = (i % 2) ? 0.0f : (float)sjk_rng_normal(r);
    }
}

static double state_diff(const state *a, const state *b, size_t R, size_t D)
{
    double e = 0, n = 0;
    for (size_t i = 0; i < R; i++) {
        if (a->m[i] != b->m[i] && !(fabs(a->m[i] - b->m[i]) < 1e-5 * fmax(1, fabs(a->m[i])))) return 1e30;
        e = fmax(e, fabs(a->l[i] - b->l[i]) / fmax(1e-30, fabs(a->l[i])));
        for (size_t d = 0; d < D; d++) {
            e = fmax(e, fabs(a->acc[i * D + d] - b->acc[i * D + d]) / 1.0);
            n = fmax(n, fabs(a->acc[i * D + d]));
        }
    }
    return e / fmax(1.0, n);
}

/* The attention outputs the states stand for (acc / l per row), compared relative to
 * their magnitude: for paths whose scores differ slightly, so that the running maxima
 * m differ too (state_diff requires them equal). */
static double output_diff(const state *a, const state *b, size_t R, size_t D)
{
    double e = 0, n = 0;
    for (size_t i = 0; i < R; i++) {
        if (!(a->l[i] > 0) || !(b->l[i] > 0)) {
            if ((a->l[i] > 0) != (b->l[i] > 0)) return 1e30;
            continue;
        }
        for (size_t d = 0; d < D; d++) {
            const double x = a->acc[i * D + d] / a->l[i], y = b->acc[i * D + d] / b->l[i];
            if (!isfinite(x) || !isfinite(y)) return 1e30;
            e = fmax(e, fabs(x - y));
            n = fmax(n, fabs(x));
        }
    }
    return e / fmax(1e-30, n);
}

static float g_work[SJK_ATTN_WORK_FLOATS(MAXD)];

TEST(test_simd_kernels_match_reference)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    int tested = 0;
    sjk_rng r;
    sjk_rng_seed(&r, 11);
    static float K[G * MAXD], V[G * MAXD], q[16 * MAXD];
    static uint16_t K16[G * MAXD], V16[G * MAXD];
    static uint8_t kc[G * MAXD], vc[G * MAXD], row[MAXD], u1[MAXD], u2[MAXD];
    static uint8_t rows3[3 * (MAXD + 5)], u3[3 * MAXD], u4[3 * MAXD];
    static float sc[3 * MAXD + 3 * G];
    for (int pi = 0; pi < 2; pi++) {
        const sjk_attn_kernels *k = paths[pi];
        if (!k) continue;
        tested++;
        for (size_t D = 64; D <= MAXD; D *= 2)
            for (size_t ri = 0; ri < 6; ri++) {
                /* 1, 2, 3, 5, 6: the row blocks the AVX2 record kernel takes whole; 11 */
                const size_t R = (size_t[]){1, 2, 3, 5, 6, 11}[ri];
                for (size_t i = 0; i < G * D; i++) {
                    K[i] = (float)sjk_rng_normal(&r);
                    V[i] = (float)sjk_rng_normal(&r);
                    K16[i] = sjk_f32_to_fp16(K[i]);
                    V16[i] = sjk_f32_to_fp16(V[i]);
                    kc[i] = (uint8_t)(sjk_rng_u64(&r) % 16);
                    vc[i] = (uint8_t)(sjk_rng_u64(&r) % 16);
                }
                for (size_t i = 0; i < R * D; i++) q[i] = (float)(0.2 * sjk_rng_normal(&r));
                for (size_t i = 0; i < 3 * D + 3 * G; i++) sc[i] = (float)(0.05 + 0.1 * sjk_rng_uniform(&r));
                sjk_attn_rec rc;
                memset(&rc, 0, sizeof rc);
                rc.kc = kc; rc.vc = vc;
                rc.kscale = sc; rc.kzero = sc + D; rc.ktok = sc + 2 * D;
                rc.vch = sc + 2 * D + G; rc.vscale = sc + 3 * D + G; rc.vzero = sc + 3 * D + 2 * G;
                /* the same codes packed as 4-bit payload rows (read in place by the kernels) */
                static uint8_t kp[MAXD * G / 2], vp[G * MAXD / 2];
                for (size_t d = 0; d < D; d++) sjk_payload_pack_row(kp + d * (G / 2), G, 4, kc + d * G);
                for (size_t t = 0; t < G; t++) sjk_payload_pack_row(vp + t * (D / 2), D, 4, vc + t * D);
                sjk_attn_rec rp4 = rc;
                rp4.kc = NULL; rp4.vc = NULL; rp4.kp = kp; rp4.vp = vp;
                uint32_t nvis[16];
                for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(&r) % (G + 1)));
                static state a, b;
                for (int kind = 0; kind < 5; kind++) {
                    sjk_rng s1 = r, s2 = r;
                    state_init(&a, R, D, &s1);
                    state_init(&b, R, D, &s2);
                    if (kind == 0) {
                        ref->chunk_f32(q, R, D, nvis, K, V, G, a.m, a.l, a.acc, g_work);
                        k->chunk_f32(q, R, D, nvis, K, V, G, b.m, b.l, b.acc, g_work);
                    } else if (kind == 1) {
                        ref->chunk_f16(q, R, D, nvis, K16, V16, G, a.m, a.l, a.acc, g_work, NULL, 0);
                        k->chunk_f16(q, R, D, nvis, K16, V16, G, b.m, b.l, b.acc, g_work, (const uint8_t *)K16, G * D * sizeof(uint16_t));
                    } else if (kind == 2) {
                        ref->chunk_rec(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
                        k->chunk_rec(q, R, D, nvis, &rc, b.m, b.l, b.acc, g_work);
                    } else {
                        /* 3: packed K and V against the unpacked reference; 4: mixed */
                        sjk_attn_rec mix = rc;
                        if (kind == 4) { mix.vc = NULL; mix.vp = vp; }
                        ref->chunk_rec(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
                        k->chunk_rec(q, R, D, nvis, kind == 3 ? &rp4 : &mix, b.m, b.l, b.acc, g_work);
                    }
                    double e = state_diff(&a, &b, R, D);
                    CHECKF(e < 1e-5, "%s kind %d D=%zu R=%zu: rel diff %.3g", k->name, kind, D, R, e);
                }
            }
        /* fp16 scale loading: exact */
        {
            uint8_t h[2 * 77];
            float f1[77], f2[77];
            for (int i = 0; i < 77; i++) { uint16_t x = sjk_f32_to_fp16((float)sjk_rng_normal(&r)); memcpy(h + 2 * i, &x, 2); }
            ref->f16_to_f32(f1, h, 77);
            k->f16_to_f32(f2, h, 77);
            CHECK(!memcmp(f1, f2, sizeof f1));
        }
        /* unpack: bit-exact with the reference for every width (5..8: record format v2) */
        for (unsigned bits = 2; bits <= 8; bits++)
            for (size_t n = 64; n <= MAXD; n *= 2) {
                for (size_t i = 0; i < n * bits / 8; i++) row[i] = (uint8_t)sjk_rng_u64(&r);
                ref->unpack_row(u1, row, n, bits);
                k->unpack_row(u2, row, n, bits);
                CHECKF(!memcmp(u1, u2, n), "%s unpack bits=%u n=%zu", k->name, bits, n);
            }
        /* unpack_rows: the same bytes as unpack_row row by row (three rows with a gap
         * between them, the codes of each row after the last's) */
        if (k->unpack_rows)
            for (unsigned bits = 2; bits <= 8; bits++)
                for (size_t n = 64; n <= MAXD; n *= 2) {
                    const size_t rb = n * bits / 8, stride = rb + 5;
                    for (size_t i = 0; i < 3 * stride; i++) rows3[i] = (uint8_t)sjk_rng_u64(&r);
                    for (size_t j = 0; j < 3; j++) ref->unpack_row(u3 + j * n, rows3 + j * stride, n, bits);
                    k->unpack_rows(u4, rows3, stride, 3, n, bits);
                    CHECKF(!memcmp(u3, u4, 3 * n), "%s unpack_rows bits=%u n=%zu", k->name, bits, n);
                }
    }
    if (!tested) SKIP_HW("no SIMD attention kernels on this CPU");
}

/* 4-bit records read in place (chunk_rec with kp / vp) against the reference on the
 * unpacked codes, for every row count the AVX2 table blocks differently (1, 2, 3: one
 * exact block; 4; 5, 6: one block of 6; 7, 9: blocks of 4 and a short last one) and
 * D = 64, 128, 192, 256, in the worst cases for the value sums: codes all 15, all 0,
 * alternating 0 / 15 by channel and token, random; queries of zeros (every weight equal)
 * and of one key whose score dominates (the others weigh ~e^-600 of it). */
TEST(test_rec_nib_rows_extremes)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    static const size_t Rs[] = {1, 2, 3, 4, 5, 6, 7, 9}, Ds[] = {64, 128, 192, 256};
    static uint8_t kc[G * MAXD], vc[G * MAXD], kp[MAXD * G / 2], vp[G * MAXD / 2];
    static float q[16 * MAXD], sc[3 * MAXD + 3 * G];
    static state a, b;
    sjk_rng r;
    sjk_rng_seed(&r, 1717);
    int tested = 0;
    for (int pi = 0; pi < 2; pi++) {
        const sjk_attn_kernels *k = paths[pi];
        if (!k) continue;
        tested++;
        for (size_t di = 0; di < 4; di++)
            for (size_t ri = 0; ri < 8; ri++)
                for (int cv = 0; cv < 4; cv++)
                    for (int qk = 0; qk < 3; qk++) {
                        const size_t D = Ds[di], R = Rs[ri];
                        for (size_t d = 0; d < D; d++)
                            for (size_t t = 0; t < G; t++) {
                                const uint8_t c = cv == 0 ? 15 : cv == 1 ? 0 : cv == 2 ? (uint8_t)((d + t) % 2 * 15)
                                                                                        : (uint8_t)(sjk_rng_u64(&r) % 16);
                                kc[d * G + t] = c;
                                vc[t * D + d] = cv == 3 ? (uint8_t)(sjk_rng_u64(&r) % 16) : c;
                            }
                        for (size_t i = 0; i < 3 * D + 3 * G; i++) sc[i] = (float)(0.05 + 0.1 * sjk_rng_uniform(&r));
                        for (size_t i = 0; i < R * D; i++)
                            q[i] = qk == 0 ? 0.0f : qk == 1 ? (float)(0.2 * sjk_rng_normal(&r))
                                                            : (float)(1.0 + 0.1 * fabs(sjk_rng_normal(&r)));
                        sjk_attn_rec rc;
                        memset(&rc, 0, sizeof rc);
                        rc.kc = kc; rc.vc = vc;
                        rc.kscale = sc; rc.kzero = sc + D; rc.ktok = sc + 2 * D;
                        rc.vch = sc + 2 * D + G; rc.vscale = sc + 3 * D + G; rc.vzero = sc + 3 * D + 2 * G;
                        if (qk == 2) sc[2 * D + 77] = 100.0f; /* key 77's score dominates */
                        for (size_t d = 0; d < D; d++) sjk_payload_pack_row(kp + d * (G / 2), G, 4, kc + d * G);
                        for (size_t t = 0; t < G; t++) sjk_payload_pack_row(vp + t * (D / 2), D, 4, vc + t * D);
                        sjk_attn_rec rp4 = rc;
                        rp4.kc = NULL; rp4.vc = NULL; rp4.kp = kp; rp4.vp = vp;
                        uint32_t nvis[16];
                        for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : 78 + sjk_rng_u64(&r) % (G - 77));
                        if (R > 2) nvis[R - 1] = 0; /* a row that sees nothing of the chunk */
                        for (int packed = 0; packed < 2; packed++) {
                            sjk_rng s1 = r, s2 = r;
                            state_init(&a, R, D, &s1);
                            state_init(&b, R, D, &s2);
                            ref->chunk_rec(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
                            k->chunk_rec(q, R, D, nvis, packed ? &rp4 : &rc, b.m, b.l, b.acc, g_work);
                            const double e = state_diff(&a, &b, R, D);
                            CHECKF(e < 1e-5, "%s D=%zu R=%zu codes %d queries %d packed %d: rel diff %.3g", k->name, D,
                                   R, cv, qk, packed, e);
                        }
                    }
    }
    if (!tested) SKIP_HW("no SIMD attention kernels on this CPU");
}

/* chunk_f32_many (the prefill layout: rows in lanes, scores and values as blocked matrix
 * products) against the scalar reference over many rows: R from 1 to 200 (blocks of
 * SJK_ATTN_MANY_RB and their ragged ends), D = 64 .. 512, chunks shorter than 128 keys, and
 * visibility patterns (all, causal staircases one and four rows per position as GQA
 * prefill makes them, random with empty rows, a single key). Also the reference's own
 * entry, which must be the fp32 reference. */
TEST(test_many_rows_kernel_matches_reference)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[3] = {ref, sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    enum { MR = 200, MRC = MR + 1 }; /* one canary row past the largest R */
    sjk_rng r;
    sjk_rng_seed(&r, 31);
    static float K[G * MAXD], V[G * MAXD], q[MR * MAXD], acc0[MR * MAXD], a1[MR * MAXD], a2[MRC * MAXD];
    static float m0[MR], l0[MR], m1[MR], l1[MR], m2[MRC], l2[MRC];
    static uint32_t nvis[MR];
    int tested = 0;
    for (size_t D = 64; D <= MAXD; D *= 2)
        for (int it = 0; it < 12; it++) {
            size_t R = it < 4 ? (size_t[]){1, 16, 33, 200}[it] : 1 + (size_t)(sjk_rng_u64(&r) % MR);
            size_t n = it % 3 == 2 ? 1 + (size_t)(sjk_rng_u64(&r) % G) : G;
            int pat = it % 5;
            for (size_t i = 0; i < n * D; i++) {
                K[i] = (float)sjk_rng_normal(&r);
                V[i] = (float)sjk_rng_normal(&r);
            }
            /* queries arrive pre-scaled by 1/sqrt(D): scores with a standard deviation of 3 at
             * every D (the range real attention sees), not growing with D */
            for (size_t i = 0; i < R * D; i++) q[i] = (float)(3.0 / sqrt((double)D) * sjk_rng_normal(&r));
            size_t off = (size_t)(sjk_rng_u64(&r) % n);
            for (size_t i = 0; i < R; i++) {
                size_t v;
                if (pat == 0) v = n;
                else if (pat == 1) v = off + i / 4 + 1;        /* staircase, GQA group 4 */
                else if (pat == 2) v = (size_t)(sjk_rng_u64(&r) % (n + 1)); /* empty rows too */
                else if (pat == 3) v = i % 7 == 3 ? 1 : off + i + 1; /* staircase, single keys */
                else v = i < 40 ? 0 : n;                         /* whole row blocks empty */
                nvis[i] = (uint32_t)(v < n ? v : n);
            }
            for (size_t i = 0; i < R; i++) {
                int prior = sjk_rng_u64(&r) % 2;
                m0[i] = prior ? (float)sjk_rng_normal(&r) : -INFINITY;
                l0[i] = prior ? 1.0f + (float)sjk_rng_uniform(&r) : 0.0f;
                for (size_t d = 0; d < D; d++) acc0[i * D + d] = prior ? (float)sjk_rng_normal(&r) : 0.0f;
            }
            memcpy(m1, m0, R * sizeof *m1); memcpy(l1, l0, R * sizeof *l1); memcpy(a1, acc0, R * D * sizeof *a1);
            ref->chunk_f32(q, R, D, nvis, K, V, n, m1, l1, a1, g_work);
            for (int pi = 0; pi < 3; pi++) {
                const sjk_attn_kernels *k = paths[pi];
                if (!k || !k->chunk_f32_many) continue;
                tested += pi > 0;
                memcpy(m2, m0, R * sizeof *m2); memcpy(l2, l0, R * sizeof *l2); memcpy(a2, acc0, R * D * sizeof *a2);
                const float canary = 12345.0f; /* row R must stay untouched */
                m2[R] = l2[R] = canary;
                for (size_t d = 0; d < D; d++) a2[R * D + d] = canary;
                k->chunk_f32_many(q, R, D, nvis, K, V, n, m2, l2, a2, g_work);
                int bad_c = m2[R] != canary || l2[R] != canary;
                for (size_t d = 0; d < D; d++) bad_c |= a2[R * D + d] != canary;
                double e = 0, el = 0, mag = 1;
                int bad_m = 0;
                for (size_t i = 0; i < R; i++) {
                    if (!nvis[i]) { /* untouched, bit for bit */
                        bad_m |= memcmp(&m1[i], &m2[i], sizeof m1[i]) || l1[i] != l2[i] ||
                                 memcmp(a1 + i * D, a2 + i * D, D * sizeof *a1);
                        continue;
                    }
                    bad_m |= !(fabsf(m1[i] - m2[i]) <= 1e-5f * fmaxf(1, fabsf(m1[i])));
                    el = fmax(el, fabs(l1[i] - l2[i]) / fmax(1e-30, fabs(l1[i])));
                    for (size_t d = 0; d < D; d++) {
                        e = fmax(e, fabs(a1[i * D + d] - a2[i * D + d]));
                        mag = fmax(mag, fabs(a1[i * D + d]));
                    }
                }
                CHECKF(!bad_m && !bad_c && el < 1e-5 && e / mag < 1e-5,
                       "%s many D=%zu R=%zu n=%zu pattern %d: m %s, row R %s, l rel diff %.3g, acc rel diff %.3g",
                       pi ? k->name : "ref", D, R, n, pat, bad_m ? "differs" : "ok", bad_c ? "written" : "ok", el, e / mag);
            }
        }
    if (!tested) SKIP_PART_HW("no SIMD table has chunk_f32_many on this CPU; the reference was checked alone");
}

/* n_threads splits positions across threads; the merge must give the same answer up to
 * summation order. The output is a convex combination of value rows, so rounding in a
 * different order moves it by a fraction of the values' magnitude, not of the output's
 * (which averaging over 3000 random rows makes ~30x smaller): the tolerance is relative
 * to max |V|. */
TEST(test_threads_split_positions_same_result)
{
    float out[2][4 * 128];
    double vmax = 0;
    for (int t = 0; t < 2; t++) {
        sjk_cache_params p = sjk_cache_params_default();
        p.head_dim = 128;
        p.n_q_heads = 4;
        p.max_pos = 3000;
        p.max_q_rows = 1;
        p.n_threads = (uint32_t)(1 + 2 * t);
        p.layer.tail_min = 256;
        p.layer.tail_max = 512;
        sjk_cache *c = NULL;
        CHECK(sjk_cache_create(&p, &c) == SJK_OK);
        if (!c) return;
        sjk_rng r;
        sjk_rng_seed(&r, 77);
        static float kv[2 * 3000 * 128];
        for (size_t i = 0; i < 2 * 3000 * 128; i++) kv[i] = (float)sjk_rng_normal(&r);
        for (size_t i = 3000 * 128; i < 2 * 3000 * 128; i++) vmax = fmax(vmax, fabs(kv[i]));
        CHECK(sjk_cache_append(c, 0, 0, kv, kv + 3000 * 128, 3000) == SJK_OK);
        float q[4 * 128];
        for (size_t i = 0; i < 4 * 128; i++) q[i] = (float)sjk_rng_normal(&r);
        CHECK(sjk_cache_attend(c, 0, 0, q, 1, 0.09f, out[t]) == SJK_OK);
        CHECK(sjk_cache_check(c, NULL, 0) == SJK_OK);
        sjk_cache_free(c);
    }
    double e = 0;
    for (int i = 0; i < 4 * 128; i++) e = fmax(e, fabs(out[0][i] - out[1][i]));
    CHECKF(vmax > 0 && e <= 1e-5 * vmax, "1 vs 3 threads: %.3g, max |V| %.3g", e, vmax);
}

/* Position splits per KV head: the units divide evenly among the threads where some
 * count in [ceil(t / h), 2 ceil(t / h)] allows it (3 heads on 2 threads: 2 splits, 3
 * units each), never fewer than ceil(t / h), and 1 on one thread. */
TEST(test_attn_splits_balance_units)
{
    CHECK(sjk_attn_splits(3, 2) == 2);
    CHECK(sjk_attn_splits(1, 2) == 2);
    CHECK(sjk_attn_splits(1, 3) == 3);
    CHECK(sjk_attn_splits(8, 2) == 1);
    CHECK(sjk_attn_splits(4, 8) == 2);
    CHECK(sjk_attn_splits(7, 16) == 4); /* 28 units: 2 rounds of 16 against 1.75 */
    CHECK(sjk_attn_splits(5, 1) == 1);
    CHECK(sjk_attn_splits(0, 4) == 1);
    for (uint32_t h = 1; h <= 12; h++)
        for (uint32_t t = 1; t <= 16; t++) {
            const uint32_t s = sjk_attn_splits(h, t), s0 = (t + h - 1) / h;
            CHECKF(s >= s0 && s <= 2 * s0, "h %u t %u: %u splits", h, t, s);
            /* no worse than s0: ceil(h s / t) / (h s) <= ceil(h s0 / t) / (h s0) */
            const uint64_t a = ((uint64_t)h * s + t - 1) / t, b = ((uint64_t)h * s0 + t - 1) / t;
            CHECKF(a * s0 <= b * s, "h %u t %u: %u splits balance worse than %u", h, t, s, s0);
        }
}

/* More KV heads than threads, split by position too (3 heads on 2 threads: 6 units):
 * the same answer as one thread, to the tolerance of the test above. */
TEST(test_threads_split_heads_and_positions_same_result)
{
    enum { H = 3, D = 64, N = 2000 };
    static float out[2][6 * D];
    double vmax = 0;
    for (int t = 0; t < 2; t++) {
        sjk_cache_params p = sjk_cache_params_default();
        p.head_dim = D;
        p.n_kv_heads = H;
        p.n_q_heads = 2 * H;
        p.max_pos = N;
        p.max_q_rows = 1;
        p.n_threads = (uint32_t)(1 + t);
        p.layer.tail_min = 256;
        p.layer.tail_max = 512;
        sjk_cache *c = NULL;
        CHECK(sjk_cache_create(&p, &c) == SJK_OK);
        if (!c) return;
        CHECK(t == 0 || c->n_splits == 2);
        sjk_rng r;
        sjk_rng_seed(&r, 78);
        static float kv[2 * N * H * D];
        for (size_t i = 0; i < 2 * (size_t)N * H * D; i++) kv[i] = (float)sjk_rng_normal(&r);
        for (size_t i = (size_t)N * H * D; i < 2 * (size_t)N * H * D; i++) vmax = fmax(vmax, fabs(kv[i]));
        CHECK(sjk_cache_append(c, 0, 0, kv, kv + (size_t)N * H * D, N) == SJK_OK);
        float q[6 * D];
        for (size_t i = 0; i < 6 * D; i++) q[i] = (float)sjk_rng_normal(&r);
        CHECK(sjk_cache_attend(c, 0, 0, q, 1, 0.125f, out[t]) == SJK_OK);
        CHECK(sjk_cache_check(c, NULL, 0) == SJK_OK);
        sjk_cache_free(c);
    }
    double e = 0;
    for (int i = 0; i < 6 * D; i++) e = fmax(e, fabs(out[0][i] - out[1][i]));
    CHECKF(vmax > 0 && e <= 1e-5 * vmax, "1 vs 2 threads over 3 heads: %.3g, max |V| %.3g", e, vmax);
}

/* Trellis records read in place (rec.kt / rec.vt): the reference kernel against attention
 * over the explicitly decoded K/V (chunk_f32_ref; FORMAT.md's decode formula), and every
 * table that reads trellis in place against the reference, at 2, 3 and 4 bits, every D,
 * 3, 4 or 9 rows, 6 (a Qwen2.5 head) and 1 or 2, with partial visibility. Payloads are random bytes (any bytes are valid symbols).
 * A last pass gives the record copies of the committed codebooks (the same values at
 * another address): the SIMD readers then take their one-value gathers from the
 * codebook instead of the pair tables (sjk_trellis_pair_table), a path no committed
 * record takes. */
TEST(test_trellis_inplace_matches_decoded)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[3] = {ref, sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    sjk_rng r;
    sjk_rng_seed(&r, 23);
    static float K[G * MAXD], V[G * MAXD], q[16 * MAXD], seq[G];
    static uint8_t kt[MAXD * G / 2 + 8], vt[MAXD * G / 2 + 8];
    static float sc[3 * MAXD + 3 * G];
    static float cbk[SJK_TRELLIS_CB_SIZE(4)], cbv[SJK_TRELLIS_CB_SIZE(4)];
    int tested = 0;
    for (unsigned kb = 2; kb <= 4; kb++)
        for (size_t D = 64; D <= MAXD; D *= 2) {
            unsigned vb = kb == 4 ? 4 : 2 + (unsigned)(D / 64 % 2); /* mixed widths too */
            for (int pass = 0; pass < 4; pass++) {
                /* pass 1: the 6 GQA rows of a Qwen2.5 head; pass 2: 1 or 2 rows (an MHA head);
                 * pass 3: codebook copies, 4 or 6 rows */
                size_t R = pass == 3 ? (D == 128 ? 6 : 4)
                           : pass == 2 ? (D == 64 || D == 256 ? 1 : 2) : pass ? 6 : D == 128 ? 4 : (D == 64 ? 9 : 3);
                for (size_t i = 0; i < D * G * kb / 8; i++) kt[i] = (uint8_t)sjk_rng_u64(&r);
                for (size_t i = 0; i < D * G * vb / 8; i++) vt[i] = (uint8_t)sjk_rng_u64(&r);
                for (size_t i = 0; i < R * D; i++) q[i] = (float)(0.2 * sjk_rng_normal(&r));
                for (size_t i = 0; i < 3 * D + 3 * G; i++) sc[i] = (float)(0.05 + 0.1 * sjk_rng_uniform(&r));
                sjk_attn_rec rc;
                memset(&rc, 0, sizeof rc);
                rc.kscale = sc; rc.kzero = sc + D; rc.ktok = sc + 2 * D;
                rc.vch = sc + 2 * D + G; rc.vscale = sc + 3 * D + G; rc.vzero = sc + 3 * D + 2 * G;
                rc.kt = kt; rc.vt = vt; rc.kbits = kb; rc.vbits = vb;
                rc.kcb = sjk_trellis_codebook(kb);
                rc.vcb = sjk_trellis_codebook(vb);
                CHECK(rc.kcb && rc.vcb);
                if (!rc.kcb || !rc.vcb) return;
                if (pass == 3) {
                    memcpy(cbk, rc.kcb, SJK_TRELLIS_CB_SIZE(kb) * sizeof(float));
                    memcpy(cbv, rc.vcb, SJK_TRELLIS_CB_SIZE(vb) * sizeof(float));
                    rc.kcb = cbk;
                    rc.vcb = cbv;
                }
                /* the oracle: K[t][d], V[t][d] decoded by FORMAT.md's formula */
                for (size_t d = 0; d < D; d++) {
                    const uint8_t *gk = kt + d / 16 * (G * 2 * kb), *gv = vt + d / 16 * (G * 2 * vb);
                    sjk_trellis_decode_seq(seq, 1, rc.kcb, kb, SJK_TRELLIS_TAILBITE, gk, (unsigned)(d % 16), G);
                    for (size_t t = 0; t < G; t++) K[t * D + d] = (seq[t] * rc.kscale[d] + rc.kzero[d]) * rc.ktok[t];
                    sjk_trellis_decode_seq(seq, 1, rc.vcb, vb, SJK_TRELLIS_TAILBITE, gv, (unsigned)(d % 16), G);
                    for (size_t t = 0; t < G; t++) V[t * D + d] = (seq[t] * rc.vscale[t] + rc.vzero[t]) * rc.vch[d];
                }
                uint32_t nvis[16];
                for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(&r) % (G + 1)));
                static state a, b;
                for (int pi = 0; pi < 3; pi++) {
                    const sjk_attn_kernels *k = paths[pi];
                    if (!k || !k->trellis_inplace) continue;
                    tested += pi > 0;
                    sjk_rng s1 = r, s2 = r;
                    state_init(&a, R, D, &s1);
                    state_init(&b, R, D, &s2);
                    if (pi == 0) ref->chunk_f32(q, R, D, nvis, K, V, G, a.m, a.l, a.acc, g_work);
                    else ref->chunk_rec(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
                    k->chunk_rec(q, R, D, nvis, &rc, b.m, b.l, b.acc, g_work);
                    double e = state_diff(&a, &b, R, D);
                    CHECKF(e < 1e-5, "%s trellis %u/%u D=%zu R=%zu: rel diff %.3g", pi ? k->name : "ref vs decoded",
                           kb, vb, D, R, e);
                }
            }
        }
    if (!tested) SKIP_PART_HW("no SIMD table reads trellis in place on this CPU; the reference was checked alone");
}

/* n_blk random tq6_0 blocks each of K and V rows (norms 0.5..1.5; extreme: every code 63,
 * the largest centroid). */
static void tq6_rows_random(uint8_t *kr, uint8_t *vr, size_t n_blk, sjk_rng *r, int extreme)
{
    for (size_t b = 0; b < n_blk; b++)
        for (int which = 0; which < 2; which++) {
            uint8_t *blk = (which ? vr : kr) + b * 98;
            for (int i = 2; i < 98; i++) blk[i] = extreme ? 0xFF : (uint8_t)sjk_rng_u64(r);
            uint16_t h = sjk_f32_to_fp16((float)(0.5 + sjk_rng_uniform(r)));
            memcpy(blk, &h, 2);
        }
}

/* Causal visibility of R rows: row 0 sees the whole chunk, the others a random part. */
static void nvis_random(uint32_t *nvis, size_t R, sjk_rng *r)
{
    for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(r) % (G + 1)));
}

/* The staging ring's tq6_0_stage rows read in place (chunk_tq6): the reference against
 * attention over the decoded rows (chunk_f32_ref), and every SIMD table that has the
 * kernel against the reference. */
TEST(test_tq6_ring_inplace_matches_decoded)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[3] = {ref, sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    sjk_rng r;
    sjk_rng_seed(&r, 29);
    static float K[G * MAXD], V[G * MAXD], q[16 * MAXD];
    static uint8_t kr[G * MAXD / 128 * 98], vr[G * MAXD / 128 * 98];
    int tested = 0;
    for (size_t D = 128; D <= MAXD; D *= 2)
        for (size_t R = 1; R <= 11; R += 5) {
            tq6_rows_random(kr, vr, G * D / 128, &r, 0);
            sjk_decode_tq6_0_stage_ref(K, kr, G * D);
            sjk_decode_tq6_0_stage_ref(V, vr, G * D);
            for (size_t i = 0; i < R * D; i++) q[i] = (float)(0.2 * sjk_rng_normal(&r));
            uint32_t nvis[16];
            for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(&r) % (G + 1)));
            static state a, b;
            for (int pi = 0; pi < 3; pi++) {
                const sjk_attn_kernels *k = paths[pi];
                if (!k || !k->chunk_tq6) continue;
                tested += pi > 0;
                sjk_rng s1 = r, s2 = r;
                state_init(&a, R, D, &s1);
                state_init(&b, R, D, &s2);
                if (pi == 0) ref->chunk_f32(q, R, D, nvis, K, V, G, a.m, a.l, a.acc, g_work);
                else ref->chunk_tq6(q, R, D, nvis, kr, vr, G, a.m, a.l, a.acc, g_work, NULL, 0);
                k->chunk_tq6(q, R, D, nvis, kr, vr, G, b.m, b.l, b.acc, g_work, kr, G * D / 128 * 98);
                double e = state_diff(&a, &b, R, D);
                CHECKF(e < 1e-5, "%s tq6 D=%zu R=%zu: rel diff %.3g", pi ? k->name : "ref vs decoded", D, R, e);
            }
        }
    if (!tested) SKIP_PART_HW("no SIMD table reads tq6_0 rows in place on this CPU; the reference was checked alone");
}

TEST(test_config_strings_parse)
{
    const char *good[] = {"f16", "q8_0", "q4_0", "q8_0/q4_0", "q4_0:rot", "sj", "sj:4/4", "sj:3/3t",
                          "sj:3/2t", "kvarn:4/4", "kvarn:4/4:tail=1024", "sj:3/3t:edge=4/4",
                          "sj:3/2t:edge=4/4:edges=2", "sj:4/4:tail_min=2048:tail_max=4096",
                          "sj:4/4:stage=q8_0", "sj:4/4:stage=f16", "sj:2/2:balance=reference",
                          "sj:4/4:sink=256", "sj:4/4:tail=0", "kvarn:3/2", "sj:3/3tc", "sj:3/3",
                          "sj:3/3s", "sj:2/2", "sj:2/2s", "sj:4/4t", "sj:4/4s", "sj:3/2:edge=4/4t",
                          "kvarn:4/4s", "sj:2/4", "sj:2/4s", "sj:4/4:center=0", "kvarn:4/4:center=1",
                          "sj:8/4", "sj:5/4", "sj:6/4:stage=q8_0", "sj:7/7", "sj:8/8", "sj:8/3t", "sj:3/8t",
                          "sj:8/3s", "sj:8/2tc", "kvarn:8/4", "sj:3/3t:edge=8/4", "sj:8/4:edge=4/4",
                          "sj:4/4tr", "sj:3/2tr:edge=4/4t", "sj:8/3tr", "sj:4/4ts", "sj:3/2ts:edge=4/4t",
                          "sj:4/4ts:tail=1024:stage=q8_0"};
    sjk_layer_config c[6];
    char err[200], str[200];
    for (size_t i = 0; i < SJK_ARRAY_LEN(good); i++) {
        sjk_status st = sjk_cache_config_parse(good[i], 6, c, err, sizeof err);
        CHECKF(st == SJK_OK, "'%s': %s", good[i], err);
        /* canonical string round-trips */
        CHECK(sjk_layer_config_str(&c[2], str, sizeof str) == SJK_OK);
        sjk_layer_config back;
        CHECKF(sjk_cache_config_parse(str, 1, &back, err, sizeof err) == SJK_OK && !memcmp(&back, &c[2], sizeof back),
               "'%s' -> '%s' does not round-trip", good[i], str);
    }
    CHECK(sjk_cache_config_parse("sj:3/3t:edge=4/4", 6, c, err, sizeof err) == SJK_OK);
    CHECK(c[0].bits_k == 4 && c[0].body == SJK_BODY_SCALAR && c[5].bits_k == 4 && c[1].bits_k == 3 &&
          c[1].body == SJK_BODY_TRELLIS_I8 && c[4].body == SJK_BODY_TRELLIS_I8);
    /* Default bodies (docs/DESIGN.md §2.4): trellis at 3/3, 3/2, 2/2; scalar at 4/4; "s" / "t" force. */
    const struct { const char *s; uint8_t body; const char *canon; } bodies[] = {
        {"sj:3/3", SJK_BODY_TRELLIS_I8, "sj:3/3t"}, {"sj:3/2", SJK_BODY_TRELLIS_I8, "sj:3/2t"},
        {"sj:2/2", SJK_BODY_TRELLIS_I8, "sj:2/2t"}, {"sj:4/4", SJK_BODY_SCALAR, "sj:4/4"},
        {"sj", SJK_BODY_SCALAR, "sj:4/4"}, {"sj:3/3s", SJK_BODY_SCALAR, "sj:3/3s"},
        {"sj:4/4t", SJK_BODY_TRELLIS_I8, "sj:4/4t"}, {"sj:4/4s", SJK_BODY_SCALAR, "sj:4/4"},
        {"kvarn:3/2", SJK_BODY_SCALAR, "kvarn:3/2"}, {"sj:3/2tc", SJK_BODY_TRELLIS_CHANNEL, "sj:3/2tc"},
        /* a tile above 4 bits is scalar; the body follows the tiles of 2..4 bits */
        {"sj:8/4", SJK_BODY_SCALAR, "sj:8/4"}, {"sj:8/8", SJK_BODY_SCALAR, "sj:8/8"},
        {"sj:5/4s", SJK_BODY_SCALAR, "sj:5/4"}, {"sj:8/3", SJK_BODY_TRELLIS_I8, "sj:8/3t"},
        {"sj:8/3s", SJK_BODY_SCALAR, "sj:8/3s"}, {"sj:4/6", SJK_BODY_SCALAR, "sj:4/6"},
        {"sj:2/8", SJK_BODY_TRELLIS_I8, "sj:2/8t"}, {"sj:8/4t", SJK_BODY_TRELLIS_I8, "sj:8/4t"},
        /* the trellis with the codebooks trained on real K/V */
        {"sj:4/4tr", SJK_BODY_TRELLIS_REAL_I8, "sj:4/4tr"}, {"sj:3/2tr", SJK_BODY_TRELLIS_REAL_I8, "sj:3/2tr"},
        /* the float codebooks of record formats 1-3 (`t` and `tr` read the int8 grid) */
        {"sj:3/3tf", SJK_BODY_TRELLIS, "sj:3/3tf"}, {"sj:4/4trf", SJK_BODY_TRELLIS_REAL, "sj:4/4trf"},
        /* the trellis on the 128-entry tables (record format 5) */
        {"sj:4/4ts", SJK_BODY_TRELLIS_S128, "sj:4/4ts"}, {"sj:3/2ts", SJK_BODY_TRELLIS_S128, "sj:3/2ts"},
    };
    for (size_t i = 0; i < SJK_ARRAY_LEN(bodies); i++) {
        CHECKF(sjk_cache_config_parse(bodies[i].s, 1, c, err, sizeof err) == SJK_OK, "%s", err);
        CHECKF(c[0].body == bodies[i].body, "'%s': body %u", bodies[i].s, c[0].body);
        CHECK(sjk_layer_config_str(&c[0], str, sizeof str) == SJK_OK);
        CHECKF(!strcmp(str, bodies[i].canon), "'%s' -> '%s', want '%s'", bodies[i].s, str, bodies[i].canon);
    }
    CHECK(sjk_cache_config_parse("sj:3/3:edge=4/4", 3, c, err, sizeof err) == SJK_OK);
    CHECK(c[0].body == SJK_BODY_SCALAR && c[1].body == SJK_BODY_TRELLIS_I8);
    CHECK(sjk_cache_config_parse("sj:4/4:edge=3/2", 3, c, err, sizeof err) == SJK_OK);
    CHECK(c[0].body == SJK_BODY_TRELLIS_I8 && c[1].body == SJK_BODY_SCALAR);
    CHECK(sjk_cache_config_parse("kvarn:4/4:tail=1024", 1, c, err, sizeof err) == SJK_OK);
    CHECK(c[0].kind == SJK_KIND_KVARN && c[0].tail_min == 1024 && c[0].tail_max == 0 &&
          c[0].staging == SJK_FMT_F16 && c[0].balance == SJK_BALANCE_REFERENCE);
    CHECK(sjk_cache_config_parse("kvarn:4/4", 1, c, err, sizeof err) == SJK_OK && c[0].tail_min == 0);
    CHECK(sjk_cache_config_parse("q8_0/q4_0", 1, c, err, sizeof err) == SJK_OK);
    CHECK(c[0].kind == SJK_KIND_UNIFORM && c[0].k_format == SJK_FMT_Q8_0 && c[0].v_format == SJK_FMT_Q4_0);
    CHECK(sjk_cache_config_parse("sj", 1, c, err, sizeof err) == SJK_OK);
    CHECK(c[0].kind == SJK_KIND_SJ && c[0].bits_k == 4 && c[0].tail_min == 4096 && c[0].tail_max == 8192 &&
          c[0].staging == SJK_FMT_TQ6_0_STAGE && c[0].center == 1);
    /* ring centering: on for sj, off for paper-faithful kvarn, either way by option */
    CHECK(sjk_cache_config_parse("kvarn:4/4", 1, c, err, sizeof err) == SJK_OK && c[0].center == 0);
    CHECK(sjk_cache_config_parse("sj:4/4:center=0", 1, c, err, sizeof err) == SJK_OK && c[0].center == 0);
    CHECK(sjk_layer_config_str(&c[0], str, sizeof str) == SJK_OK && !strcmp(str, "sj:4/4:center=0"));

    const struct { const char *s, *part; } bad[] = {
        {"sj:9/4", "'9/4'"}, {"sj:8/8t", "'8/8t'"}, {"q9_0", "'q9_0'"}, {"q8_0/q3_0", "'q3_0'"}, {"sj:4/4:tial=5", "'tial=5'"},
        {"kvarn:3/3t", "scalar bodies only"}, {"sj:4/4:stage=q4_0", "'stage=q4_0'"},
        {"sj:4/4:tail_min=4096:tail_max=4100", "tail_max"}, {"q8_0:tail=5", "'tail=5'"}, {"", "empty"},
        {"sj:4/4:sink=100", "'sink=100'"}, {"sj:4/4:center=2", "'center=2'"}, {"q8_0:center=1", "'center=1'"}, {"sj:4/4:edge=9/9", "'edge=9/9'"},
        {"sj:3/3x", "'3/3x'"}, {"sj:3/3st", "'3/3st'"}, {"kvarn:4/4t", "scalar bodies only"},
        {"kvarn:4/4tr", "scalar bodies only"}, {"sj:8/8tr", "'8/8tr'"}, {"sj:4/4trc", "'4/4trc'"},
    };
    for (size_t i = 0; i < SJK_ARRAY_LEN(bad); i++) {
        sjk_status st = sjk_cache_config_parse(bad[i].s, 3, c, err, sizeof err);
        CHECKF(st == SJK_ERR_PARAM, "'%s' accepted", bad[i].s);
        CHECKF(strstr(err, bad[i].part) != NULL, "'%s': message '%s' does not name %s", bad[i].s, err, bad[i].part);
    }
}

/* ggml block rows read in place (chunk_qblk) against int8 query pieces.
 *
 * 1. The pieces: each query value is rebuilt from scale · (128 hi + lo) within
 *    max|q| / 32512 (+ fp32 rounding), corr8 / bsum are the sums they claim to be, and
 *    w16 holds 128 hi + lo of the channels its order names (every channel once:
 *    sjk_attn_qint_w16_chan is a permutation of 0..D-1 for every D tested).
 * 2. Every SIMD table's chunk_qblk against the reference chunk_qblk: 1e-5, as for every
 *    kernel (the integer parts are exact; only fp32 summation order differs).
 * 3. The int8 path against the fp32 path it replaces (rows decoded to fp32, chunk_f32):
 *    the queries lose bits (each value within max|q| / 32512 of the row's largest), so
 *    this is not 1e-5. The tolerance is relative to the format's own error on the same
 *    data: the int8 path's deviation from the fp32 path must stay below 5 % of the
 *    deviation the q8_0 / q4_0 storage itself causes (fp32 path on the decoded rows
 *    against the fp32 path on the rows before encoding), and below 2e-3 of the outputs'
 *    magnitude (output_diff: acc / l, since the running maxima differ slightly between
 *    the paths). Measured on these data (queries with a 6x outlier channel, keys with 8x
 *    outlier channels, as the bench's; D = 64, 128, 192, 256, 512): at most 4.3e-4, and
 *    at most 3.9 % of the format's error. ggml's own CPU path quantizes the query to 8 bits
 *    per block of 32 (q8_0), about 128x coarser per value. */
TEST(test_qblk_rows_match_reference)
{
    static const size_t dims[] = {64, 128, 192, 256, 512};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const size_t D = dims[di];
        int seen[MAXD] = {0};
        for (size_t k = 0; k < D; k++) {
            const size_t c = sjk_attn_qint_w16_chan(k, D);
            CHECKF(c < D, "w16 order D=%zu: word %zu names channel %zu", D, k, c);
            if (c < D) seen[c]++;
        }
        for (size_t c = 0; c < D; c++) CHECKF(seen[c] == 1, "w16 order D=%zu: channel %zu taken %d times", D, c, seen[c]);
    }
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    sjk_rng r;
    sjk_rng_seed(&r, 41);
    static float K[G * MAXD], V[G * MAXD], Kd[G * MAXD], Vd[G * MAXD], q[16 * MAXD];
    static uint8_t kq[G * MAXD / 32 * 34], vq[G * MAXD / 32 * 34];
    static uint8_t qbuf[SJK_ATTN_QINT_NBYTES(16, MAXD)];
    static const unsigned bits[3][2] = {{8, 8}, {4, 4}, {8, 4}};
    double worst_ratio = 0, worst_e = 0, worst_w = 0;
    int tested = 0, tested_w = 0;
    /* R: one row; 4 (one block of RB); 5, 6 (AVX-512: one block of 6, two keys at a time);
     * 11 (blocks of 8). Row 0 sees G − R % 2 keys: an odd count leaves the two-key readers
     * a last key alone. */
    static const size_t rows[] = {1, 4, 5, 6, 11};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (int bi = 0; bi < 3; bi++) {
                const size_t R = rows[ri];
                const size_t D = dims[di]; /* 192: whole quads of blocks and a pair */
                const unsigned kb = bits[bi][0], vb = bits[bi][1];
                float off[MAXD];
                for (size_t d = 0; d < D; d++) off[d] = (float)(0.5 * sjk_rng_normal(&r)) * (d % 23 == 1 ? 8.0f : 1.0f);
                for (size_t t = 0; t < G; t++) {
                    const float swing = (float)(0.5 + sjk_rng_uniform(&r));
                    for (size_t d = 0; d < D; d++) {
                        K[t * D + d] = off[d] + swing * (float)sjk_rng_normal(&r);
                        V[t * D + d] = swing * (float)sjk_rng_normal(&r);
                    }
                }
                if (kb == 8) sjk_encode_q8_0_ref(kq, K, G * D), sjk_decode_q8_0_ref(Kd, kq, G * D);
                else sjk_encode_q4_0_ref(kq, K, G * D), sjk_decode_q4_0_ref(Kd, kq, G * D);
                if (vb == 8) sjk_encode_q8_0_ref(vq, V, G * D), sjk_decode_q8_0_ref(Vd, vq, G * D);
                else sjk_encode_q4_0_ref(vq, V, G * D), sjk_decode_q4_0_ref(Vd, vq, G * D);
                for (size_t i = 0; i < R * D; i++) q[i] = (float)(0.08 * sjk_rng_normal(&r)) * (i % 31 == 3 ? 6.0f : 1.0f);
                sjk_attn_qint qi;
                sjk_attn_qint_prep(&qi, qbuf, q, R, D);
                /* 1: the pieces */
                for (size_t i = 0; i < R; i++) {
                    float amax = 0;
                    for (size_t d = 0; d < D; d++) amax = fmaxf(amax, fabsf(q[i * D + d]));
                    double worst = 0;
                    for (size_t d = 0; d < D; d++) {
                        const double x = (double)qi.scale[i] * (128.0 * qi.hi[i * D + d] + qi.lo[i * D + d]);
                        worst = fmax(worst, fabs(x - q[i * D + d]));
                        CHECK(qi.lo[i * D + d] >= -64 && qi.lo[i * D + d] <= 64);
                    }
                    CHECKF(worst <= amax / 32512.0 * 1.001 + 1e-12, "row %zu: piece error %.3g > max/32512 = %.3g", i, worst,
                           amax / 32512.0);
                    for (size_t g4 = 0; g4 < D / 4; g4++) {
                        int32_t sh = 0, sl = 0;
                        for (size_t d = 4 * g4; d < 4 * g4 + 4; d++) sh += qi.hi[i * D + d], sl += qi.lo[i * D + d];
                        CHECK(qi.corr8[i * (D / 4) + g4] == -128 * sh - sl);
                    }
                    for (size_t b = 0; b < D / 32; b++) {
                        int32_t sum = 0;
                        for (size_t d = 32 * b; d < 32 * b + 32; d++) sum += 128 * qi.hi[i * D + d] + qi.lo[i * D + d];
                        CHECK(qi.bsum[i * (D / 32) + b] == (float)sum);
                    }
                    for (size_t k = 0; k < D; k++) {
                        const size_t d = sjk_attn_qint_w16_chan(k, D);
                        CHECK(qi.w16[i * D + k] == 128 * qi.hi[i * D + d] + qi.lo[i * D + d]);
                    }
                }
                uint32_t nvis[16];
                for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G - R % 2 : (sjk_rng_u64(&r) % (G + 1)));
                static state a, b, c;
                sjk_rng s0 = r;
                /* 3: int8 path vs fp32 path, relative to the format's own error */
                state_init(&a, R, D, &s0), s0 = r;
                state_init(&b, R, D, &s0), s0 = r;
                state_init(&c, R, D, &s0);
                ref->chunk_f32(q, R, D, nvis, Kd, Vd, G, a.m, a.l, a.acc, g_work);
                ref->chunk_qblk(&qi, R, D, nvis, kb, vb, kq, vq, G, b.m, b.l, b.acc, g_work, NULL, 0);
                ref->chunk_f32(q, R, D, nvis, K, V, G, c.m, c.l, c.acc, g_work);
                const double e_int = output_diff(&a, &b, R, D), e_fmt = output_diff(&a, &c, R, D);
                worst_e = fmax(worst_e, e_int);
                worst_ratio = fmax(worst_ratio, e_int / fmax(e_fmt, 1e-30));
                CHECKF(e_int < 2e-3 && e_int < 0.05 * e_fmt, "q%u_0/q%u_0 D=%zu R=%zu: int8 path %.3g vs fp32 path, format error %.3g",
                       kb, vb, D, R, e_int, e_fmt);
                /* 2: every SIMD table against the reference */
                for (int pi = 0; pi < 2; pi++) {
                    const sjk_attn_kernels *k = paths[pi];
                    if (!k || !k->chunk_qblk) continue;
                    tested++;
                    s0 = r;
                    state_init(&c, R, D, &s0);
                    k->chunk_qblk(&qi, R, D, nvis, kb, vb, kq, vq, G, c.m, c.l, c.acc, g_work, kq, G * (D / 32) * (kb == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES));
                    const double e = state_diff(&b, &c, R, D);
                    CHECKF(e < 1e-5, "%s qblk q%u_0/q%u_0 D=%zu R=%zu: rel diff %.3g", k->name, kb, vb, D, R, e);
                }
                /* 4: values by int16 weights (chunk_qblk_q16): the reference against the
                 * fp32 one (bounded as 3), every SIMD table against it at Q16_WEIGHT_TOL */
                s0 = r;
                state_init(&a, R, D, &s0);
                ref->chunk_qblk_q16(&qi, R, D, nvis, kb, vb, kq, vq, G, a.m, a.l, a.acc, g_work, NULL, 0);
                const double e_w = output_diff(&b, &a, R, D);
                worst_w = fmax(worst_w, e_w);
                CHECKF(e_w < 2e-4 && e_w < 0.05 * e_fmt, "q%u_0/q%u_0 D=%zu R=%zu: int16 weights %.3g from the fp32 values", kb, vb,
                       D, R, e_w);
                for (int pi = 0; pi < 2; pi++) {
                    const sjk_attn_kernels *k = paths[pi];
                    if (!k || !k->chunk_qblk_q16) continue;
                    tested_w++;
                    s0 = r;
                    state_init(&c, R, D, &s0);
                    k->chunk_qblk_q16(&qi, R, D, nvis, kb, vb, kq, vq, G, c.m, c.l, c.acc, g_work, NULL, 0);
                    const double e = state_diff(&a, &c, R, D);
                    CHECKF(e < Q16_WEIGHT_TOL, "%s qblk_q16 q%u_0/q%u_0 D=%zu R=%zu: rel diff %.3g", k->name, kb, vb, D, R, e);
                }
            }
    fprintf(stderr, "  note: int8 query path vs fp32 path: worst %.3g, at most %.3g of the format's own error\n", worst_e,
            worst_ratio);
    fprintf(stderr, "  note: int16 value weights vs fp32 values: worst %.3g of the outputs' magnitude (%d SIMD checks)\n",
            worst_w, tested_w);
    if (!tested) fprintf(stderr, "  note: no SIMD table reads ggml block rows in place on this CPU; the reference was checked alone\n");
}

/* Every table's qint_prep against sjk_attn_qint_prep, field by field and bit for bit:
 * rows of Gaussian values, rows with one channel 1000x the others, rows of zeros, rows at
 * the rounding ties of the pieces (values k / 2 and 64 k + 0.5 of the scale), and rows
 * with an infinity or a NaN (scale NaN, zero pieces, checked in the reference too);
 * D = 64 .. 512, R = 1 .. 16. */
TEST(test_qint_prep_simd_matches_reference)
{
    static const size_t dims[] = {64, 128, 192, 256, 320, 512};
    const sjk_attn_kernels *paths[3] = {sjk_attn_kernels_ref(), sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    static uint8_t qa[SJK_ATTN_QINT_NBYTES(16, MAXD)], qb[SJK_ATTN_QINT_NBYTES(16, MAXD)];
    static float q[16 * MAXD];
    sjk_rng r;
    sjk_rng_seed(&r, 77);
    int tested = 0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t R = 1; R <= 16; R += 5) {
            const size_t D = dims[di];
            for (size_t i = 0; i < R; i++)
                for (size_t d = 0; d < D; d++) {
                    const int kind = (int)(i % 5);
                    float x = (float)sjk_rng_normal(&r);
                    if (kind == 1) x = d == i % D ? 1000.0f : 0.01f * x;
                    else if (kind == 2) x = 0.0f;
                    else if (kind == 3) x = d == 0 ? 16256.0f : (float)((int)(d % 200) - 100) * (d % 2 ? 0.5f : 64.5f); /* scale 1: ties */
                    else if (kind == 4) x = d == 5 ? (i % 2 ? NAN : -INFINITY) : x;
                    q[i * D + d] = x;
                }
            sjk_attn_qint a, b;
            sjk_attn_qint_prep(&a, qa, q, R, D);
            /* the non-finite rows (an infinity, or a NaN the max skips): scale NaN, zero pieces */
            for (size_t i = 4; i < R; i += 5) {
                int z = 1;
                for (size_t d = 0; d < D; d++) z &= a.hi[i * D + d] == 0 && a.lo[i * D + d] == 0 && a.w16[i * D + d] == 0;
                CHECKF(isnan(a.scale[i]) && z, "ref D=%zu row %zu (%s): scale %g, pieces %s", D, i, i % 2 ? "NaN" : "-inf",
                       (double)a.scale[i], z ? "zero" : "not zero");
            }
            for (int pi = 0; pi < 3; pi++) {
                const sjk_attn_kernels *k = paths[pi];
                if (!k || !k->qint_prep) continue;
                tested++;
                memset(qb, 0xA5, sizeof qb);
                k->qint_prep(&b, qb, q, R, D);
                CHECKF(!memcmp(a.scale, b.scale, R * sizeof(float)), "%s D=%zu R=%zu: scales differ", k->name, D, R);
                CHECKF(!memcmp(a.hi, b.hi, R * D) && !memcmp(a.lo, b.lo, R * D), "%s D=%zu R=%zu: pieces differ", k->name, D, R);
                CHECKF(!memcmp(a.w16, b.w16, R * D * 2), "%s D=%zu R=%zu: w16 differs", k->name, D, R);
                CHECKF(!memcmp(a.corr8, b.corr8, R * (D / 4) * 4), "%s D=%zu R=%zu: corr8 differs", k->name, D, R);
                CHECKF(!memcmp(a.bsum, b.bsum, R * (D / 32) * 4), "%s D=%zu R=%zu: bsum differs", k->name, D, R);
            }
        }
    CHECK(tested > 0); /* the reference table's entry at least */
}

/* chunk_qblk on the inputs at the edges of its integer arithmetic, every SIMD table
 * against the reference at 1e-5, and chunk_qblk_q16 at Q16_WEIGHT_TOL
 * (test_qblk_rows_match_reference covers typical data):
 * q8_0 codes all at +-127 and -128 (the largest products, |code · (128 hi + lo)| up to
 * 128 · 16320 in every lane), q4_0 nibbles all at 0 and 15 (codes -8 and 7), blocks with
 * a zero scale; queries with one channel 1000x the others (the other channels keep few
 * bits: the pieces are the same integers on both sides), a query row of zeros (scale 0:
 * scores 0), and rows whose values are all +-max. D = 64, 128, 192, 256; R = 1, 3, 4, 6,
 * 7 (every row-block shape of the AVX2 kernel: 3, 4, 6 rows and a short last block). */
TEST(test_qblk_extreme_inputs_match_reference)
{
    static const size_t dims[] = {64, 128, 192, 256}, rows[] = {1, 3, 4, 6, 7};
    static const unsigned bits[3][2] = {{8, 8}, {4, 4}, {8, 4}};
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    static uint8_t kq[G * MAXD / 32 * 34], vq[G * MAXD / 32 * 34];
    static uint8_t qbuf[SJK_ATTN_QINT_NBYTES(16, MAXD)];
    static float q[16 * MAXD];
    static state b, c;
    sjk_rng r;
    sjk_rng_seed(&r, 4242);
    int tested = 0;
    double worst_m = 0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (int bi = 0; bi < 3; bi++)
                for (int qk = 0; qk < 3; qk++) {
                    const size_t D = dims[di], R = rows[ri], nb = D / 32;
                    const unsigned kb = bits[bi][0], vb = bits[bi][1];
                    for (int side = 0; side < 2; side++) { /* K, then V blocks at the extremes */
                        uint8_t *dst = side ? vq : kq;
                        const unsigned bb = side ? vb : kb;
                        const size_t bn = bb == 8 ? SJK_Q8_0_NBYTES : SJK_Q4_0_NBYTES;
                        for (size_t blk = 0; blk < G * nb; blk++) {
                            uint8_t *x = dst + blk * bn;
                            const uint64_t u = sjk_rng_u64(&r);
                            /* one block in 16 with a zero scale, the others in [2^-16, 2^-11) for K
                             * (scores stay within +-50: at larger ones fp32 rounding of the score
                             * alone moves exp() by more than 1e-5) and [2^-12, 2^-1) for V */
                            const int e0 = side ? 2 : 12, ne = side ? 11 : 5;
                            const float d = u % 16 == 0 ? 0.0f : ldexpf(1.0f + (float)(u >> 40 & 1023) / 1024.0f, -(int)(e0 + (u >> 8) % ne));
                            const uint16_t h = sjk_f32_to_fp16(d);
                            x[0] = (uint8_t)(h & 0xFF);
                            x[1] = (uint8_t)(h >> 8);
                            for (size_t i = 0; i < (bb == 8 ? 32u : 16u); i++) {
                                const uint64_t v = sjk_rng_u64(&r);
                                if (bb == 8) x[2 + i] = (uint8_t)(v % 8 == 0 ? 0x80 : v % 2 ? 127 : 0x81); /* -128, 127, -127 */
                                else x[2 + i] = (uint8_t)((v % 2 ? 0x0F : 0x00) | (v % 4 >= 2 ? 0xF0 : 0x00));
                            }
                        }
                    }
                    for (size_t i = 0; i < R; i++)
                        for (size_t d = 0; d < D; d++) {
                            float x = (float)sjk_rng_normal(&r);
                            if (qk == 0) x = d == (7 * i + 3) % D ? 1000.0f * (i % 2 ? -1.0f : 1.0f) : 0.01f * x;
                            else if (qk == 1) x = i == 0 ? 0.0f : 0.1f * x; /* row 0 all zeros */
                            else x = (d + i) % 2 ? 2.5f : -2.5f;           /* every value at +-max */
                            q[i * D + d] = x;
                        }
                    sjk_attn_qint qi;
                    sjk_attn_qint_prep(&qi, qbuf, q, R, D);
                    if (qk == 1) CHECKF(qi.scale[0] == 0.0f, "zero row: scale %g", qi.scale[0]);
                    uint32_t nvis[16];
                    for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : 1 + sjk_rng_u64(&r) % G);
                    /* v16 = 1: values by int16 weights (chunk_qblk_q16) at the same extremes,
                     * the largest int32 sums (|code| = 128 times Σ|w16| <= G · 32767) */
                    sjk_rng s0 = r;
                    for (int v16 = 0; v16 < 2; v16++) {
                        s0 = r;
                        state_init(&b, R, D, &s0);
                        (v16 ? ref->chunk_qblk_q16 : ref->chunk_qblk)(&qi, R, D, nvis, kb, vb, kq, vq, G, b.m, b.l, b.acc, g_work,
                                                                      NULL, 0);
                        for (size_t i = 0; i < R; i++) CHECKF(isfinite(b.l[i]) && b.l[i] > 0, "ref: row %zu l = %g", i, b.l[i]);
                        for (size_t i = 0; i < R; i++) worst_m = fmax(worst_m, fabs(b.m[i]));
                        for (int pi = 0; pi < 2; pi++) {
                            const sjk_attn_kernels *k = paths[pi];
                            if (!k || !(v16 ? k->chunk_qblk_q16 : k->chunk_qblk)) continue;
                            tested++;
                            s0 = r;
                            state_init(&c, R, D, &s0);
                            (v16 ? k->chunk_qblk_q16 : k->chunk_qblk)(&qi, R, D, nvis, kb, vb, kq, vq, G, c.m, c.l, c.acc, g_work,
                                                                      NULL, 0);
                            const double e = state_diff(&b, &c, R, D);
                            CHECKF(e < (v16 ? Q16_WEIGHT_TOL : 1e-5), "%s %s q%u_0/q%u_0 D=%zu R=%zu query kind %d: rel diff %.3g",
                                   k->name, v16 ? "qblk_q16" : "qblk", kb, vb, D, R, qk, e);
                        }
                    }
                    r = s0;
                }
    fprintf(stderr, "  note: largest running max of a row %.3g\n", worst_m);
    if (!tested) fprintf(stderr, "  note: no SIMD table reads ggml block rows in place on this CPU; the reference was checked alone\n");
}

/* 4-bit records scored by integer dot products (chunk_rec_q16) against int16 queries.
 *
 * 1. sjk_attn_q16_prep: every value within max|x| / 65534 of scale · q16 (+ fp32
 *    rounding), |q16| <= 32767; a zero row gives scale 0, a row with a NaN or inf scale
 *    NaN and zeros.
 * 2. Every table's chunk_rec_q16 against the reference chunk_rec_q16: 1e-5, as for every
 *    kernel (the integer sums are exact; fp32 order differs). R = 1, 6, 11 takes the
 *    AVX-512 kernel through blocks of 4 and of 8 rows.
 * 3. The integer path against the fp32 chunk_rec it replaces: the folded queries keep
 *    16 bits, so the outputs (acc / l) may differ by about 1e-5 of their magnitude;
 *    bounded at 2e-4 (measured: at most 4e-5 on these data, 4-bit codes and scales with
 *    a 6x outlier channel). The record format's own error (4-bit codes) is orders larger. */
TEST(test_rec_q16_matches_reference)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    sjk_rng r;
    sjk_rng_seed(&r, 53);
    /* 1: the quantizer */
    {
        float x[MAXD], sc;
        int16_t q16[MAXD];
        for (size_t i = 0; i < MAXD; i++) x[i] = (float)sjk_rng_normal(&r) * (i % 29 == 5 ? 9.0f : 1.0f);
        sjk_attn_q16_prep(q16, &sc, x, MAXD);
        float amax = 0;
        for (size_t i = 0; i < MAXD; i++) amax = fmaxf(amax, fabsf(x[i]));
        double worst = 0;
        for (size_t i = 0; i < MAXD; i++) {
            CHECK(q16[i] >= -32767 && q16[i] <= 32767);
            worst = fmax(worst, fabs((double)sc * q16[i] - x[i]));
        }
        CHECKF(worst <= amax / 65534.0 * 1.001, "q16 error %.3g > max/65534 = %.3g", worst, amax / 65534.0);
        for (size_t i = 0; i < MAXD; i++) x[i] = 0;
        sjk_attn_q16_prep(q16, &sc, x, MAXD);
        CHECK(sc == 0.0f && q16[7] == 0);
        x[3] = NAN;
        x[4] = 1.0f;
        sjk_attn_q16_prep(q16, &sc, x, MAXD);
        CHECK(isnan(sc) && q16[4] == 0);
    }
    static uint8_t kc[G * MAXD], vc[G * MAXD], kp[MAXD * G / 2], vp[G * MAXD / 2], vc6[G * MAXD], vc8[G * MAXD], kc7[G * MAXD];
    static float q[16 * MAXD], sc[3 * MAXD + 3 * G], ks7[MAXD];
    double worst_fp = 0, worst_v = 0;
    int tested = 0, tested_v = 0;
    for (size_t D = 64; D <= MAXD; D *= 2)
        for (size_t R = 1; R <= 11; R += 5) {
            for (size_t i = 0; i < G * D; i++) {
                kc[i] = (uint8_t)(sjk_rng_u64(&r) % 16);
                vc[i] = (uint8_t)(sjk_rng_u64(&r) % 16);
            }
            for (size_t d = 0; d < D; d++) sjk_payload_pack_row(kp + d * (G / 2), G, 4, kc + d * G);
            for (size_t t = 0; t < G; t++) sjk_payload_pack_row(vp + t * (D / 2), D, 4, vc + t * D);
            for (size_t i = 0; i < R * D; i++) q[i] = (float)(0.2 * sjk_rng_normal(&r));
            for (size_t i = 0; i < 3 * D + 3 * G; i++) sc[i] = (float)(0.05 + 0.1 * sjk_rng_uniform(&r)) * (i % 37 == 2 ? 6.0f : 1.0f);
            sjk_attn_rec rc;
            memset(&rc, 0, sizeof rc);
            rc.kp = kp; rc.vp = vp;
            rc.kscale = sc; rc.kzero = sc + D; rc.ktok = sc + 2 * D;
            rc.vch = sc + 2 * D + G; rc.vscale = sc + 3 * D + G; rc.vzero = sc + 3 * D + 2 * G;
            uint32_t nvis[16];
            for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(&r) % (G + 1)));
            static state a, b, c;
            sjk_rng s0 = r;
            state_init(&a, R, D, &s0), s0 = r;
            state_init(&b, R, D, &s0);
            ref->chunk_rec_q16(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
            ref->chunk_rec(q, R, D, nvis, &rc, b.m, b.l, b.acc, g_work);
            /* 3 */
            const double e_fp = output_diff(&b, &a, R, D);
            worst_fp = fmax(worst_fp, e_fp);
            CHECKF(e_fp < 2e-4, "D=%zu R=%zu: int16 path %.3g from the fp32 path", D, R, e_fp);
            /* 2 */
            for (int pi = 0; pi < 2; pi++) {
                const sjk_attn_kernels *k = paths[pi];
                if (!k || !k->chunk_rec_q16) continue;
                tested++;
                s0 = r;
                state_init(&c, R, D, &s0);
                k->chunk_rec_q16(q, R, D, nvis, &rc, c.m, c.l, c.acc, g_work);
                const double e = state_diff(&a, &c, R, D);
                CHECKF(e < 1e-5, "%s rec_q16 D=%zu R=%zu: rel diff %.3g", k->name, D, R, e);
            }
            /* 4: values by int16 weights (chunk_rec_v16), keys 4-bit (as chunk_rec_q16
             * scores them), unpacked of unstated width (as chunk_rec) and unpacked 7-bit
             * (int16 queries, the widest that takes them), values 4-bit in place or
             * unpacked bytes of 6 and 8 bits (the widest: |sum| near 2^30): the reference
             * against the fp32 path, bounded at 5e-4 of the outputs' magnitude (the int16
             * weights and queries: measured at most 1.9e-4, 7-bit keys beside 6-bit values,
             * D = 512, one row; 4-bit keys and values 4e-5), every SIMD table against the
             * reference at 1e-5 (the integer sums are exact and the weights the same bits) */
            for (size_t i = 0; i < G * D; i++) {
                vc6[i] = (uint8_t)(sjk_rng_u64(&r) % 64);
                vc8[i] = (uint8_t)(sjk_rng_u64(&r) % 256);
                kc7[i] = (uint8_t)(sjk_rng_u64(&r) % 128);
            }
            for (size_t d = 0; d < D; d++) ks7[d] = rc.kscale[d] * (15.0f / 127.0f);
            static const char *const kname[3] = {"unpacked (fp32)", "4-bit", "7-bit (int16)"};
            for (int kv = 0; kv < 9; kv++) {
                /* kpk: 0 unpacked codes of unstated width (scored in fp32), 1 4-bit in place,
                 * 2 unpacked 7-bit codes (kbits 7: int16 queries); vw: values 0 4-bit in
                 * place, 1 6-bit and 2 8-bit bytes */
                const int kpk = kv % 3, vw = kv / 3;
                sjk_attn_rec rv = rc;
                if (kpk != 1) { rv.kp = NULL; rv.kc = kpk ? kc7 : kc; rv.kbits = kpk ? 7 : 0; }
                if (kpk == 2) rv.kscale = ks7; /* a 7-bit record's step: its range / 127 */
                if (vw) { rv.vp = NULL; rv.vc = vw == 1 ? vc6 : vc8; }
                s0 = r;
                state_init(&a, R, D, &s0), s0 = r;
                state_init(&b, R, D, &s0);
                ref->chunk_rec_v16(q, R, D, nvis, &rv, a.m, a.l, a.acc, g_work);
                (kpk == 1 ? ref->chunk_rec_q16 : ref->chunk_rec)(q, R, D, nvis, &rv, b.m, b.l, b.acc, g_work);
                const double e_v = output_diff(&b, &a, R, D);
                worst_v = fmax(worst_v, e_v);
                CHECKF(e_v < 5e-4, "D=%zu R=%zu keys %s, values %d-bit: int16 path %.3g from the fp32 one", D, R,
                       kname[kpk], 4 + 2 * vw, e_v);
                for (int pi = 0; pi < 2; pi++) {
                    const sjk_attn_kernels *k = paths[pi];
                    if (!k || !k->chunk_rec_v16) continue;
                    tested_v++;
                    s0 = r;
                    state_init(&c, R, D, &s0);
                    k->chunk_rec_v16(q, R, D, nvis, &rv, c.m, c.l, c.acc, g_work);
                    const double e = state_diff(&a, &c, R, D);
                    CHECKF(e < 1e-5, "%s rec_v16 D=%zu R=%zu keys %s, values %d-bit: rel diff %.3g", k->name, D, R,
                           kname[kpk], 4 + 2 * vw, e);
                }
            }
        }
    fprintf(stderr, "  note: int16 value weights vs fp32 values (4-, 6- and 8-bit V records): worst %.3g of the outputs' magnitude (%d SIMD checks)\n",
            worst_v, tested_v);
    fprintf(stderr, "  note: int16 query path vs fp32 path (4-bit records): worst %.3g of the outputs' magnitude\n", worst_fp);
    if (!tested) fprintf(stderr, "  note: no SIMD table scores 4-bit records by integer dot products on this CPU; the reference was checked alone\n");
}


/* Part 3 of the trellis integer-path tests (test_trellis_q16_matches_reference with the
 * float tables, test_trellis_q8_matches_reference with their int8 grids): random records
 * at 2, 3 and 4 bits (and mixed), every D, 1 to 9 rows with partial visibility, a flat
 * query and flat weights; every other case reads the real-data tables (body sj:B/Btr), and
 * with grid the cases go round the grid, real-data grid and 128-entry tables (sj:B/Bts).
 * The reference integer path against the fp32 reference (worst printed) and every
 * table's integer path against the reference at tol. With grid, a record on the float
 * tables must take chunk_trellis_q16's bits from chunk_trellis_q8. */
static void trellis_int_paths(sjk_rng *rp, int grid, double tol)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    const char *what = grid ? "int8 trellis path" : "int16 trellis path";
    sjk_rng r = *rp;
    static uint8_t kt[MAXD * G / 2 + 8], vt[MAXD * G / 2 + 8];
    static float q[16 * MAXD], sc[3 * MAXD + 3 * G];
    double worst_fp = 0;
    int tested = 0;
    for (unsigned kb = 2; kb <= 4; kb++)
        for (size_t D = 64; D <= MAXD; D *= 2)
            for (int pass = 0; pass < 4; pass++) {
                const unsigned vb = pass == 1 ? (kb == 2 ? 4 : kb - 1) : kb;
                const size_t R = pass == 0 ? 4 : pass == 1 ? 6 : pass == 2 ? (D == 128 ? 9 : 1) : 3;
                const int flat_q = pass == 3 && D % 128 == 0, flat_p = pass == 3 && D % 128 != 0;
                for (size_t i = 0; i < D * G * kb / 8; i++) kt[i] = (uint8_t)sjk_rng_u64(&r);
                for (size_t i = 0; i < D * G * vb / 8; i++) vt[i] = (uint8_t)sjk_rng_u64(&r);
                for (size_t i = 0; i < R * D; i++) q[i] = flat_q ? 0.3f : (float)(0.2 * sjk_rng_normal(&r));
                for (size_t i = 0; i < 3 * D + 3 * G; i++) sc[i] = (float)(0.05 + 0.1 * sjk_rng_uniform(&r));
                if (flat_q) for (size_t d = 0; d < D; d++) sc[d] = 0.1f;                 /* Kscale */
                if (flat_p) for (size_t t = 0; t < G; t++) sc[2 * D + t] = 1e-4f;      /* Ktok */
                sjk_attn_rec rc;
                memset(&rc, 0, sizeof rc);
                rc.kscale = sc; rc.kzero = sc + D; rc.ktok = sc + 2 * D;
                rc.vch = sc + 2 * D + G; rc.vscale = sc + 3 * D + G; rc.vzero = sc + 3 * D + 2 * G;
                rc.kt = kt; rc.vt = vt; rc.kbits = kb; rc.vbits = vb;
                const int real = (int)((kb + pass + D / 64) % 2), pick = (int)((kb + pass + D / 64) % 3);
                const unsigned body = grid ? (pick == 0 ? SJK_BODY_TRELLIS_I8 : pick == 1 ? SJK_BODY_TRELLIS_REAL_I8
                                                                                       : SJK_BODY_TRELLIS_S128)
                                           : (real ? SJK_BODY_TRELLIS_REAL : SJK_BODY_TRELLIS);
                rc.kcb = sjk_trellis_codebook_for(body, kb, 0);
                rc.vcb = sjk_trellis_codebook_for(body, vb, 1);
                uint32_t nvis[16];
                for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(&r) % (G + 1)));
                static state a, b, c;
                sjk_rng s0 = r;
                state_init(&a, R, D, &s0), s0 = r;
                state_init(&b, R, D, &s0);
                (grid ? ref->chunk_trellis_q8 : ref->chunk_trellis_q16)(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
                ref->chunk_rec(q, R, D, nvis, &rc, b.m, b.l, b.acc, g_work);
                const double e_fp = output_diff(&b, &a, R, D);
                worst_fp = fmax(worst_fp, e_fp);
                CHECKF(e_fp < 1e-3, "%u/%u D=%zu R=%zu%s: %s %.3g from the fp32 path", kb, vb, D, R,
                       flat_q ? " flat q" : flat_p ? " flat p" : "", what, e_fp);
                for (int pi = 0; pi < 2; pi++) {
                    const sjk_attn_kernels *k = paths[pi];
                    void (*fn)(const float *, size_t, size_t, const uint32_t *, const sjk_attn_rec *, float *, float *,
                               float *, float *) = k ? (grid ? k->chunk_trellis_q8 : k->chunk_trellis_q16) : NULL;
                    if (!fn) continue;
                    tested++;
                    s0 = r;
                    state_init(&c, R, D, &s0);
                    fn(q, R, D, nvis, &rc, c.m, c.l, c.acc, g_work);
                    /* a table without chunk_trellis_q16 reads records on the 64 << k-entry
                     * grids as its chunk_rec does (attn_kernels.h): the fp32 reference's result */
                    const int as_rec = grid && body != SJK_BODY_TRELLIS_S128 && !k->chunk_trellis_q16;
                    const double e = state_diff(as_rec ? &b : &a, &c, R, D);
                    CHECKF(e < (as_rec ? 1e-5 : tol), "%s %s%s %u/%u D=%zu R=%zu%s: rel diff %.3g", k->name, what,
                           as_rec ? " (as chunk_rec)" : "", kb, vb, D, R, flat_q ? " flat q" : flat_p ? " flat p" : "", e);
                }
                if (grid && pass == 0) { /* float tables: chunk_trellis_q8 hands the record on */
                    rc.kcb = sjk_trellis_codebook(kb);
                    rc.vcb = sjk_trellis_codebook(vb);
                    s0 = r;
                    state_init(&a, R, D, &s0), s0 = r;
                    state_init(&b, R, D, &s0);
                    ref->chunk_trellis_q8(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
                    ref->chunk_trellis_q16(q, R, D, nvis, &rc, b.m, b.l, b.acc, g_work);
                    CHECK(state_diff(&a, &b, R, D) == 0);
                }
            }
    /* int8-grid records with one scalar tile (above 4 bits) beside a trellis one: the K
     * tile as unpacked codes (sj:5/3t, sj:8/3t) or the V tile (sj:2/6t); the reference
     * against the fp32 path, every table that reads them in place (trellis_mixed)
     * against the reference */
    static uint8_t cs[MAXD * G];
    for (int pass = 0; grid && pass < 7; pass++) { /* passes 2 and 6: 8-bit keys (fp32 scores) */
        const int kmix = pass % 2 == 0;
        const size_t D = pass < 2 ? 64 : pass < 4 ? 128 : pass < 6 ? 256 : MAXD, R = pass < 2 ? 4 : pass < 4 ? 6 : 1 + pass;
        const unsigned tb = pass < 4 ? 3 : 2, sb = pass == 2 || pass == 6 ? 8 : 5 + (unsigned)pass % 2;
        for (size_t i = 0; i < D * G * tb / 8; i++) kt[i] = (uint8_t)sjk_rng_u64(&r);
        for (size_t i = 0; i < D * G; i++) cs[i] = (uint8_t)(sjk_rng_u64(&r) % (1u << sb));
        for (size_t i = 0; i < R * D; i++) q[i] = (float)(0.2 * sjk_rng_normal(&r));
        for (size_t i = 0; i < 3 * D + 3 * G; i++) sc[i] = (float)(0.05 + 0.1 * sjk_rng_uniform(&r)) / (float)(1u << (sb - 3));
        sjk_attn_rec rc;
        memset(&rc, 0, sizeof rc);
        rc.kscale = sc; rc.kzero = sc + D; rc.ktok = sc + 2 * D;
        rc.vch = sc + 2 * D + G; rc.vscale = sc + 3 * D + G; rc.vzero = sc + 3 * D + 2 * G;
        const unsigned body = pass % 3 == 0 ? SJK_BODY_TRELLIS_I8 : pass % 3 == 1 ? SJK_BODY_TRELLIS_S128 : SJK_BODY_TRELLIS_REAL_I8;
        if (kmix) {
            rc.kc = cs; rc.kbits = sb;
            rc.vt = kt; rc.vbits = tb; rc.vcb = sjk_trellis_codebook_for(body, tb, 1);
        } else {
            rc.kt = kt; rc.kbits = tb; rc.kcb = sjk_trellis_codebook_for(body, tb, 0);
            rc.vc = cs; rc.vbits = sb;
        }
        uint32_t nvis[16];
        for (size_t i = 0; i < R; i++) nvis[i] = (uint32_t)(i == 0 ? G : (sjk_rng_u64(&r) % (G + 1)));
        static state a, b, c;
        sjk_rng s0 = r;
        state_init(&a, R, D, &s0), s0 = r;
        state_init(&b, R, D, &s0);
        ref->chunk_trellis_q8(q, R, D, nvis, &rc, a.m, a.l, a.acc, g_work);
        ref->chunk_rec(q, R, D, nvis, &rc, b.m, b.l, b.acc, g_work);
        const double e_fp = output_diff(&b, &a, R, D);
        worst_fp = fmax(worst_fp, e_fp);
        CHECKF(e_fp < 1e-3, "mixed %s%u/%s%u D=%zu R=%zu: %s %.3g from the fp32 path", kmix ? "s" : "t", rc.kbits,
               kmix ? "t" : "s", rc.vbits, D, R, what, e_fp);
        for (int pi = 0; pi < 2; pi++) {
            const sjk_attn_kernels *k = paths[pi];
            if (!k || !k->chunk_trellis_q8 || !k->trellis_mixed) continue;
            tested++;
            s0 = r;
            state_init(&c, R, D, &s0);
            k->chunk_trellis_q8(q, R, D, nvis, &rc, c.m, c.l, c.acc, g_work);
            /* a table without chunk_trellis_q16 reads them in fp32, as chunk_rec (above) */
            const int as_rec = !k->chunk_trellis_q16;
            const double e = state_diff(as_rec ? &b : &a, &c, R, D);
            CHECKF(e < (as_rec ? 1e-5 : tol), "%s mixed %s%u/%s%u D=%zu R=%zu: rel diff %.3g", k->name, kmix ? "s" : "t",
                   rc.kbits, kmix ? "t" : "s", rc.vbits, D, R, e);
        }
    }
    *rp = r;
    fprintf(stderr, "  note: %s vs fp32 path: worst %.3g of the outputs' magnitude\n", what, worst_fp);
    if (!tested) fprintf(stderr, "  note: no SIMD table has the %s on this CPU; the reference was checked alone\n", what);
}

/* Trellis records by int16 dot products (chunk_trellis_q16).
 * 1. sjk_attn_trellis_c16: |c16| <= CMAX, reached, and every committed codebook value
 *    within scale / 2 of scale · c16.
 * 2. sjk_attn_q16_prep_l1: the sum bound holds and every value stays within scale / 2 of
 *    scale · q16, on a flat row (the bound rescales it) and a spiky one (it does not: the
 *    bits of sjk_attn_q16_prep).
 * 3. The reference against the fp32 reference over the same records (the int16
 *    rounding is the only difference; its worst case is printed) and every table's
 *    chunk_trellis_q16 against the reference at Q16_WEIGHT_TOL, at 2, 3 and 4 bits (and mixed),
 *    every D, 1 to 9 rows with partial visibility, and two extreme records: a flat query
 *    (the key sum bound binds) and flat weights (keys nearly equal: the value bound
 *    binds). */
TEST(test_trellis_q16_matches_reference)
{
    /* 1 */
    for (unsigned kk = 0; kk < 3 * SJK_TRELLIS_CB_SETS; kk++) {
        const unsigned k = 2 + kk % 3, set = kk / 3; /* the committed tables, the real-data K and V ones, their grids */
        float cs;
        const float *cb = sjk_trellis_codebook_of_set(set, k);
        const int16_t *c16 = set == 0 ? sjk_attn_trellis_c16(k, &cs) : sjk_attn_trellis_c16_of(cb, k, &cs);
        CHECK(c16 && cb && cs > 0);
        if (!c16 || !cb) return;
        int top = 0;
        double worst = 0;
        for (size_t w = 0; w < ((size_t)64 << k); w++) {
            CHECK(c16[w] >= -SJK_ATTN_TRQ_CMAX && c16[w] <= SJK_ATTN_TRQ_CMAX);
            top |= c16[w] == SJK_ATTN_TRQ_CMAX || c16[w] == -SJK_ATTN_TRQ_CMAX;
            worst = fmax(worst, fabs((double)cs * c16[w] - cb[w]));
        }
        CHECK(top);
        CHECKF(worst <= cs * 0.5 * 1.001, "k=%u set %u: codebook error %.3g > scale/2 = %.3g", k, set, worst,
               cs * 0.5);
    }
    {
        float cs;
        CHECK(sjk_attn_trellis_c16(1, &cs) == NULL && sjk_attn_trellis_c16(5, &cs) == NULL);
    }
    CHECK((uint64_t)SJK_ATTN_TRQ_SUM_MAX * SJK_ATTN_TRQ_CMAX <= 2147483647u &&
          (uint64_t)(SJK_ATTN_TRQ_SUM_MAX + 1) * SJK_ATTN_TRQ_CMAX > 2147483647u);
    /* 2 */
    sjk_rng r;
    sjk_rng_seed(&r, 47);
    {
        static float x[MAXD];
        static int16_t a16[MAXD], b16[MAXD];
        for (int shape = 0; shape < 2; shape++) {
            for (size_t i = 0; i < MAXD; i++) x[i] = shape ? (float)(0.01 * sjk_rng_normal(&r)) : (float)(1.0 + 0.1 * sjk_rng_uniform(&r));
            if (shape) x[7] = 3.0f;
            float sa, sb;
            sjk_attn_q16_prep_l1(a16, &sa, x, MAXD, SJK_ATTN_TRQ_SUM_MAX);
            sjk_attn_q16_prep(b16, &sb, x, MAXD);
            uint64_t sum = 0;
            double worst = 0;
            for (size_t i = 0; i < MAXD; i++) {
                sum += (uint64_t)abs(a16[i]);
                worst = fmax(worst, fabs((double)sa * a16[i] - x[i]));
            }
            CHECKF(sum <= SJK_ATTN_TRQ_SUM_MAX, "shape %d: sum %llu", shape, (unsigned long long)sum);
            CHECKF(worst <= sa * 0.5 * 1.001, "shape %d: error %.3g > scale/2 %.3g", shape, worst, sa * 0.5);
            if (shape) CHECK(sa == sb && !memcmp(a16, b16, sizeof a16));
            else CHECK(sa > sb * 2); /* the flat row was rescaled */
        }
    }
    /* 3 */
    trellis_int_paths(&r, 0, Q16_WEIGHT_TOL);
}

/* Trellis records on the int8-grid codebooks (chunk_trellis_q8; bodies sj:B/Bt, B/Btr
 * since record format 4).
 * 1. The grid tables (sjk_trellis_codebook_grid, sets 3..5): every entry is exactly
 *    step · c8 with |c8| <= 127 and 127 reached, within step / 2 of its float table;
 *    sjk_trellis_codebook_i8 knows the grids and no other table; the _I8 bodies code
 *    with them.
 * 2. sjk_attn_q8_pieces: |hi| <= 127, |lo| <= 64, every value within scale / 2 of
 *    scale · (128 hi + lo), the sum of y; a row with a NaN: scale NaN, zero pieces.
 * 3. The reference against the fp32 reference on the same grid tables (only the pieces'
 *    rounding differs; worst printed) and every table's chunk_trellis_q8 against the
 *    reference at Q8_WEIGHT_TOL, at 2, 3 and 4 bits (and mixed), every D, 1 to 9 rows with
 *    partial visibility, a flat query and flat weights; a record with float tables takes
 *    chunk_trellis_q16's bits. */
#define Q8_WEIGHT_TOL (1e-5 + 2.0 / 16256)
TEST(test_trellis_q8_matches_reference)
{
    /* 1 */
    for (unsigned set = 0; set < SJK_TRELLIS_CB_FLOAT_SETS; set++)
        for (unsigned k = 2; k <= 4; k++) {
            const float *cb = sjk_trellis_codebook_of_set(set, k);
            const float *gr = sjk_trellis_codebook_grid(cb, k);
            float step = 0;
            const int8_t *c8 = sjk_trellis_codebook_i8(gr, k, &step);
            CHECKF(gr && c8 && step > 0, "set %u k=%u: no grid", set, k);
            if (!gr || !c8) return;
            CHECK(sjk_trellis_codebook_set(gr, k) == (int)(SJK_TRELLIS_CB_FLOAT_SETS + set));
            CHECK(sjk_trellis_codebook_of_set(SJK_TRELLIS_CB_FLOAT_SETS + set, k) == gr);
            CHECK(sjk_trellis_codebook_i8(cb, k, NULL) == NULL);
            int top = 0, exact = 1;
            double worst = 0;
            for (size_t w = 0; w < ((size_t)64 << k); w++) {
                CHECK(c8[w] >= -127 && c8[w] <= 127);
                top |= c8[w] == 127 || c8[w] == -127;
                exact &= gr[w] == (float)c8[w] * step;
                worst = fmax(worst, fabs((double)gr[w] - cb[w]));
            }
            CHECK(top && exact);
            CHECKF(worst <= step * 0.5 * 1.0001, "set %u k=%u: grid error %.3g > step/2 %.3g", set, k, worst, step * 0.5);
        }
    CHECK(sjk_trellis_codebook_for(SJK_BODY_TRELLIS_I8, 3, 1) == sjk_trellis_codebook_grid(sjk_trellis_codebook(3), 3));
    CHECK(sjk_trellis_codebook_for(SJK_BODY_TRELLIS_REAL_I8, 4, 1) ==
          sjk_trellis_codebook_grid(sjk_trellis_codebook_real(4, 1), 4));
    CHECK(sjk_trellis_codebook_for(SJK_BODY_TRELLIS, 2, 0) == sjk_trellis_codebook(2));
    /* 2 */
    sjk_rng r;
    sjk_rng_seed(&r, 83);
    {
        static float x[MAXD];
        static int8_t h[MAXD], lo[MAXD];
        for (size_t i = 0; i < MAXD; i++) x[i] = (float)(0.3 * sjk_rng_normal(&r));
        x[5] = -2.0f;
        float sc;
        int32_t ys;
        sjk_attn_q8_pieces(h, lo, &sc, &ys, x, MAXD);
        double worst = 0;
        int64_t sum = 0;
        int bounds = 1;
        for (size_t i = 0; i < MAXD; i++) {
            bounds &= h[i] >= -127 && lo[i] >= -64 && lo[i] <= 64;
            worst = fmax(worst, fabs((double)sc * (128 * h[i] + lo[i]) - x[i]));
            sum += 128 * h[i] + lo[i];
        }
        CHECK(bounds && h[5] == -127 && lo[5] == 0);
        CHECKF(worst <= sc * 0.5 * 1.001, "pieces error %.3g > scale/2 %.3g", worst, sc * 0.5);
        CHECK(sum == ys);
        x[9] = NAN;
        sjk_attn_q8_pieces(h, lo, &sc, &ys, x, MAXD);
        int zero = 1;
        for (size_t i = 0; i < MAXD; i++) zero &= h[i] == 0 && lo[i] == 0;
        CHECK(isnan(sc) && zero && ys == 0);
    }
    /* 3 */
    trellis_int_paths(&r, 1, Q8_WEIGHT_TOL);
}

/* The staging ring's tq6_0 rows by integer dot products (chunk_tq6_q16).
 *
 * 1. sjk_attn_tq6_c16: |c16| <= 8191 and every centroid within scale / 2 of scale · c16.
 * 2. Every table's chunk_tq6_q16 against the reference chunk_tq6_q16: Q16_WEIGHT_TOL
 *    (the integer sums are exact; fp32 order and the exp differ). R = 1, 6, 11 takes the
 *    AVX-512 kernel through blocks of 4 and of 8 rows. One case has every code at the
 *    largest centroid and a constant query (|q16| = 32767): the largest sums an int32
 *    lane of the SIMD kernel holds (8 · 32767 · 8191 < 2^31).
 * 3. The integer path against the fp32 chunk_tq6 it replaces: the query keeps 16 bits
 *    and the centroids 14, so the outputs (acc / l) may differ by about 1e-4 of their
 *    magnitude; bounded at 2e-4 (the format's own error, 6-bit codes, is far larger). */
TEST(test_tq6_q16_matches_reference)
{
    const sjk_attn_kernels *ref = sjk_attn_kernels_ref();
    const sjk_attn_kernels *paths[2] = {sjk_attn_kernels_avx2(), sjk_attn_kernels_avx512()};
    sjk_rng r;
    sjk_rng_seed(&r, 71);
    {
        int16_t c16[64];
        const float cs = sjk_attn_tq6_c16(c16);
        double worst = 0;
        for (int j = 0; j < 64; j++) {
            CHECK(c16[j] >= -8191 && c16[j] <= 8191);
            worst = fmax(worst, fabs((double)cs * c16[j] - sjk_tq6_centroids[j]));
        }
        CHECKF(worst <= cs / 2 * 1.001, "c16 error %.3g > scale/2 = %.3g", worst, cs / 2);
        CHECK(c16[63] == 8191 || c16[0] == -8191);
    }
    static float q[16 * MAXD];
    static uint8_t kr[G * MAXD / 128 * 98], vr[G * MAXD / 128 * 98];
    double worst_fp = 0;
    int tested = 0;
    for (int extreme = 0; extreme < 2; extreme++)
        for (size_t D = 128; D <= MAXD; D *= 2)
            for (size_t R = 1; R <= 11; R += 5) {
                tq6_rows_random(kr, vr, G * D / 128, &r, extreme);
                for (size_t i = 0; i < R * D; i++) q[i] = extreme ? 0.3f : (float)(0.2 * sjk_rng_normal(&r));
                uint32_t nvis[16];
                nvis_random(nvis, R, &r);
                static state a, b, c;
                sjk_rng s0 = r;
                state_init(&a, R, D, &s0);
                s0 = r;
                state_init(&b, R, D, &s0);
                ref->chunk_tq6_q16(q, R, D, nvis, kr, vr, G, a.m, a.l, a.acc, g_work, NULL, 0);
                ref->chunk_tq6(q, R, D, nvis, kr, vr, G, b.m, b.l, b.acc, g_work, NULL, 0);
                /* 3 */
                const double e_fp = output_diff(&b, &a, R, D);
                worst_fp = fmax(worst_fp, e_fp);
                CHECKF(e_fp < 2e-4, "D=%zu R=%zu%s: int16 path %.3g from the fp32 path", D, R, extreme ? " extreme" : "", e_fp);
                /* 2 */
                for (int pi = 0; pi < 2; pi++) {
                    const sjk_attn_kernels *k = paths[pi];
                    if (!k || !k->chunk_tq6_q16) continue;
                    tested++;
                    s0 = r;
                    state_init(&c, R, D, &s0);
                    k->chunk_tq6_q16(q, R, D, nvis, kr, vr, G, c.m, c.l, c.acc, g_work, kr, G * D / 128 * 98);
                    const double e = state_diff(&a, &c, R, D);
                    CHECKF(e < Q16_WEIGHT_TOL, "%s tq6_q16 D=%zu R=%zu%s: rel diff %.3g", k->name, D, R, extreme ? " extreme" : "", e);
                    /* the next chunk's rows are a prefetch hint: without it, the same bits */
                    static state d;
                    s0 = r;
                    state_init(&d, R, D, &s0);
                    k->chunk_tq6_q16(q, R, D, nvis, kr, vr, G, d.m, d.l, d.acc, g_work, NULL, 0);
                    CHECKF(!memcmp(d.acc, c.acc, R * D * sizeof c.acc[0]) && !memcmp(d.m, c.m, R * sizeof c.m[0]) &&
                               !memcmp(d.l, c.l, R * sizeof c.l[0]),
                           "%s tq6_q16 D=%zu R=%zu: the prefetch hint changed the result", k->name, D, R);
                }
            }
    fprintf(stderr, "  note: int16 ring path vs fp32 path (tq6_0 rows): worst %.3g of the outputs' magnitude\n", worst_fp);
    if (!tested) SKIP_PART_HW("no SIMD table scores tq6_0 rows by integer dot products on this CPU; the reference was checked alone");
}

int main(void)
{
    RUN(test_simd_kernels_match_reference);
    RUN(test_rec_nib_rows_extremes);
    RUN(test_many_rows_kernel_matches_reference);
    RUN(test_threads_split_positions_same_result);
    RUN(test_attn_splits_balance_units);
    RUN(test_threads_split_heads_and_positions_same_result);
    RUN(test_trellis_inplace_matches_decoded);
    RUN(test_tq6_ring_inplace_matches_decoded);
    RUN(test_qblk_rows_match_reference);
    RUN(test_qblk_extreme_inputs_match_reference);
    RUN(test_qint_prep_simd_matches_reference);
    RUN(test_rec_q16_matches_reference);
    RUN(test_tq6_q16_matches_reference);
    RUN(test_trellis_q16_matches_reference);
    RUN(test_trellis_q8_matches_reference);
    RUN(test_config_strings_parse);
    return test_summary();
}
