/* test_record.c — sealed records: exact sizes, the pinned payload bit order, round-trip
 * error bounds per bit width, the fast decoder against the simple reference decoder on
 * every path, the same bytes on every run and every kernel path, bad input (NaN, Inf,
 * denormals, huge values, constant and zero tiles) and bad parameters. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec_kernels.h"
#include "codec/record.h"
#include "common/rng.h"
#include "common/synth.h"
#include "harness.h"
#include "sjkvarn.h"

#define G SJK_GROUP
#define MAXD 512

static float g_k[G * MAXD], g_v[G * MAXD], g_yk[G * MAXD], g_yv[G * MAXD], g_zk[G * MAXD], g_zv[G * MAXD];
static uint8_t g_rec[140000], g_rec2[140000]; /* up to 8/8 at D = 512 */
static unsigned char g_scr[1 << 21]; /* a trellis record at D = 256 takes 1.25 MB */

static const sjk_codec_kernels *paths[3];
static size_t n_paths;

static sjk_record_params params(uint32_t D, unsigned bk, unsigned bv, sjk_balance_mode bal)
{
    sjk_record_params p = sjk_record_params_default();
    p.head_dim = D;
    p.bits_k = (uint8_t)bk;
    p.bits_v = (uint8_t)bv;
    p.balance = (uint8_t)bal;
    return p;
}

static void fill(size_t D, sjk_synth_kind kind, double amp, uint64_t seed)
{
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    sjk_synth_group(g_k, G, D, kind, 0, amp, seed, &r);
    sjk_synth_group(g_v, G, D, kind, 1, amp, seed, &r);
}

/* The widths the per-width tests run: every v1 pair, and v2's bodies above 4 bits. */
static const unsigned k_pairs[][2] = {{2, 2}, {2, 3}, {2, 4}, {3, 2}, {3, 3}, {3, 4}, {4, 2}, {4, 3}, {4, 4},
                                      {5, 4}, {6, 4}, {7, 4}, {8, 4}, {8, 8}, {4, 8}, {8, 2}, {5, 5},
                                      {6, 6}, {7, 7}, {3, 8}, {6, 3}, {5, 7}};
#define N_PAIRS (sizeof k_pairs / sizeof *k_pairs)

static sjk_status encode(const sjk_record_params *p, uint8_t *rec)
{
    return sjk_record_encode(p, rec, sjk_record_nbytes(p), g_k, g_v, g_scr, sizeof g_scr);
}

TEST(test_record_sizes_every_dim_and_bits)
{
    const size_t want256[][3] = {{4, 4, 35072}, {3, 3, 26880}, {3, 2, 22784}, {2, 2, 18688}};
    for (size_t i = 0; i < 4; i++) {
        sjk_record_params p = params(256, (unsigned)want256[i][0], (unsigned)want256[i][1], SJK_BALANCE_SJ);
        CHECK(sjk_record_nbytes(&p) == want256[i][2]);
    }
    sjk_record_params p = params(128, 4, 4, SJK_BALANCE_SJ);
    CHECK(sjk_record_nbytes(&p) == 17920); /* the reference's k4v4 at D = 128 */
    p.bits_v = 2;
    CHECK(sjk_record_nbytes(&p) == 13824);
    for (uint32_t D = 64; D <= 512; D *= 2)
        for (unsigned bk = 2; bk <= 8; bk++)
            for (unsigned bv = 2; bv <= 8; bv++) {
                p = params(D, bk, bv, SJK_BALANCE_SJ);
                size_t want = (size_t)D * G * (bk + bv) / 8 + 2 * (3 * (size_t)D + 3 * G);
                CHECK(sjk_record_nbytes(&p) == want);
                sjk_record_layout L;
                sjk_record_layout_init(&L, D, bk, bv);
                CHECK(L.nbytes == want && L.off_v == (size_t)D * G * bk / 8);
                CHECK(L.off_kscale == L.off_v + (size_t)G * D * bv / 8);
                CHECK(L.off_vzero + 2 * G == want);
                CHECK(sjk_record_scratch_nbytes(&p) <= sizeof g_scr);
            }
}

TEST(test_payload_bit_order_is_pinned)
{
    /* record format v1 (docs/FORMAT.md §3): hand-checked bytes */
    uint8_t codes[128], row[64];
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i & 15);
    sjk_payload_pack_row(row, 128, 4, codes);
    CHECK(row[0] == (0 | (0 << 4)));     /* codes 0 and 16 */
    CHECK(row[1] == (1 | (1 << 4)));     /* codes 1 and 17 */
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i / 16 % 4);
    sjk_payload_pack_row(row, 128, 2, codes);
    CHECK(row[0] == (0 | 1 << 2 | 2 << 4 | 3 << 6)); /* codes 0, 16, 32, 48 */
    CHECK(row[16] == 0xE4);                          /* codes 64, 80, 96, 112 */
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i == 9 ? 4 : 0);
    sjk_payload_pack_row(row, 128, 3, codes);
    for (int b = 0; b < 48; b++) CHECK(row[b] == (b == 32 + 1 ? 0x02 : 0)); /* bit 9 of the high field */
    /* record format v2: 8 bits are one byte a code; 5..7 a 4-bit row of the low nibbles,
     * then the high bits as a row of 1..3 bits */
    uint8_t wide[128];
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i * 7 + 3);
    sjk_payload_pack_row(wide, 128, 8, codes);
    CHECK(!memcmp(wide, codes, 128));
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i == 9 ? 0x1A : i == 17 ? 0x13 : 0);
    sjk_payload_pack_row(wide, 128, 5, codes);
    for (int b = 0; b < 80; b++) /* low nibbles: byte 9 (code 9), byte 1 high (code 17); high bits 9, 17 */
        CHECKF(wide[b] == (b == 9 ? 0x0A : b == 1 ? 0x30 : b == 64 + 1 ? 0x02 : b == 64 + 2 ? 0x02 : 0), "5-bit byte %d", b);
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i == 9 ? 0x35 : 0);
    sjk_payload_pack_row(wide, 128, 6, codes);
    for (int b = 0; b < 96; b++) CHECKF(wide[b] == (b == 9 ? 0x05 : b == 64 + 9 ? 0x03 : 0), "6-bit byte %d", b);
    for (int i = 0; i < 128; i++) codes[i] = (uint8_t)(i == 80 ? 0x7F : 0);
    sjk_payload_pack_row(wide, 128, 7, codes);
    /* code 80: low nibble in the high half of byte 32 (unit 2, k = 0); high bits 7: 3 in
     * bits 2..3 of byte 16 of the 2-bit field, 1 in bit 0 of byte 10 of the 1-bit field */
    for (int b = 0; b < 112; b++)
        CHECKF(wide[b] == (b == 32 ? 0xF0 : b == 64 + 16 ? 0x0C : b == 64 + 32 + 10 ? 0x01 : 0), "7-bit byte %d", b);
    /* every code round-trips through the accessor for every n and bit width */
    sjk_rng r;
    sjk_rng_seed(&r, 1);
    uint8_t c[512], buf[512];
    for (size_t n = 64; n <= 512; n *= 2)
        for (unsigned b = 2; b <= 8; b++) {
            for (size_t i = 0; i < n; i++) c[i] = (uint8_t)(sjk_rng_u64(&r) & ((1u << b) - 1));
            sjk_payload_pack_row(buf, n, b, c);
            int ok = 1;
            for (size_t i = 0; i < n; i++) ok &= sjk_payload_get(buf, n, b, i) == c[i];
            CHECKF(ok, "n=%zu bits=%u", n, b);
        }
}

/* Every element within half a quantization step of its row (plus fp16 rounding of the
 * stored fields); checked from the record's own fields. */
static void check_error_bound(const sjk_record_params *p, const uint8_t *rec)
{
    const size_t D = p->head_dim;
    sjk_record_layout L;
    sjk_record_layout_init(&L, p->head_dim, p->bits_k, p->bits_v);
    double worst = 0;
    for (size_t t = 0; t < G; t++)
        for (size_t d = 0; d < D; d++) {
            float ks = sjk_record_f16_at(rec, L.off_kscale, d), kz = sjk_record_f16_at(rec, L.off_kzero, d);
            float kt = sjk_record_f16_at(rec, L.off_ktok, t);
            float vs = sjk_record_f16_at(rec, L.off_vscale, t), vz = sjk_record_f16_at(rec, L.off_vzero, t);
            float vc = sjk_record_f16_at(rec, L.off_vch, d);
            const double qk = (double)((1u << p->bits_k) - 1), qv = (double)((1u << p->bits_v) - 1);
            double bk = (0.5 * fabs(ks) + 2e-3 * (fabs(kz) + qk * fabs(ks))) * fabs(kt) + 1e-6;
            double bv = (0.5 * fabs(vs) + 2e-3 * (fabs(vz) + qv * fabs(vs))) * fabs(vc) + 1e-6;
            worst = fmax(worst, fabs(g_k[t * D + d] - g_yk[t * D + d]) / bk);
            worst = fmax(worst, fabs(g_v[t * D + d] - g_yv[t * D + d]) / bv);
        }
    CHECKF(worst <= 1.0, "D=%zu %u/%u: error %.3f x its bound", D, p->bits_k, p->bits_v, worst);
}

TEST(test_record_round_trip_error_bounds_per_bits)
{
    /* SNR floors on i.i.d. Gaussian data (RTN over 128 or D values: ~ 6 dB per bit minus
     * the range loss); measured: 4 bits 19.7, 3 bits 13.1, 2 bits 5.7 dB at D = 256; the
     * least over D and pairs at 5..8 bits 24.98, 31.21, 37.19, 43.18 dB (floors 0.6 below). */
    const double floor_db[9] = {0, 0, 4.4, 11.8, 18.4, 24.4, 30.6, 36.6, 42.6}; /* rows of 512 values lose ~0.5 dB */
    for (uint32_t D = 64; D <= 512; D *= 2)
        for (size_t pi = 0; pi < N_PAIRS; pi++) {
            const unsigned bk = k_pairs[pi][0], bv = k_pairs[pi][1];
                sjk_record_params p = params(D, bk, bv, SJK_BALANCE_SJ);
                fill(D, SJK_SYNTH_GAUSSIAN, 1.0, D + 10 * bk + bv);
                CHECK(encode(&p, g_rec) == SJK_OK);
                CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, sjk_record_nbytes(&p)) == SJK_OK);
                double sk = sjk_snr_db(g_k, g_yk, G * D), sv = sjk_snr_db(g_v, g_yv, G * D);
                CHECKF(sk >= floor_db[bk], "D=%u K %u bits: %.2f dB", D, bk, sk);
                CHECKF(sv >= floor_db[bv], "D=%u V %u bits: %.2f dB", D, bv, sv);
                check_error_bound(&p, g_rec);
            }
}

TEST(test_record_balanced_outlier_close_to_gaussian)
{
    /* The point of balancing: on outlier channels + per-token swings the balanced 4/4 body
     * is no more than 1 dB below its Gaussian SNR; with balancing off it loses > 2 dB. */
    double snr[3][2];
    for (int b = 0; b < 3; b++)
        for (int kind = 0; kind < 2; kind++) {
            sjk_record_params p = params(256, 4, 4, (sjk_balance_mode)b);
            double e = 0;
            for (int g = 0; g < 4; g++) {
                fill(256, (sjk_synth_kind)kind, 1.0, 500 + g);
                sjk_hadamard(g_k, G * 256, 256);
                sjk_hadamard(g_v, G * 256, 256);
                CHECK(encode(&p, g_rec) == SJK_OK);
                CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, sjk_record_nbytes(&p)) == SJK_OK);
                e += sjk_snr_db(g_k, g_yk, G * 256) + sjk_snr_db(g_v, g_yv, G * 256);
            }
            snr[b][kind] = e / 8;
        }
    CHECKF(snr[SJK_BALANCE_SJ][1] >= snr[SJK_BALANCE_SJ][0] - 1.0, "sj: outlier %.2f gaussian %.2f",
           snr[SJK_BALANCE_SJ][1], snr[SJK_BALANCE_SJ][0]);
    CHECKF(snr[SJK_BALANCE_OFF][1] < snr[SJK_BALANCE_OFF][0] - 2.0, "off: outlier %.2f gaussian %.2f",
           snr[SJK_BALANCE_OFF][1], snr[SJK_BALANCE_OFF][0]);
}

TEST(test_record_small_magnitude_keeps_precision)
{
    /* sj splits the scales so tiny tiles do not underflow the fp16 fields */
    for (int e = 0; e < 3; e++) {
        double amp = e == 0 ? 1e-4 : (e == 1 ? 1e-2 : 100.0);
        sjk_record_params p = params(128, 4, 4, SJK_BALANCE_SJ);
        fill(128, SJK_SYNTH_OUTLIER, amp, 31);
        CHECK(encode(&p, g_rec) == SJK_OK);
        CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, sjk_record_nbytes(&p)) == SJK_OK);
        double sk = sjk_snr_db(g_k, g_yk, G * 128), sv = sjk_snr_db(g_v, g_yv, G * 128);
        CHECKF(sk > 17 && sv > 17, "amp %g: K %.2f V %.2f dB", amp, sk, sv);
    }
}

TEST(test_record_decode_matches_reference_decoder_every_path)
{
    for (uint32_t D = 64; D <= 512; D *= 2)
        for (size_t pi0 = 0; pi0 < N_PAIRS; pi0++) {
            const unsigned bk = k_pairs[pi0][0], bv = k_pairs[pi0][1];
                sjk_record_params p = params(D, bk, bv, SJK_BALANCE_SJ);
                fill(D, SJK_SYNTH_OUTLIER, 1.0, 7 * D + bk + bv);
                CHECK(encode(&p, g_rec) == SJK_OK);
                const size_t n = sjk_record_nbytes(&p);
                CHECK(sjk_record_decode_ref(&p, g_yk, g_yv, g_rec, n) == SJK_OK);
                CHECK(sjk_record_decode(&p, g_zk, g_zv, g_rec, n) == SJK_OK);
                CHECKF(!memcmp(g_yk, g_zk, G * D * 4) && !memcmp(g_yv, g_zv, G * D * 4),
                       "dispatched decode D=%u %u/%u", D, bk, bv);
                /* every kernel path, called directly */
                sjk_record_layout L;
                sjk_record_layout_init(&L, D, bk, bv);
                float ks[MAXD], kz[MAXD], kt[G], vc[MAXD];
                for (size_t d = 0; d < D; d++) {
                    ks[d] = sjk_record_f16_at(g_rec, L.off_kscale, d);
                    kz[d] = sjk_record_f16_at(g_rec, L.off_kzero, d);
                    vc[d] = sjk_record_f16_at(g_rec, L.off_vch, d);
                }
                for (size_t t = 0; t < G; t++) kt[t] = sjk_record_f16_at(g_rec, L.off_ktok, t);
                for (size_t pi = 0; pi < n_paths; pi++) {
                    memset(g_zk, 0, sizeof g_zk);
                    for (size_t d0 = 0; d0 < D; d0 += 16)
                        paths[pi]->decode_k16(g_zk + d0, D, g_rec + L.off_k + d0 * L.k_row_nbytes,
                                              L.k_row_nbytes, bk, ks + d0, kz + d0, kt);
                    for (size_t t = 0; t < G; t++)
                        paths[pi]->decode_v_row(g_zv + t * D, D, g_rec + L.off_v + t * L.v_row_nbytes, bv,
                                                sjk_record_f16_at(g_rec, L.off_vscale, t),
                                                sjk_record_f16_at(g_rec, L.off_vzero, t), vc);
                    CHECKF(!memcmp(g_yk, g_zk, G * D * 4) && !memcmp(g_yv, g_zv, G * D * 4),
                           "%s decode D=%u %u/%u", paths[pi]->name, D, bk, bv);
                }
            }
}

TEST(test_record_same_bytes_every_run_and_path)
{
    for (int m = 0; m < 3; m++)
        for (uint32_t D = 64; D <= 512; D *= 4) {
            sjk_record_params p = params(D, 3 + (unsigned)m * 2, m == 2 ? 8 : 2, (sjk_balance_mode)m); /* 3/2, 5/2, 7/8 */
            fill(D, SJK_SYNTH_OUTLIER, 0.3, 99 + D);
            const size_t n = sjk_record_nbytes(&p);
            CHECK(encode(&p, g_rec) == SJK_OK);
            CHECK(encode(&p, g_rec2) == SJK_OK);
            CHECK(!memcmp(g_rec, g_rec2, n));
            for (size_t pi = 0; pi < n_paths; pi++) {
                memset(g_rec2, 0xA5, n);
                CHECK(sjk_record_encode_body(&p, g_rec2, n, g_k, g_v, g_scr, sizeof g_scr, NULL, NULL,
                                             paths[pi]) == SJK_OK);
                CHECKF(!memcmp(g_rec, g_rec2, n), "mode %d D=%u path %s", m, D, paths[pi]->name);
            }
        }
}

static int fields_finite(const sjk_record_params *p, const uint8_t *rec)
{
    sjk_record_layout L;
    sjk_record_layout_init(&L, p->head_dim, p->bits_k, p->bits_v);
    for (size_t o = L.off_kscale; o < L.nbytes; o += 2)
        if ((sjk_rd_u16le(rec + o) & 0x7C00u) == 0x7C00u) return 0;
    return 1;
}

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

TEST(test_record_bad_input_never_stores_nan)
{
    const size_t D = 128;
    for (int m = 0; m < 3; m++)
        for (int kind = 0; kind < 6; kind++) {
            sjk_record_params p = params(D, 3, 3, (sjk_balance_mode)m);
            fill(D, SJK_SYNTH_GAUSSIAN, 1.0, 1000 + kind);
            if (kind == 0) { /* NaN and Inf sprinkled */
                for (size_t i = 0; i < G * D; i += 37) g_k[i] = NAN, g_v[i] = (i & 1) ? INFINITY : -INFINITY;
            } else if (kind == 1) { /* all NaN */
                for (size_t i = 0; i < G * D; i++) g_k[i] = g_v[i] = NAN;
            } else if (kind == 2) { /* denormals only */
                for (size_t i = 0; i < G * D; i++) g_k[i] = g_v[i] = 1e-41f * (float)(i % 7);
            } else if (kind == 3) { /* beyond fp16 range */
                for (size_t i = 0; i < G * D; i += 5) g_k[i] = 3e38f, g_v[i] = -1e30f;
            } else if (kind == 4) { /* one huge token among tiny ones */
                for (size_t i = 0; i < G * D; i++) g_k[i] *= 1e-6f, g_v[i] *= 1e-6f;
                for (size_t d = 0; d < D; d++) g_k[3 * D + d] = 6e4f, g_v[5 * D + d] = -6e4f;
            } else { /* one channel zero, one token constant */
                for (size_t t = 0; t < G; t++) g_k[t * D + 3] = 0, g_v[t * D + 3] = 0;
                for (size_t d = 0; d < D; d++) g_k[9 * D + d] = 2.5f, g_v[9 * D + d] = 2.5f;
            }
            CHECK(encode(&p, g_rec) == SJK_OK);
            CHECKF(fields_finite(&p, g_rec), "mode %d kind %d: a stored field is NaN/Inf", m, kind);
            CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, sjk_record_nbytes(&p)) == SJK_OK);
            CHECKF(all_finite(g_yk, G * D) && all_finite(g_yv, G * D), "mode %d kind %d: decoded non-finite", m, kind);
            if (kind == 1 || kind == 2) { /* everything sanitizes to 0 and decodes to 0 */
                int zero = 1;
                for (size_t i = 0; i < G * D; i++) zero &= g_yk[i] == 0 && g_yv[i] == 0;
                CHECKF(zero, "mode %d kind %d: not decoded as zeros", m, kind);
            }
        }
}

TEST(test_record_constant_and_zero_tiles_decode_exactly)
{
    const size_t D = 256;
    const float vals[] = {0.0f, 1.0f, -3.5f, 1000.0f, 0.001f};
    for (int m = 0; m < 3; m++)
        for (size_t c = 0; c < SJK_ARRAY_LEN(vals); c++) {
            sjk_record_params p = params(D, 2, 2, (sjk_balance_mode)m);
            for (size_t i = 0; i < G * D; i++) g_k[i] = g_v[i] = vals[c];
            CHECK(encode(&p, g_rec) == SJK_OK);
            CHECK(fields_finite(&p, g_rec));
            CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, sjk_record_nbytes(&p)) == SJK_OK);
            double worst = 0;
            for (size_t i = 0; i < G * D; i++)
                worst = fmax(worst, fmax(fabs(g_yk[i] - vals[c]), fabs(g_yv[i] - vals[c])));
            CHECKF(worst <= 2e-3 * fabs(vals[c]), "mode %d value %g: error %g", m, vals[c], worst);
        }
}

TEST(test_record_bad_params_name_the_field)
{
    const char *bad = NULL;
    sjk_record_params p = params(256, 4, 4, SJK_BALANCE_SJ);
    p.head_dim = 96;
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_ERR_PARAM && bad && !strcmp(bad, "head_dim"));
    CHECK(sjk_record_nbytes(&p) == 0 && sjk_record_scratch_nbytes(&p) == 0);
    CHECK(encode(&p, g_rec) == SJK_ERR_PARAM);
    p = params(256, 9, 4, SJK_BALANCE_SJ);
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_ERR_PARAM && !strcmp(bad, "bits_k"));
    p = params(256, 4, 9, SJK_BALANCE_SJ);
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_ERR_PARAM && !strcmp(bad, "bits_v"));
    p = params(256, 8, 5, SJK_BALANCE_SJ); /* a trellis body needs a tile of 2..4 bits */
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_OK);
    p.body = SJK_BODY_TRELLIS;
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_ERR_PARAM && !strcmp(bad, "body"));
    p.bits_v = 4;
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_OK);
    p = params(256, 4, 1, SJK_BALANCE_SJ);
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_ERR_PARAM && !strcmp(bad, "bits_v"));
    p = params(256, 4, 4, SJK_BALANCE_SJ);
    p.balance = 9;
    CHECK(sjk_record_params_validate(&p, &bad) == SJK_ERR_PARAM && !strcmp(bad, "balance"));
    CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, sizeof g_rec) == SJK_ERR_PARAM);
    p = params(256, 4, 4, SJK_BALANCE_SJ);
    fill(256, SJK_SYNTH_GAUSSIAN, 1, 3);
    const size_t n = sjk_record_nbytes(&p);
    CHECK(sjk_record_encode(&p, g_rec, n - 1, g_k, g_v, g_scr, sizeof g_scr) == SJK_ERR_BUFFER);
    CHECK(sjk_record_encode(&p, g_rec, n, g_k, g_v, g_scr, sjk_record_scratch_nbytes(&p) - 1) == SJK_ERR_BUFFER);
    CHECK(sjk_record_encode(&p, g_rec, n, NULL, g_v, g_scr, sizeof g_scr) == SJK_ERR_PARAM);
    CHECK(sjk_record_encode(&p, g_rec, n, g_k, g_v, g_scr, sizeof g_scr) == SJK_OK);
    CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec, n - 1) == SJK_ERR_BUFFER);
    CHECK(sjk_record_decode(&p, NULL, g_yv, g_rec, n) == SJK_ERR_PARAM);
    /* a record whose scale field holds NaN/Inf is corrupt, not decoded into NaNs */
    sjk_record_layout L;
    sjk_record_layout_init(&L, 256, 4, 4);
    memcpy(g_rec2, g_rec, n);
    sjk_wr_u16le(g_rec2 + L.off_vzero + 10, 0x7E00);
    CHECK(sjk_record_decode(&p, g_yk, g_yv, g_rec2, n) == SJK_ERR_CORRUPT);
    CHECK(sjk_record_decode_ref(&p, g_yk, g_yv, g_rec2, n) == SJK_ERR_CORRUPT);
}

/* Integer-only input (no libm), so the bytes are the same on every platform. */
static void fill_exact(size_t D, uint64_t seed)
{
    static const float cs[8] = {1, 0.5f, 8, 0.25f, 1, 2, 16, 0.125f}, ts[5] = {1, 4, 0.5f, 1, 0.25f};
    sjk_rng r;
    sjk_rng_seed(&r, seed);
    for (size_t t = 0; t < G; t++)
        for (size_t d = 0; d < D; d++) {
            float a = (float)((int32_t)(sjk_rng_u64(&r) >> 41) - (1 << 22)) * 0x1p-22f;
            float b = (float)((int32_t)(sjk_rng_u64(&r) >> 41) - (1 << 22)) * 0x1p-22f;
            g_k[t * D + d] = a * cs[d % 8] * ts[t % 5] + 0.25f * cs[(d + 3) % 8];
            g_v[t * D + d] = b * cs[(d * 5) % 8] * ts[(t + 2) % 5];
        }
}

/* FNV-1a over the records of every D and balancing mode for K widths lo..hi (V one bit
 * wider, the widest K with V at lo), each from its own deterministic tile. */
static uint64_t golden_records_hash(unsigned lo, unsigned hi)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t D = 64; D <= 512; D *= 2)
        for (int m = 0; m < 3; m++)
            for (unsigned bk = lo; bk <= hi; bk++) {
                unsigned bv = bk == hi ? lo : bk + 1;
                sjk_record_params p = params(D, bk, bv, (sjk_balance_mode)m);
                fill_exact(D, 31 * D + 7 * (uint64_t)m + bk);
                CHECK(encode(&p, g_rec) == SJK_OK);
                for (size_t i = 0; i < sjk_record_nbytes(&p); i++) h = (h ^ g_rec[i]) * 1099511628211ull;
            }
    return h;
}

TEST(test_record_golden_bytes_format_v1)
{
    /* Pins the bytes of record format v1 for every D, bit width and balancing mode. A
     * change here changes what every cache file holds: bump SJK_RECORD_FORMAT_VERSION and
     * docs/FORMAT.md, then update the hash (printed on failure). */
    const uint64_t h = golden_records_hash(2, 4);
    CHECKF(h == 0xc0adeaec4ba4b176ull, "record bytes hash %016llx", (unsigned long long)h);
}

TEST(test_record_golden_bytes_format_v2_wide_bodies)
{
    /* Pins the bytes of record format v2's scalar bodies above 4 bits (every D, width
     * and balancing mode); the v1 widths are pinned above and unchanged. */
    const uint64_t h = golden_records_hash(5, 8);
    CHECKF(h == 0xaab9f373e84f907cull, "record bytes hash %016llx", (unsigned long long)h);
}

TEST(test_record_wide_tile_beside_a_trellis_tile)
{
    /* 8/3t and 3/8t: the tile above 4 bits is the scalar body (the same bytes and fields
     * as 8/3s), the other the trellis; both decoders agree bit for bit; every kernel path
     * seals the same bytes. */
    for (uint32_t D = 64; D <= 256; D *= 4)
        for (int side = 0; side < 2; side++) {
            const unsigned bk = side ? 3 : 8, bv = side ? 8 : 3;
            sjk_record_params ps = params(D, bk, bv, SJK_BALANCE_SJ), pt = ps;
            pt.body = SJK_BODY_TRELLIS;
            fill(D, SJK_SYNTH_OUTLIER, 1.0, 77 + D + (uint64_t)side);
            const size_t n = sjk_record_nbytes(&pt);
            CHECK(n == sjk_record_nbytes(&ps));
            CHECK(encode(&ps, g_rec) == SJK_OK);
            CHECK(encode(&pt, g_rec2) == SJK_OK);
            sjk_record_layout L;
            sjk_record_layout_init(&L, D, bk, bv);
            /* the wide tile: payload and its row fields identical to the scalar record */
            if (!side) {
                CHECK(!memcmp(g_rec + L.off_k, g_rec2 + L.off_k, L.off_v - L.off_k));
                CHECK(!memcmp(g_rec + L.off_kscale, g_rec2 + L.off_kscale, L.off_vch - L.off_kscale));
                CHECK(memcmp(g_rec + L.off_v, g_rec2 + L.off_v, L.off_kscale - L.off_v) != 0);
            } else {
                CHECK(!memcmp(g_rec + L.off_v, g_rec2 + L.off_v, L.off_kscale - L.off_v));
                CHECK(!memcmp(g_rec + L.off_vch, g_rec2 + L.off_vch, L.nbytes - L.off_vch));
                CHECK(memcmp(g_rec + L.off_k, g_rec2 + L.off_k, L.off_v - L.off_k) != 0);
            }
            CHECK(sjk_record_decode_ref(&pt, g_yk, g_yv, g_rec2, n) == SJK_OK);
            CHECK(sjk_record_decode(&pt, g_zk, g_zv, g_rec2, n) == SJK_OK);
            CHECK(!memcmp(g_yk, g_zk, G * D * 4) && !memcmp(g_yv, g_zv, G * D * 4));
            double s8 = side ? sjk_snr_db(g_v, g_yv, G * D) : sjk_snr_db(g_k, g_yk, G * D);
            double s3 = side ? sjk_snr_db(g_k, g_yk, G * D) : sjk_snr_db(g_v, g_yv, G * D);
            CHECKF(s8 > 40 && s3 > 11 && s3 < 20, "D=%u side %d: wide %.2f dB, trellis %.2f dB", D, side, s8, s3);
            /* the scalar decode of the same wide tile gives the same values */
            CHECK(sjk_record_decode_ref(&ps, g_zk, g_zv, g_rec, n) == SJK_OK);
            CHECK(side ? !memcmp(g_yv, g_zv, G * D * 4) : !memcmp(g_yk, g_zk, G * D * 4));
            for (size_t pi = 0; pi < n_paths; pi++) {
                memset(g_rec, 0xA5, n);
                CHECK(sjk_record_encode_on(&pt, g_rec, n, g_k, g_v, g_scr, sizeof g_scr, paths[pi]) == SJK_OK);
                CHECKF(!memcmp(g_rec, g_rec2, n), "D=%u side %d path %s", D, side, paths[pi]->name);
            }
        }
}

TEST(test_record_scratch_alignment_does_not_matter)
{
    sjk_record_params p = params(256, 4, 3, SJK_BALANCE_SJ);
    fill(256, SJK_SYNTH_OUTLIER, 1, 8);
    const size_t n = sjk_record_nbytes(&p), s = sjk_record_scratch_nbytes(&p);
    CHECK(sjk_record_encode(&p, g_rec, n, g_k, g_v, g_scr, s) == SJK_OK);
    CHECK(sjk_record_encode(&p, g_rec2, n, g_k, g_v, g_scr + 4, s) == SJK_OK);
    CHECK(!memcmp(g_rec, g_rec2, n));
}

/* The tile observer (sjk_record_set_tile_observer) sees a record's two tiles as the
 * balancing gets them: K channel-major and V token-major, the finite input values as they
 * are; and nothing once it is cleared. */
typedef struct seen {
    int calls;
    size_t D, n_tok;
    float kt[G * MAXD], vt[G * MAXD];
} seen;
static seen g_seen;

static void observe_tiles(void *ctx, const float *kt, const float *vt, size_t D, size_t Gt)
{
    seen *s = ctx;
    s->calls++;
    s->D = D;
    s->n_tok = Gt;
    memcpy(s->kt, kt, D * Gt * sizeof *kt);
    memcpy(s->vt, vt, D * Gt * sizeof *vt);
}

TEST(test_record_tile_observer_sees_the_tiles_before_balancing)
{
    const size_t D = 128;
    for (int trellis = 0; trellis < 2; trellis++) {
        sjk_record_params p = params(D, 4, 3, SJK_BALANCE_SJ);
        if (trellis) p.body = SJK_BODY_TRELLIS;
        fill(D, SJK_SYNTH_OUTLIER, 1, 21);
        memset(&g_seen, 0, sizeof g_seen);
        sjk_record_set_tile_observer(observe_tiles, &g_seen);
        CHECK(encode(&p, g_rec) == SJK_OK);
        sjk_record_set_tile_observer(NULL, NULL);
        CHECK(encode(&p, g_rec2) == SJK_OK); /* not observed */
        CHECKF(g_seen.calls == 1 && g_seen.D == D && g_seen.n_tok == G, "body %d: %d calls, %zu x %zu", trellis,
               g_seen.calls, g_seen.D, g_seen.n_tok);
        CHECK(!memcmp(g_rec, g_rec2, sjk_record_nbytes(&p))); /* observing changes nothing */
        int same = 1;
        for (size_t t = 0; t < G; t++)
            for (size_t d = 0; d < D; d++)
                same &= g_seen.kt[d * G + t] == g_k[t * D + d] && g_seen.vt[t * D + d] == g_v[t * D + d];
        CHECKF(same, "body %d: the observed tiles are not the input rows", trellis);
    }
}

int main(void)
{
    paths[n_paths++] = sjk_codec_kernels_ref();
    if (sjk_codec_kernels_avx2()) paths[n_paths++] = sjk_codec_kernels_avx2();
    if (sjk_codec_kernels_avx512()) paths[n_paths++] = sjk_codec_kernels_avx512();
    RUN(test_record_sizes_every_dim_and_bits);
    RUN(test_payload_bit_order_is_pinned);
    RUN(test_record_round_trip_error_bounds_per_bits);
    RUN(test_record_balanced_outlier_close_to_gaussian);
    RUN(test_record_small_magnitude_keeps_precision);
    RUN(test_record_decode_matches_reference_decoder_every_path);
    RUN(test_record_same_bytes_every_run_and_path);
    RUN(test_record_bad_input_never_stores_nan);
    RUN(test_record_constant_and_zero_tiles_decode_exactly);
    RUN(test_record_bad_params_name_the_field);
    RUN(test_record_golden_bytes_format_v2_wide_bodies);
    RUN(test_record_wide_tile_beside_a_trellis_tile);
    RUN(test_record_scratch_alignment_does_not_matter);
    RUN(test_record_golden_bytes_format_v1);
    RUN(test_record_tile_observer_sees_the_tiles_before_balancing);
    return test_summary();
}
