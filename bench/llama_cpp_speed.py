#!/usr/bin/env python3
"""llama_cpp_speed.py — llama.cpp's prefill and decode speed on given token ids.

    <oracle-venv>/bin/python bench/llama_cpp_speed.py MODEL.gguf IDS.txt THREADS GEN CTX...

Launched by `sjkvarn bench run` (tools/bench_run.c) when it is given --llama-cpp PYTHON
or SJK_LLAMA_CPP_PYTHON; the product never needs Python. IDS.txt holds whitespace-
separated token ids (the prompt the bench fed to our host, at least max(CTX) long). For
each CTX it creates a fresh context of CTX + GEN positions, times llama_decode over the
first CTX ids (prefill, n_batch 512) and then GEN greedy single-token steps (decode), and
prints one JSON object per line on stdout:

  {"engine":"llama.cpp","context":C,"prefill_s":..,"decode_s":..,"n_gen":G,
   "peak_rss_kib":..,"settings":"..."}

Settings: F16 K and V caches, flash attention on (llama.cpp's CPU default when "auto"),
n_batch = n_ubatch = 512, swa_full off (llama-cli's default: the sliding-window
layers keep a window-sized cache, as ours do), one sequence, weights in plain CPU buffers (see
plain_cpu_buffers). The oracle venv comes from
tests/oracle/build-llama-cpp.sh.
"""
import json
import resource
import sys
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama


def plain_cpu_buffers():
    """Weights in plain CPU buffers (llama_model_params.use_extra_bufts = false): a native
    build on a CPU that reports AMX would otherwise run AMX tile kernels, which this
    virtual machine does not enable (SIGILL on the first matmul). This also turns off
    ggml's repacked-weight (interleaved) kernels, so llama.cpp runs its ordinary quantized
    dot products; recorded in "settings"."""
    import llama_cpp.llama as llama_mod

    orig = llama_cpp.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_model_default_params = params
    llama_mod.llama_cpp.llama_model_default_params = params


def main():
    if len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    model, ids_path, threads, gen = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ctxs = [int(c) for c in sys.argv[5:]]
    with open(ids_path) as f:
        ids = [int(t) for t in f.read().split()]
    plain_cpu_buffers()
    settings = (f"llama-cpp-python {llama_cpp.__version__} (GGML_NATIVE build), type_k=type_v=f16, "
                f"flash_attn=on, n_batch=n_ubatch=512, n_threads=n_threads_batch={threads}, "
                f"swa_full=off, use_extra_bufts=off")
    for ctx in ctxs:
        if ctx > len(ids):
            print(f"llama_cpp_speed: only {len(ids)} ids for context {ctx}", file=sys.stderr)
            return 1
        llm = Llama(model_path=model, n_ctx=ctx + gen, n_batch=512, n_ubatch=512,
                    n_threads=threads, n_threads_batch=threads,
                    type_k=llama_cpp.GGML_TYPE_F16, type_v=llama_cpp.GGML_TYPE_F16,
                    flash_attn=True, swa_full=False, logits_all=False, verbose=False)
        n_vocab = llm.n_vocab()
        t0 = time.perf_counter()
        llm.eval(ids[:ctx])
        t1 = time.perf_counter()
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
        tok = int(np.argmax(logits))
        t2 = time.perf_counter()
        for _ in range(gen):
            llm.eval([tok])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
            tok = int(np.argmax(logits))
        t3 = time.perf_counter()
        print(json.dumps({"engine": "llama.cpp", "context": ctx, "prefill_s": t1 - t0,
                          "decode_s": t3 - t2, "n_gen": gen,
                          "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                          "settings": settings}), flush=True)
        llm.close() if hasattr(llm, "close") else None
        del llm
    return 0


if __name__ == "__main__":
    sys.exit(main())
