/* format_turbo_tables.c — constant tables of the TurboQuant-family value formats.
 *
 * Where the values come from: JakeATX/llamAmpere (mirror Minerve-AI/llamAmpere),
 * ggml/src/ggml-turbo-quant.c and ggml/src/ggml-common.h, as restated value by value in
 * docs/BACKGROUND.md, "TurboQuant formats" (sign masks and codebooks).
 * They are data needed for bit compatibility with that fork, not code: the positive
 * halves and the positive midpoints are the fork's numbers to 6 decimals; the negative
 * halves are their mirror, and 0 is the middle midpoint. The tq5_0 table is not a plain
 * Gaussian Lloyd-Max table (our own Lloyd-Max differs by ~1e-4 relative), so none of
 * these is regenerated: they are copied as data. Each codebook quantizes N(0, 1/128).
 *
 * Sign masks: bit e of word e/32 set <=> sign[e] = -1 (the forks generate them from random seed 42);
 * signs1 has 60 negatives, signs2 has 70 (tests/test_formats.c checks both). Checked
 * against the fork's float sign tables (turbo_cpu_s1/s2) at commit cee74b6d, whose CPU
 * reference also fixes the arithmetic format_turbo.c follows (reciprocal-multiply
 * normalisation, sequential fp32 sums, tq5_0 stored sign-magnitude; an older commit,
 * 07793a97, stored tq5_0 as plain code bits).
 */
#include "codec/format.h"

const uint32_t sjk_rht_signs1[4] = { 0xE46A0359u, 0x42F85949u, 0xA4C63BBBu, 0x49F250A9u };
const uint32_t sjk_rht_signs2[4] = { 0x16ACEE90u, 0x3F628FDCu, 0xB7A5357Au, 0xBEA56562u };

/* Codebooks: ascending, 2^bits entries; midpoints: the 2^bits - 1 decision thresholds
 * (code = number of midpoints <= r). */
const float sjk_turbo3_centroids[8] = {
    -0.190207f, -0.118786f, -0.066822f, -0.021663f, 0.021663f, 0.066822f, 0.118786f,
    0.190207f,
};
const float sjk_turbo3_midpoints[7] = {
    -0.154496f, -0.092804f, -0.044243f, 0.0f, 0.044243f, 0.092804f, 0.154496f,
};
const float sjk_turbo4_centroids[16] = {
    -0.241529f, -0.182877f, -0.143016f, -0.111036f, -0.083292f, -0.058050f, -0.034299f,
    -0.011349f, 0.011349f, 0.034299f, 0.058050f, 0.083292f, 0.111036f, 0.143016f,
    0.182877f, 0.241529f,
};
const float sjk_turbo4_midpoints[15] = {
    -0.212203f, -0.162947f, -0.127026f, -0.097164f, -0.070671f, -0.046174f, -0.022824f,
    0.0f, 0.022824f, 0.046174f, 0.070671f, 0.097164f, 0.127026f, 0.162947f, 0.212203f,
};
const float sjk_tq6_centroids[64] = {
    -0.330935f, -0.286417f, -0.257865f, -0.236198f, -0.218435f, -0.203203f, -0.189753f,
    -0.177626f, -0.166522f, -0.156230f, -0.146600f, -0.137517f, -0.128895f, -0.120663f,
    -0.112765f, -0.105157f, -0.097801f, -0.090663f, -0.083717f, -0.076940f, -0.070310f,
    -0.063809f, -0.057422f, -0.051133f, -0.044929f, -0.038798f, -0.032729f, -0.026710f,
    -0.020733f, -0.014787f, -0.008863f, -0.002953f, 0.002953f, 0.008863f, 0.014787f,
    0.020733f, 0.026710f, 0.032729f, 0.038798f, 0.044929f, 0.051133f, 0.057422f,
    0.063809f, 0.070310f, 0.076940f, 0.083717f, 0.090663f, 0.097801f, 0.105157f,
    0.112765f, 0.120663f, 0.128895f, 0.137517f, 0.146600f, 0.156230f, 0.166522f,
    0.177626f, 0.189753f, 0.203203f, 0.218435f, 0.236198f, 0.257865f, 0.286417f,
    0.330935f,
};
const float sjk_tq6_midpoints[63] = {
    -0.308676f, -0.272141f, -0.247031f, -0.227316f, -0.210819f, -0.196478f, -0.183690f,
    -0.172074f, -0.161376f, -0.151415f, -0.142059f, -0.133206f, -0.124779f, -0.116714f,
    -0.108961f, -0.101479f, -0.094232f, -0.087190f, -0.080329f, -0.073625f, -0.067060f,
    -0.060616f, -0.054277f, -0.048031f, -0.041864f, -0.035763f, -0.029719f, -0.023722f,
    -0.017760f, -0.011825f, -0.005908f, 0.0f, 0.005908f, 0.011825f, 0.017760f, 0.023722f,
    0.029719f, 0.035763f, 0.041864f, 0.048031f, 0.054277f, 0.060616f, 0.067060f,
    0.073625f, 0.080329f, 0.087190f, 0.094232f, 0.101479f, 0.108961f, 0.116714f,
    0.124779f, 0.133206f, 0.142059f, 0.151415f, 0.161376f, 0.172074f, 0.183690f,
    0.196478f, 0.210819f, 0.227316f, 0.247031f, 0.272141f, 0.308676f,
};
const float sjk_tq5_centroids[32] = {
    -0.288236f, -0.237892f, -0.204892f, -0.179348f, -0.158003f, -0.139353f, -0.122569f,
    -0.107141f, -0.092730f, -0.079097f, -0.066064f, -0.053491f, -0.041269f, -0.029304f,
    -0.017515f, -0.005827f, 0.005827f, 0.017515f, 0.029304f, 0.041269f, 0.053491f,
    0.066064f, 0.079097f, 0.092730f, 0.107141f, 0.122569f, 0.139353f, 0.158003f,
    0.179348f, 0.204892f, 0.237892f, 0.288236f,
};
const float sjk_tq5_midpoints[31] = {
    -0.263064f, -0.221392f, -0.192120f, -0.168675f, -0.148678f, -0.130961f, -0.114855f,
    -0.099935f, -0.085914f, -0.072580f, -0.059778f, -0.047380f, -0.035287f, -0.023410f,
    -0.011671f, 0.0f, 0.011671f, 0.023410f, 0.035287f, 0.047380f, 0.059778f, 0.072580f,
    0.085914f, 0.099935f, 0.114855f, 0.130961f, 0.148678f, 0.168675f, 0.192120f,
    0.221392f, 0.263064f,
};
