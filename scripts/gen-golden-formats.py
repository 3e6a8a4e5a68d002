#!/usr/bin/env python3
"""gen-golden-formats.py — golden vectors for the llama.cpp value formats.

Writes tests/data/golden_formats.txt: deterministic fp32 inputs (Gaussian blocks and the
edge cases that expose each rounding rule) and, for every ggml format, the bytes that the
PyPI `gguf` package's numpy reference quantizers (gguf/quants.py) produce, plus a hash of
what its dequantizers give back. tests/test_formats_golden.c re-encodes every input with
libsjkvarn and demands the same bytes, and decodes the golden bytes and demands the same
floats. Python is only this test-data generator; it is never in the product path.

Regenerate (the header of the output repeats this):
    python3 -m venv /tmp/ggufenv && /tmp/ggufenv/bin/pip install gguf numpy
    /tmp/ggufenv/bin/python scripts/gen-golden-formats.py > tests/data/golden_formats.txt

File format (text, one record per line, '#' starts a comment):
    case <name> <n>              a new input of n values (n a multiple of 32)
    x <hex>                      the n inputs, each the 8 hex digits of its fp32 bits
    <format> <hex> <fnv64>       gguf's bytes for that input, then FNV-1a 64 (hex) of the
                                 little-endian fp32 bits of gguf's dequantized values
Formats: f16 bf16 q8_0 q5_1 q5_0 q4_1 q4_0. Inputs stay inside every format's finite
range (the quantized formats' handling of NaN/Inf and out-of-range blocks is ours, see
docs/FORMAT.md, and is tested in tests/test_formats.c). The f16 and bf16 cases also
cover random fp32 bit patterns and bf16 NaN.

Checked against the C reference rules (docs/BACKGROUND.md, "ggml block formats"): gguf 0.19.0's
quantizers follow ggml-quants.c's *_ref functions, including roundf (ties away from zero,
via np_roundf) for q8_0 - the x86 SIMD quantize_row_q8_0 would round ties to even - and
the first-max rule (argmax returns the first index). Known differences, both only the sign
of a zero field: a -0.0 block minimum in q4_1/q5_1, and all-zero q4_0/q5_0 blocks that
start with -0.0 (see the negative_zeros case). f16 NaN is left out: numpy keeps a
signalling NaN signalling (0x7F800001 -> 0x7C01) where F16C, which ggml uses on x86, and
libsjkvarn set the quiet bit (-> 0x7E00); ggml's portable software converter returns
0x7E00 for every NaN. Inputs never contain NaN for the quantized formats (undefined in
llama.cpp; defined by libsjkvarn, docs/FORMAT.md).
"""
import sys
import warnings

import numpy as np
import importlib.metadata

import gguf  # noqa: F401  (the version is read from its metadata)
from gguf import quants
from gguf.constants import GGMLQuantizationType as T

QFMTS = [("q8_0", T.Q8_0), ("q5_1", T.Q5_1), ("q5_0", T.Q5_0), ("q4_1", T.Q4_1), ("q4_0", T.Q4_0)]


def fnv64(b: bytes) -> int:
    h = 0xCBF29CE484222325
    for c in b:
        h ^= c
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def f32(a):
    return np.asarray(a, dtype=np.float32)


def cases():
    rng = np.random.default_rng(20261130)
    out = []
    out.append(("zeros", f32(np.zeros(64)), "all"))
    neg0 = np.zeros(32, dtype=np.float32)
    neg0[::3] = -0.0
    # Signed zeros are where gguf-py and the C reference part ways: for q4_1/q5_1 numpy's
    # min() may return +0.0 where C's sequential 'if (v < min)' scan keeps the first zero
    # (-0.0); for q4_0/q5_0 an all-zero block keeps C's initial max = +0.0 (so d = -0.0)
    # while argmax picks element 0 (-0.0, so d = +0.0). Only the sign bit of a zero scale
    # differs; those formats are left out here and tests/test_formats.c pins the C rule.
    out.append(("negative_zeros", neg0, "f16 bf16 q8_0"))
    for i, s in enumerate([1.0, 1e-3, 37.5, 1e3]):
        out.append((f"gauss_{i}", f32(rng.standard_normal(256) * s), "all"))
    out.append(("uniform", f32(rng.uniform(-3, 5, 256)), "all"))
    out.append(("constant", f32(np.full(64, 0.7314)), "all"))
    out.append(("constant_neg", f32(np.full(32, -2.5)), "all"))
    # ties: grids of k/2 (and k/4) with block maxima that make d (or its inverse) exact
    ties = []
    for amax in (127.0, 8.0, 16.0, 15.0, 31.0, -8.0, -16.0, 4.0):
        blk = (rng.integers(-2 * abs(amax), 2 * abs(amax) + 1, 32) / 2.0).astype(np.float32)
        blk = np.clip(blk, -abs(amax), abs(amax))
        blk[int(rng.integers(0, 32))] = amax
        ties.append(blk)
    # q4_1/q5_1 ties: min 0, max 15 / 31, values k + 0.5
    ties.append(np.concatenate([[0.0, 15.0], rng.integers(0, 15, 30) + 0.5]).astype(np.float32))
    ties.append(np.concatenate([[0.0, 31.0], rng.integers(0, 31, 30) + 0.5]).astype(np.float32))
    ties.append(np.concatenate([[-1.0, 30.0], rng.integers(-1, 30, 30) + 0.5]).astype(np.float32))
    out.append(("ties", np.concatenate(ties), "all"))
    # first-max rule: +a and -a of equal magnitude; the first one wins
    fm = []
    for first in (3.0, -3.0):
        blk = f32(rng.uniform(-1, 1, 32))
        blk[5] = first
        blk[20] = -first
        fm.append(blk)
    blk = f32(rng.uniform(-1, 1, 32)); blk[0] = -2.0; blk[31] = 2.0; fm.append(blk)
    blk = f32(rng.uniform(-1, 1, 32)); blk[31] = -2.0; fm.append(blk)
    out.append(("first_max", np.concatenate(fm), "all"))
    # negative max and all-negative blocks
    nm = f32(rng.standard_normal(64))
    nm[7] = -9.0
    nm[32:] = -np.abs(nm[32:]) - 0.1
    out.append(("negative_max", nm, "all"))
    # outliers: Gaussian with a few huge entries
    ol = f32(rng.standard_normal(128))
    ol[[3, 40, 77, 127]] = [55.0, -80.0, 120.0, -33.0]
    out.append(("outliers", ol, "all"))
    # denormals and tiny scales: 1/d may overflow (codes then follow x86 conversion rules)
    den = []
    den.append(f32(rng.standard_normal(32) * 1e-39))
    den.append(f32(rng.standard_normal(32) * 1e-44))
    den.append(f32(rng.standard_normal(32) * 1e-36))
    blk = f32(rng.standard_normal(32)); blk[::2] = f32(rng.standard_normal(16) * 1e-40); den.append(blk)
    blk = np.zeros(32, dtype=np.float32); blk[9] = np.float32(1.4e-45); den.append(blk)
    blk = f32(rng.standard_normal(32) * 1e-6); den.append(blk)  # fp16 scale is subnormal
    out.append(("denormals", np.concatenate(den), "all"))
    # large values that keep every stored fp16 field finite
    lg = f32(rng.uniform(-6e4, 6e4, 128))
    lg[0] = 65504.0
    lg[33] = -65504.0
    out.append(("large", lg, "all"))
    # q8_0 and q4_0/q5_0 have a larger range than the *_1 formats' m field
    big8 = f32(rng.uniform(-8.0e6, 8.0e6, 64))
    out.append(("large_q8_0", big8, "q8_0"))
    big4 = f32(rng.uniform(-5.2e5, 5.2e5, 64))
    out.append(("large_q4_0", big4, "q4_0 q5_0 q8_0"))
    # f16/bf16: random bit patterns (finite), fp16 rounding boundaries, overflow, bf16 NaN
    bits = rng.integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    v = bits.view(np.float32)
    v = np.where(np.isfinite(v), v, np.float32(1.0)).astype(np.float32)
    out.append(("bits", v, "f16 bf16"))
    near = []
    for e in range(-26, 17):
        base = np.float32(2.0 ** e)
        ulp16 = np.float32(2.0 ** (max(e, -14) - 10))
        for k in (0.5, 1.5, 0.49999, 0.50001):
            near.append(base + ulp16 * np.float32(k))
    near += [65504.0, 65519.0, 65520.0, 70000.0, 3.0e38, -65520.0, np.inf, -np.inf]
    nv = f32(near)
    nv = np.concatenate([nv, -nv])
    nv = nv[: (len(nv) // 32) * 32]
    out.append(("f16_boundaries", nv, "f16 bf16"))
    nan_bits = np.array([0x7FC00000, 0x7F800001, 0xFFC00001, 0x7FBFFFFF] * 8, dtype=np.uint32)
    out.append(("bf16_nan", nan_bits.view(np.float32), "bf16"))
    return out


def encode(fmt, x):
    if fmt == "f16":
        q = x.astype(np.float16)
        return q.view(np.uint8).tobytes(), q.astype(np.float32)
    if fmt == "bf16":
        q = quants.quantize(x.reshape(1, -1), T.BF16)
        return q.tobytes(), quants.dequantize(q, T.BF16).reshape(-1)
    qt = dict(QFMTS)[fmt]
    q = quants.quantize(x.reshape(1, -1), qt)
    return q.tobytes(), quants.dequantize(q, qt).reshape(-1).astype(np.float32)


def main():
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    w = sys.stdout.write
    w("# golden_formats.txt — llama.cpp value formats, bytes from the PyPI gguf package\n")
    w(f"# generated by: python3 scripts/gen-golden-formats.py (gguf {importlib.metadata.version('gguf')}, numpy {np.__version__})\n")
    w("# regenerate: /tmp/ggufenv/bin/python scripts/gen-golden-formats.py > tests/data/golden_formats.txt\n")
    w("# format: see the docstring of scripts/gen-golden-formats.py\n")
    all_fmts = ["f16", "bf16"] + [n for n, _ in QFMTS]
    for name, x, which in cases():
        x = f32(x)
        assert x.size % 32 == 0, name
        fmts = all_fmts if which == "all" else which.split()
        w(f"case {name} {x.size}\n")
        w("x " + "".join(f"{b:08x}" for b in x.view(np.uint32)) + "\n")
        for fmt in fmts:
            data, deq = encode(fmt, x)
            h = fnv64(f32(deq).view(np.uint32).astype("<u4").tobytes())
            w(f"{fmt} {data.hex()} {h:016x}\n")


if __name__ == "__main__":
    main()
