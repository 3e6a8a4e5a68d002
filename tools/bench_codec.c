/* bench_codec.c — `sjkvarn bench codec`: quality and speed of every value format and every
 * record body on the same data.
 *
 * Data: N groups of 128 tokens of K and V for one KV head of head_dim D, either i.i.d.
 * Gaussian or the synthetic outlier generator (src/common/synth.h: outlier channels,
 * per-token magnitude swings, biased key channels), in the model's basis. Record bodies
 * see the rows rotated (Walsh-Hadamard, D <= 256: one D block, D = 512: two 256 halves) as
 * the cache stores them; value formats see them as they are, and a "+rot" row applies
 * llama.cpp's attention rotation in front of a ggml format. SNR is measured in the model's
 * basis (the rotation is orthonormal), over K and V together, and for K and V apart.
 *
 * Reported per row: bits per value including every scale and zero, SNR in dB, the gap to
 * the Gaussian rate-distortion bound (6.02 dB per bit of bits_per_value), encode and
 * decode throughput in values per second on one core (per-thread CPU time, best of
 * several timed passes over the data), and
 * for bodies the seal time per record: rotation of its 256 rows + balancing + quantization
 * + packing. encode_values_per_s of a body excludes the rotation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/synth.h"
#include "sjkvarn.h"

int sjk_bench_codec(int argc, char **argv);

typedef struct opts {
    int json, quick;
    int data_mask; /* 1 gaussian, 2 outlier */
    size_t D, n_groups;
    double amp, min_time;
    int formats, bodies;
} opts;

/* Per-thread CPU time: a single-threaded benchmark on a shared machine is not inflated
 * by time spent descheduled (on an idle machine it equals wall time). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct row {
    char name[48];
    const char *data;
    double bits, snr, snr_k, snr_v, enc_vps, dec_vps, seal_ms;
    int is_body;
    unsigned bits_k, bits_v;
    const char *balance, *body;
} row;

static void print_row(const opts *o, const row *r, int first)
{
    double gap = 6.02 * r->bits - r->snr;
    if (o->json) {
        printf("%s  {\"format\": \"%s\", \"data\": \"%s\", \"head_dim\": %zu, \"bits_per_value\": %.5f, "
               "\"snr_db\": %.3f, \"snr_k_db\": %.3f, \"snr_v_db\": %.3f, \"rd_gap_db\": %.3f, "
               "\"encode_values_per_s\": %.4g, \"decode_values_per_s\": %.4g",
               first ? "" : ",\n", r->name, r->data, o->D, r->bits, r->snr, r->snr_k, r->snr_v, gap,
               r->enc_vps, r->dec_vps);
        if (r->is_body)
            printf(", \"seal_ms_per_record\": %.4f, \"bits_k\": %u, \"bits_v\": %u, \"body\": \"%s\", "
                   "\"balance\": \"%s\"", r->seal_ms, r->bits_k, r->bits_v, r->body, r->balance);
        printf("}");
    } else {
        printf("%-22s %-8s %7.4f %7.2f %7.2f %7.2f %7.2f %9.1f %9.1f", r->name, r->data, r->bits, r->snr,
               r->snr_k, r->snr_v, gap, r->enc_vps / 1e6, r->dec_vps / 1e6);
        if (r->is_body) printf(" %8.3f", r->seal_ms);
        printf("\n");
    }
}

/* Rotation of every row of x[G][D] as the cache does it. */
static void rotate_rows(float *x, size_t n_rows, size_t D)
{
    sjk_hadamard(x, n_rows * D, D <= 256 ? D : 256);
}

static double snr2(const float *xk, const float *yk, const float *xv, const float *yv, size_t n)
{
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        double a = (double)xk[i] - yk[i], b = (double)xv[i] - yv[i];
        s += (double)xk[i] * xk[i] + (double)xv[i] * xv[i];
        e += a * a + b * b;
    }
    return e > 0 ? 10 * log10(s / e) : 200.0;
}

/* Best-of timing: runs fn over all groups `reps` times or until min_time, returns the
 * fastest pass in seconds. */
#define TIME_BEST(o, best, body)                                     \
    do {                                                             \
        double t_start_ = now_s();                                   \
        best = 1e30;                                                 \
        for (int rep_ = 0; rep_ < 50; rep_++) {                      \
            double t0_ = now_s();                                    \
            body;                                                    \
            double dt_ = now_s() - t0_;                              \
            if (dt_ < best) best = dt_;                              \
            if (rep_ >= 2 && now_s() - t_start_ > (o)->min_time) break; \
        }                                                            \
    } while (0)

static int bench_formats(const opts *o, const char *data, const float *k, const float *v, int *first)
{
    const size_t D = o->D, G = SJK_GROUP, NG = o->n_groups, nval = NG * G * D;
    float *yk = malloc(nval * sizeof *yk), *yv = malloc(nval * sizeof *yv);
    float *rk = malloc(nval * sizeof *rk), *rv = malloc(nval * sizeof *rv);
    uint8_t *buf = malloc(2 * nval * 4 + 64);
    if (!yk || !yv || !rk || !rv || !buf) {
        fprintf(stderr, "bench codec: out of memory\n");
        free(yk), free(yv), free(rk), free(rv), free(buf);
        return 1;
    }
    for (unsigned f = 0; f < SJK_FMT_COUNT; f++) {
        const sjk_format_info *fi = sjk_format_get((sjk_format)f);
        if (!fi || !fi->encode || !fi->decode || D % fi->block_values) continue;
        for (int rot = 0; rot < 2; rot++) {
            size_t bk = rot ? sjk_format_rotation_block((sjk_format)f, D, 0) : 0;
            size_t bv = rot ? sjk_format_rotation_block((sjk_format)f, D, 1) : 0;
            /* the staging format expects rows already in the cache's Hadamard basis */
            if (f == SJK_FMT_TQ6_0_STAGE) {
                if (!rot) continue;
                bk = bv = D <= 256 ? D : 256;
            }
            if (rot && (!bk || !bv)) continue;
            const float *xk = k, *xv = v;
            if (rot) {
                memcpy(rk, k, nval * sizeof *rk);
                memcpy(rv, v, nval * sizeof *rv);
                sjk_hadamard(rk, nval, bk);
                sjk_hadamard(rv, nval, bv);
                xk = rk, xv = rv;
            }
            const size_t rb = sjk_format_row_nbytes((sjk_format)f, D), nrows = NG * G;
            uint8_t *ek = buf, *ev = buf + nrows * rb;
            double te, td;
            TIME_BEST(o, te, {
                for (size_t r = 0; r < nrows; r++) {
                    fi->encode(ek + r * rb, xk + r * D, D);
                    fi->encode(ev + r * rb, xv + r * D, D);
                }
            });
            TIME_BEST(o, td, {
                for (size_t r = 0; r < nrows; r++) {
                    fi->decode(yk + r * D, ek + r * rb, D);
                    fi->decode(yv + r * D, ev + r * rb, D);
                }
            });
            if (rot) {
                sjk_hadamard(yk, nval, bk);
                sjk_hadamard(yv, nval, bv);
            }
            row r;
            memset(&r, 0, sizeof r);
            snprintf(r.name, sizeof r.name, "%s%s", fi->name, rot ? "+rot" : "");
            r.data = data;
            r.bits = fi->bits_per_value;
            r.snr = snr2(k, yk, v, yv, nval);
            r.snr_k = sjk_snr_db(k, yk, nval);
            r.snr_v = sjk_snr_db(v, yv, nval);
            r.enc_vps = 2.0 * (double)nval / te;
            r.dec_vps = 2.0 * (double)nval / td;
            print_row(o, &r, *first);
            *first = 0;
        }
    }
    free(yk), free(yv), free(rk), free(rv), free(buf);
    return 0;
}

static int bench_bodies(const opts *o, const char *data, const float *k, const float *v, int *first)
{
    const size_t D = o->D, G = SJK_GROUP, NG = o->n_groups, nval = NG * G * D, gv = G * D;
    static const unsigned combos_full[][2] = {{4, 4}, {3, 3}, {3, 2}, {2, 2}, {4, 3}, {4, 2},
                                              {3, 4}, {2, 3}, {2, 4}};
    const size_t n_combos = o->quick ? 4 : 9;
    static const struct { sjk_balance_mode m; const char *name; } bals[] = {
        {SJK_BALANCE_SJ, "sj"}, {SJK_BALANCE_REFERENCE, "reference"}, {SJK_BALANCE_OFF, "off"}};
    static const struct { sjk_body b; const char *name, *suffix; } bodies[] = {
        {SJK_BODY_SCALAR, "scalar", ""},
        {SJK_BODY_TRELLIS_I8, "trellis", "t"}, /* the `t` body since record format 4: int8-grid tables */
        {SJK_BODY_TRELLIS_CHANNEL, "trellis_channel", "tc"},
        {SJK_BODY_TRELLIS_REAL_I8, "trellis_real", "tr"},
        {SJK_BODY_TRELLIS_S128, "trellis_s128", "ts"}}; /* record format 5: the 128-entry tables */
    const size_t n_bodies = sizeof bodies / sizeof bodies[0];

    float *rk = malloc(nval * sizeof *rk), *rv = malloc(nval * sizeof *rv);
    float *yk = malloc(nval * sizeof *yk), *yv = malloc(nval * sizeof *yv);
    float *sk = malloc(gv * sizeof *sk), *sv = malloc(gv * sizeof *sv);
    sjk_record_params p0 = sjk_record_params_default();
    p0.head_dim = (uint32_t)D;
    p0.bits_k = p0.bits_v = 4;
    /* Record and scratch sizes differ per body and bit width (the channel-axis trellis
     * needs more scratch than the token-axis one): size both for the largest case the
     * loop below visits. */
    size_t rec_max = 0, scr_n = 0;
    for (size_t bo = 0; bo < n_bodies; bo++)
        for (size_t c = 0; c < n_combos; c++) {
            sjk_record_params p = p0;
            p.bits_k = (uint8_t)combos_full[c][0];
            p.bits_v = (uint8_t)combos_full[c][1];
            p.body = (uint8_t)bodies[bo].b;
            size_t rn = sjk_record_nbytes(&p), sn = sjk_record_scratch_nbytes(&p);
            if (rn > rec_max) rec_max = rn;
            if (sn > scr_n) scr_n = sn;
        }
    uint8_t *recs = malloc(NG * rec_max), *scr = malloc(scr_n);
    int rc = 1;
    if (!rk || !rv || !yk || !yv || !sk || !sv || !recs || !scr) {
        fprintf(stderr, "bench codec: out of memory\n");
        goto done;
    }
    memcpy(rk, k, nval * sizeof *rk);
    memcpy(rv, v, nval * sizeof *rv);
    rotate_rows(rk, NG * G, D);
    rotate_rows(rv, NG * G, D);

    for (size_t bo = 0; bo < n_bodies; bo++)
        for (size_t c = 0; c < n_combos; c++)
            for (size_t b = 0; b < 3; b++) {
                sjk_record_params p = p0;
                p.bits_k = (uint8_t)combos_full[c][0];
                p.bits_v = (uint8_t)combos_full[c][1];
                p.balance = (uint8_t)bals[b].m;
                p.body = (uint8_t)bodies[bo].b;
                const size_t rn = sjk_record_nbytes(&p);
                sjk_status st = sjk_record_encode(&p, recs, rn, rk, rv, scr, scr_n);
                if (st == SJK_ERR_UNSUPPORTED) continue; /* a body this build lacks */
                if (st != SJK_OK) {
                    fprintf(stderr, "bench codec: encode of sj%u/%u%s failed: %s\n", p.bits_k, p.bits_v,
                            bodies[bo].suffix, sjk_status_str(st));
                    goto done;
                }
                double te, td, ts;
                TIME_BEST(o, te, {
                    for (size_t g = 0; g < NG; g++)
                        sjk_record_encode(&p, recs + g * rn, rn, rk + g * gv, rv + g * gv, scr, scr_n);
                });
                /* seal = rotation of the staged rows + encode, per record */
                TIME_BEST(o, ts, {
                    for (size_t g = 0; g < NG; g++) {
                        memcpy(sk, k + g * gv, gv * sizeof *sk);
                        memcpy(sv, v + g * gv, gv * sizeof *sv);
                        rotate_rows(sk, G, D);
                        rotate_rows(sv, G, D);
                        sjk_record_encode(&p, recs + g * rn, rn, sk, sv, scr, scr_n);
                    }
                });
                st = SJK_OK;
                TIME_BEST(o, td, {
                    for (size_t g = 0; g < NG; g++)
                        st |= sjk_record_decode(&p, yk + g * gv, yv + g * gv, recs + g * rn, rn);
                });
                if (st != SJK_OK) {
                    fprintf(stderr, "bench codec: decode failed\n");
                    goto done;
                }
                rotate_rows(yk, NG * G, D);
                rotate_rows(yv, NG * G, D);
                row r;
                memset(&r, 0, sizeof r);
                snprintf(r.name, sizeof r.name, "sj%u/%u%s-%s", p.bits_k, p.bits_v, bodies[bo].suffix,
                         bals[b].name);
                r.data = data;
                r.bits = 8.0 * (double)rn / (2.0 * (double)gv);
                r.snr = snr2(k, yk, v, yv, nval);
                r.snr_k = sjk_snr_db(k, yk, nval);
                r.snr_v = sjk_snr_db(v, yv, nval);
                r.enc_vps = 2.0 * (double)nval / te;
                r.dec_vps = 2.0 * (double)nval / td;
                r.seal_ms = 1e3 * ts / (double)NG;
                r.is_body = 1;
                r.bits_k = p.bits_k, r.bits_v = p.bits_v;
                r.balance = bals[b].name;
                r.body = bodies[bo].name;
                print_row(o, &r, *first);
                *first = 0;
            }
    rc = 0;
done:
    free(rk), free(rv), free(yk), free(yv), free(sk), free(sv), free(recs), free(scr);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sjkvarn bench codec [--json] [--quick] [--data gaussian|outlier|all]\n"
            "                           [--dim D] [--groups N] [--amp A] [--formats-only|--bodies-only]\n"
            "  --json          one JSON object per row (a JSON array)\n"
            "  --quick         4 record groups, 4 bit combinations, short timings\n"
            "  --data          i.i.d. Gaussian, the synthetic outlier generator, or both (default)\n"
            "  --dim D         head dim 64, 128, 256 (default) or 512\n"
            "  --groups N      128-token groups of data (default 32)\n"
            "  --amp A         overall magnitude of the data (default 1)\n");
}

int sjk_bench_codec(int argc, char **argv)
{
    opts o = {0, 0, 3, 256, 32, 1.0, 0.3, 1, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) o.json = 1;
        else if (!strcmp(a, "--quick")) o.quick = 1, o.n_groups = 4, o.min_time = 0.02;
        else if (!strcmp(a, "--formats-only")) o.bodies = 0;
        else if (!strcmp(a, "--bodies-only")) o.formats = 0;
        else if (!strcmp(a, "--data") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "gaussian")) o.data_mask = 1;
            else if (!strcmp(d, "outlier")) o.data_mask = 2;
            else if (!strcmp(d, "all")) o.data_mask = 3;
            else { usage(stderr); return 2; }
        } else if (!strcmp(a, "--dim") && i + 1 < argc) o.D = (size_t)atoi(argv[++i]);
        else if (!strcmp(a, "--groups") && i + 1 < argc) o.n_groups = (size_t)atoi(argv[++i]);
        else if (!strcmp(a, "--amp") && i + 1 < argc) o.amp = atof(argv[++i]);
        else if (!strcmp(a, "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if ((o.D != 64 && o.D != 128 && o.D != 256 && o.D != 512) || o.n_groups < 1 || o.n_groups > 4096 ||
        !(o.amp > 0)) {
        fprintf(stderr, "sjkvarn bench codec: bad --dim, --groups or --amp\n");
        return 2;
    }
    const size_t G = SJK_GROUP, nval = o.n_groups * G * o.D;
    float *k = malloc(nval * sizeof *k), *v = malloc(nval * sizeof *v);
    if (!k || !v) return 1;
    if (o.json) printf("[\n");
    else
        printf("%-22s %-8s %7s %7s %7s %7s %7s %9s %9s %8s\n", "format", "data", "bits/v", "SNR",
               "SNR K", "SNR V", "RDgap", "enc Mv/s", "dec Mv/s", "seal ms");
    int first = 1, rc = 0;
    for (int kind = 0; kind < 2 && !rc; kind++) {
        if (!(o.data_mask & (1 << kind))) continue;
        const char *name = kind ? "outlier" : "gaussian";
        sjk_rng r;
        sjk_rng_seed(&r, 20261130);
        for (size_t g = 0; g < o.n_groups; g++) {
            sjk_synth_group(k + g * G * o.D, G, o.D, (sjk_synth_kind)kind, 0, o.amp, 7, &r);
            sjk_synth_group(v + g * G * o.D, G, o.D, (sjk_synth_kind)kind, 1, o.amp, 7, &r);
        }
        if (o.formats) rc |= bench_formats(&o, name, k, v, &first);
        if (o.bodies && !rc) rc |= bench_bodies(&o, name, k, v, &first);
    }
    if (o.json) printf("\n]\n");
    free(k), free(v);
    return rc;
}
