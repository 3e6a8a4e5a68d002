#!/usr/bin/env python3
"""make_golden.py — golden data from the llama.cpp oracle (PyPI llama-cpp-python).

    tests/oracle/build-llama-cpp.sh                       # once: builds the oracle venv
    scripts/fetch-model every                             # the models
    ~/.cache/sjkvarn/oracle-venv/bin/python tests/oracle/make_golden.py [--corpus] [--tokens] [--logits] [--floor]
                                                          [--models gemma3-270m,qwen2.5-1.5b,...]

With no flag it does all four, for every model of MODELS (--models: only those). Output, under tests/data/golden/ (committed; the test suite
reads it without building llama.cpp):

  corpus/NN-name.txt   the tokenization corpus (--corpus): excerpts of files that Debian
                       packages install (recorded in corpus/SOURCES), plus two hand-written
                       edge-case documents. Built once and committed, so later runs do not
                       depend on the package versions installed.
  tok-<model>.txt      llama.cpp's token ids for every corpus document, in two modes:
                         "text"    add_special=1 parse_special=0 (llama-perplexity's mode)
                         "special" add_special=1 parse_special=1 (chat-template mode)
                       format: "doc <file> <mode> <n>" then a line of n ids.
  logits-<model>.bin   next-token logits for 16+ prompts (fp16 K and V caches, all
                       positions), little-endian:
                         char magic[4] = "SJKL"; u32 version = 1; u32 n_vocab; u32 k;
                         u32 n_prompts;
                         per prompt: u32 n_tokens; i32 tokens[n_tokens];
                           per position: f32 lse (log-sum-exp over the full vocabulary),
                                         i32 ids[k], f32 logits[k] (the k largest, in
                                         decreasing order)
                       With lse the top-k probabilities are exact; the rest is one tail
                       bucket, so KL over (top-k + tail) is a lower bound of the full KL.
  logits-<model>.txt   the prompts (as text) and the settings used.
  floor-<model>.txt    (--floor) llama.cpp against itself on the same prompts: KL and top-1
                       agreement between the golden path and other llama.cpp paths with the
                       same fp16 cache (flash attention on; token-by-token evaluation). The
                       logit test measures our engine against this noise level.

Python is only the oracle here; nothing in the product runs it.
"""
import argparse
import gzip
import hashlib
import os
import struct
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
CORPUS = os.path.join(GOLDEN, "corpus")
MODEL_DIR = os.environ.get("SJK_MODEL_DIR", os.path.expanduser("~/.cache/sjkvarn/models"))
MODELS = {
    "gemma3-270m": "gemma-3-270m-q4_k_m.gguf",
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}
TOP_K = 128

# (file name, source path, byte budget) — cut at the last newline within the budget.
CORPUS_SOURCES = [
    ("01-gpl3.txt", "/usr/share/common-licenses/GPL-3", 12000),
    ("02-stdio_h.txt", "/usr/include/stdio.h", 10000),
    ("03-json_decoder_py.txt", "/usr/lib/python3.11/json/decoder.py", 13000),
    ("04-unicode_blocks.txt", "/usr/share/unicode/Blocks.txt", 6000),
    ("05-etc_services.txt", "/etc/services", 5000),
    ("06-man_de_login_defs.txt", "/usr/share/man/de/man5/login.defs.5.gz", 3500),
    ("07-man_fr_login_defs.txt", "/usr/share/man/fr/man5/login.defs.5.gz", 3500),
    ("08-man_ru_login_defs.txt", "/usr/share/man/ru/man5/login.defs.5.gz", 4000),
    ("09-man_ja_login_defs.txt", "/usr/share/man/ja/man5/login.defs.5.gz", 4000),
    ("10-man_zh_CN_login_defs.txt", "/usr/share/man/zh_CN/man5/login.defs.5.gz", 3500),
    ("11-man_ko_passwd.txt", "/usr/share/man/ko/man5/passwd.5.gz", 3500),
    ("12-man_uk_login_defs.txt", "/usr/share/man/uk/man5/login.defs.5.gz", 4000),
    ("13-changelog_libelf1.txt", "/usr/share/doc/libelf1/changelog.Debian.gz", 3500),
]

EDGE_CASES = (
    "Hello world!  Two  spaces,   three,\ttab\t\ttwo tabs.\n"
    "Trailing spaces   \n"
    "Line with CRLF\r\nand a lone CR\rhere.\n"
    "\n\n\n   \n\t\n"
    "Apostrophes: don't, I'll, we're, they've, I'm, he'd, it's; DON'T I'LL 'quote' '' ' s\n"
    "Numbers: 0 7 42 123 1234 12345 3.14159 -2.5e-10 1,000,000 0x1F 2024-11-30 ½ ¾ ² ³ ٣٤٥ ४२ Ⅻ\n"
    "Unicode: naïve café Zürich Ελληνικά Русский 日本語 中文 한국어 עברית العربية हिन्दी ไทย\n"
    "Emoji: 😀 👍🏽 🇸🇪 ❤️ 👨‍👩‍👧 𝔘𝔫𝔦𝔠𝔬𝔡𝔢\n"
    "Symbols: → ← ≤ ≥ ≠ ∞ ∑ √ π € £ ¥ © ® ™ § ¶ • … — – « » „ “ ” ‘ ’ ¡¿\n"
    "Whitespace: nbsp[\u00a0] en-space[\u2002] ideographic[\u3000] nel[\u0085] ls[\u2028] zwsp[\u200b]\n"
    "Specials as text: <bos> <eos> <pad> <unk> <mask> <start_of_turn>user\nHi<end_of_turn>\n"
    "<|im_start|>system\nYou are helpful<|im_end|>\n<|endoftext|> <0x41> <0xZZ> [multimodal] "
    "<start_of_image> <repo_name> <file_sep>\n"
    "Code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; } // comment\n"
    "    indented    with    spaces\n"
    "\t\tdouble tab indent\n"
    "        eight spaces then text\n"
    "x=1;y=22;z=333;w=4444;\n"
    "URL: https://example.org/a/b?c=d&e=f#g — mail: someone@example.com\n"
    "Markdown: **bold** _it_ `code` # Title\n## Sub\n- item\n1. first\n"
    "Long run: ============================================================\n"
    "Spaces at end with no newline   "
)

# Invalid UTF-8 and stray bytes (the tokenizers must treat them as llama.cpp does). Not
# here: a 4-byte sequence above U+10FFFF, on which llama.cpp's BPE path throws and aborts.
EDGE_BYTES = (
    b"abc\xff\xfe def \xc3( \xe2\x82 end \x80\x80 caf\xc3\xa9 \xf0\x9f\x98 x"
    b" \xc0\x80 overlong \xed\xa0\x80 surrogate \x00nul\x01\x7f\n"
    b"tab\there \xc2\xa0nbsp\n"
)

# Logit prompts: (name, text, parse_special).
PROMPTS_COMMON = [
    ("fox", "The quick brown fox jumps over the lazy dog. The dog, surprised, ", False),
    ("capital", "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is", False),
    ("count", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,", False),
    ("code_c", "#include <stdio.h>\n\nint main(void)\n{\n    for (int i = 0; i < 10; i++)\n        printf(\"%d\\n\", i);\n    return", False),
    ("code_py", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n    return fibonacci(n - 1) +", False),
    ("gpl", "This program is free software: you can redistribute it and/or modify it under the terms of the GNU General Public License as published by", False),
    ("german", "Die Datei login.defs definiert die standortspezifische Konfiguration für die Shadow-Passwort-Werkzeuge. Diese Datei wird", False),
    ("french", "Le fichier login.defs définit la configuration spécifique au site pour la suite de mots de passe cachés. Ce fichier est", False),
    ("russian", "Файл login.defs задаёт настройки для набора программ теневых паролей. Этот файл", False),
    ("japanese", "空行とコメント行は無視される。コメント行は記号で始まる。パラメータ値は", False),
    ("math", "Let x = 3 and y = 4. Then x^2 + y^2 = 9 + 16 = 25, so the hypotenuse is", False),
    ("list", "Shopping list:\n- eggs\n- milk\n- bread\n- butter\n-", False),
    ("json", "{\"name\": \"sjkvarn\", \"version\": \"0.1.0\", \"license\": \"MIT\", \"keywords\": [\"kv\", \"cache\",", False),
    ("story", "Once upon a time, in a small village by the sea, there lived an old fisherman who every morning", False),
    ("repeat", "red green blue red green blue red green blue red green blue red green", False),
]
PROMPTS_CHAT = {
    "smollm2-135m": [
        ("chat1", "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n", True),
        ("chat2", "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\nWaves", True),
    ],
    # Qwen2's template: its default system text when the first message is not a system one
    "qwen2.5-0.5b": [
        ("chat1", "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n", True),
        ("chat2", "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite a C function that returns the larger of two ints.<|im_end|>\n<|im_start|>assistant\n```c\nint", True),
    ],
    "gemma3-270m": [
        ("chat1", "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n", True),
        ("chat2", "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\nWaves", True),
    ],
}

PROMPTS_CHAT["qwen2.5-1.5b"] = PROMPTS_CHAT["qwen2.5-0.5b"]


def cut_at_newline(data, budget):
    if len(data) <= budget:
        return data
    cut = data.rfind(b"\n", 0, budget)
    return data[: cut + 1] if cut > 0 else data[:budget]


def build_corpus():
    os.makedirs(CORPUS, exist_ok=True)
    lines = ["# Sources of the tokenization corpus (excerpts cut at a line end), as built by",
             "# tests/oracle/make_golden.py --corpus on Debian 12 (bookworm).",
             "# file\tsource\tbytes\tsha256 of the excerpt"]
    for name, src, budget in CORPUS_SOURCES:
        with open(src, "rb") as f:
            data = f.read()
        if src.endswith(".gz"):
            data = gzip.decompress(data)
        data = cut_at_newline(data, budget)
        data.decode("utf-8")  # the real-text documents must be valid UTF-8
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(data)
        lines.append("%s\t%s\t%d\t%s" % (name, src, len(data), hashlib.sha256(data).hexdigest()))
    for name, data in (("90-edge_cases.txt", EDGE_CASES.encode("utf-8")), ("91-edge_bytes.bin", EDGE_BYTES)):
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(data)
        lines.append("%s\t(tests/oracle/make_golden.py)\t%d\t%s" % (name, len(data), hashlib.sha256(data).hexdigest()))
    with open(os.path.join(CORPUS, "SOURCES"), "w") as f:
        f.write("\n".join(lines) + "\n")


def corpus_docs():
    names = sorted(n for n in os.listdir(CORPUS) if n != "SOURCES")
    for n in names:
        with open(os.path.join(CORPUS, n), "rb") as f:
            yield n, f.read()


def model_path(key):
    p = os.path.join(MODEL_DIR, MODELS[key])
    if not os.path.exists(p):
        sys.exit("make_golden: %s missing; run scripts/fetch-model %s" % (p, key))
    return p


def make_tokens(llama_cpp, models):
    total = 0
    for key in models:
        m = llama_cpp.Llama(model_path(key), vocab_only=True, verbose=False)
        out = ["# llama.cpp (llama-cpp-python %s) token ids for tests/data/golden/corpus, model %s"
               % (llama_cpp.__version__, MODELS[key]),
               "# regenerate: tests/oracle/make_golden.py --tokens"]
        for name, data in corpus_docs():
            total += len(data) if key == models[0] else 0
            for mode, special in (("text", False), ("special", True)):
                ids = m.tokenize(data, add_bos=True, special=special)
                out.append("doc %s %s %d" % (name, mode, len(ids)))
                out.append(" ".join(str(i) for i in ids))
            # Sanity: llama.cpp's own detokenizer gives the valid-UTF-8 text back.
            if not name.endswith(".bin"):
                ids = m.tokenize(data, add_bos=False, special=False)
                back = m.detokenize(ids)
                if back != data:
                    print("make_golden: note: %s %s does not round-trip through llama.cpp" % (key, name))
        with open(os.path.join(GOLDEN, "tok-%s.txt" % key), "w") as f:
            f.write("\n".join(out) + "\n")
        print("make_golden: tok-%s.txt written" % key)
    print("make_golden: corpus is %d bytes" % total)


def no_extra_buffer_types(llama_cpp):
    """Load weights into plain CPU buffers (llama_model_params.use_extra_bufts = false).
    A native build on a CPU that reports AMX routes weights through AMX tile kernels,
    which virtual machines often do not enable (SIGILL on the first matmul); the plain
    path uses ggml's ordinary quantized dot products."""
    import llama_cpp.llama as llama_mod

    orig = llama_cpp.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_model_default_params = params
    llama_mod.llama_cpp.llama_model_default_params = params


def make_logits(llama_cpp, models):
    import numpy as np

    no_extra_buffer_types(llama_cpp)
    for key in models:
        m = llama_cpp.Llama(model_path(key), n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                            logits_all=True, type_k=1, type_v=1, flash_attn=False, seed=0,
                            verbose=False)
        prompts = PROMPTS_COMMON + PROMPTS_CHAT[key]
        n_vocab = m.n_vocab()
        blob = bytearray(b"SJKL")
        blob += struct.pack("<IIII", 1, n_vocab, TOP_K, len(prompts))
        info = ["# llama.cpp (llama-cpp-python %s) logits, model %s" % (llama_cpp.__version__, MODELS[key]),
                "# settings: n_ctx 512, n_batch 512, n_threads 2, type_k f16, type_v f16,"
                " flash_attn off, use_extra_bufts off, add_special 1; top-%d per position"
                " + log-sum-exp" % TOP_K,
                "# regenerate: tests/oracle/make_golden.py --logits"]
        n_pos = 0
        for name, text, special in prompts:
            toks = m.tokenize(text.encode("utf-8"), add_bos=True, special=special)
            m.reset()
            m.eval(toks)
            logits = np.array(m.scores[: len(toks)], dtype=np.float64)
            blob += struct.pack("<I", len(toks)) + struct.pack("<%di" % len(toks), *toks)
            for row in logits:
                mx = row.max()
                lse = mx + np.log(np.exp(row - mx).sum())
                top = np.argsort(-row, kind="stable")[:TOP_K]
                blob += struct.pack("<f", lse)
                blob += struct.pack("<%di" % TOP_K, *[int(i) for i in top])
                blob += struct.pack("<%df" % TOP_K, *[float(row[i]) for i in top])
            n_pos += len(toks)
            info.append("prompt %s n_tokens %d parse_special %d text %r" % (name, len(toks), special, text))
        with open(os.path.join(GOLDEN, "logits-%s.bin" % key), "wb") as f:
            f.write(bytes(blob))
        with open(os.path.join(GOLDEN, "logits-%s.txt" % key), "w") as f:
            f.write("\n".join(info) + "\n")
        print("make_golden: logits-%s.bin written (%d prompts, %d positions, %d bytes)"
              % (key, len(prompts), n_pos, len(blob)))


def run_prompts(llama_cpp, key, n_threads=2, **kw):
    """Full logits [n_tokens][n_vocab] of every prompt, with the given llama.cpp options."""
    import numpy as np

    m = llama_cpp.Llama(model_path(key), n_ctx=512, n_threads=n_threads, logits_all=True, type_k=1,
                        type_v=1, seed=0, verbose=False, **kw)
    out = []
    for _name, text, special in PROMPTS_COMMON + PROMPTS_CHAT[key]:
        toks = m.tokenize(text.encode("utf-8"), add_bos=True, special=special)
        m.reset()
        m.eval(toks)
        out.append(np.array(m.scores[: len(toks)], dtype=np.float64))
    return out


def make_floor(llama_cpp, variants, models, n_threads=2):
    """llama.cpp against itself: the golden settings (batched, no flash attention) versus
    other equally valid llama.cpp execution paths with the same fp16 cache. How far these
    move the logits is the noise level any other engine is measured against."""
    import numpy as np

    no_extra_buffer_types(llama_cpp)
    all_variants = {
        "flash_attn": dict(n_batch=512, flash_attn=True),
        "n_batch_1": dict(n_batch=1, flash_attn=False),
    }
    for key in models:
        base = run_prompts(llama_cpp, key, n_threads, n_batch=512, flash_attn=False)
        lines = ["# llama.cpp (llama-cpp-python %s) against itself, model %s: KL(golden path ||"
                 " variant) over the prompts of logits-%s.txt" % (llama_cpp.__version__, MODELS[key], key),
                 "# golden path: n_batch 512, flash_attn off; every variant keeps the f16 K/V cache;"
                 " n_threads %d" % n_threads,
                 "# mean_kl = full vocabulary; mean_kl_top%d = top-%d + tail bucket, as the C test"
                 " computes it; top1 = same argmax" % (TOP_K, TOP_K),
                 "# regenerate: tests/oracle/make_golden.py --floor"]
        for name in variants:
            other = run_prompts(llama_cpp, key, n_threads, **all_variants[name])
            kl_full, kl_top, same, n = [], [], 0, 0
            for a, b in zip(base, other):
                la = a - a.max(1, keepdims=True)
                la -= np.log(np.exp(la).sum(1, keepdims=True))
                lb = b - b.max(1, keepdims=True)
                lb -= np.log(np.exp(lb).sum(1, keepdims=True))
                pa = np.exp(la)
                kl_full += list((pa * (la - lb)).sum(1))
                for r in range(len(a)):
                    top = np.argsort(-a[r], kind="stable")[:TOP_K]
                    p, q = pa[r, top], np.exp(lb[r, top])
                    k = float((p * (la[r, top] - lb[r, top])).sum())
                    pt, qt = 1.0 - p.sum(), 1.0 - q.sum()
                    if pt > 1e-12 and qt > 0:
                        k += pt * np.log(pt / qt)
                    kl_top.append(max(k, 0.0))
                same += int((a.argmax(1) == b.argmax(1)).sum())
                n += len(a)
            lines.append("variant %s positions %d mean_kl %.6g mean_kl_top%d %.6g top1 %.6f"
                         % (name, n, float(np.mean(kl_full)), TOP_K, float(np.mean(kl_top)), same / n))
            print("make_golden: %s %s" % (key, lines[-1]), flush=True)
        with open(os.path.join(GOLDEN, "floor-%s.txt" % key), "w") as f:
            f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="store_true", help="rebuild corpus/ from installed Debian files")
    ap.add_argument("--tokens", action="store_true", help="write tok-<model>.txt")
    ap.add_argument("--logits", action="store_true", help="write logits-<model>.bin")
    ap.add_argument("--floor", action="store_true",
                    help="write floor-<model>.txt (llama.cpp against itself; slow: token by token)")
    ap.add_argument("--floor-variants", default="flash_attn,n_batch_1",
                    help="comma-separated: flash_attn, n_batch_1")
    ap.add_argument("--floor-threads", type=int, default=2,
                    help="threads of the --floor runs (ggml splits rows, not sums, across threads; 1 is"
                    " far faster token by token on a busy machine)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated keys of MODELS (default: all of them)")
    a = ap.parse_args()
    models = a.models.split(",")
    for key in models:
        if key not in MODELS:
            sys.exit("make_golden: unknown model %r (known: %s)" % (key, ", ".join(MODELS)))
    if not (a.corpus or a.tokens or a.logits or a.floor):
        a.corpus = a.tokens = a.logits = a.floor = True
    os.makedirs(GOLDEN, exist_ok=True)
    if a.corpus:
        build_corpus()
    if a.tokens or a.logits or a.floor:
        import llama_cpp
        if a.tokens:
            make_tokens(llama_cpp, models)
        if a.logits:
            make_logits(llama_cpp, models)
        if a.floor:
            make_floor(llama_cpp, a.floor_variants.split(","), models, a.floor_threads)


if __name__ == "__main__":
    main()
