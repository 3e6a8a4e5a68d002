#!/usr/bin/env python3
"""make_seeds.py — writes the Python-generated seeds of the committed fuzz corpora:
fuzz/corpus/gguf/ (small GGUF v3 files: a llama-style SPM vocabulary, a gpt2/smollm BPE
vocabulary, a bare tensor file) and fuzz/corpus/tokenizer/ (texts, with the mode byte of
fuzz_tokenizer.c first). Regenerate: sh fuzz/make_seeds.sh"""
import os, struct

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(b)) + b

T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9

def kv(key, t, val):
    out = s(key) + struct.pack("<I", t)
    if t == T_STR: out += s(val)
    elif t == T_U32: out += struct.pack("<I", val)
    elif t == T_BOOL: out += struct.pack("<B", val)
    elif t == T_ARR:
        et, items = val
        out += struct.pack("<IQ", et, len(items))
        for it in items:
            if et == T_STR: out += s(it)
            elif et == T_F32: out += struct.pack("<f", it)
            elif et == T_I32: out += struct.pack("<i", it)
    return out

def gguf(kvs, tensors):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off = 0
    data = b""
    for name, dims, typ, payload in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", typ, off)
        data += payload
        while len(data) % 32: data += b"\0"
        off = len(data)
    while len(out) % 32: out += b"\0"
    return out + data

def put(sub, name, b):
    d = os.path.join(root, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f: f.write(b)

f32 = ("w", [4], 0, struct.pack("<4f", 1, 2, 3, 4))
spm_tok = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "\u2581the", "he", "th", "the", "a"]
spm_types = [2, 3, 3] + [6] * 256 + [1] * 6
put("gguf", "spm-vocab", gguf([
    kv("general.architecture", T_STR, "llama"),
    kv("tokenizer.ggml.model", T_STR, "llama"),
    kv("tokenizer.ggml.tokens", T_ARR, (T_STR, spm_tok)),
    kv("tokenizer.ggml.scores", T_ARR, (T_F32, [-float(i) for i in range(len(spm_tok))])),
    kv("tokenizer.ggml.token_type", T_ARR, (T_I32, spm_types)),
    kv("tokenizer.ggml.bos_token_id", T_U32, 1),
    kv("tokenizer.ggml.eos_token_id", T_U32, 2),
], [f32]))

def gpt2_char(b):
    if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE: return chr(b)
    if b <= 0x20: return chr(0x100 + b)
    if b <= 0xA0: return chr(0x121 + b - 0x7F)
    return chr(0x143)
bpe_tok = ["<|endoftext|>"] + [gpt2_char(b) for b in range(256)] + ["th", "the", "\u0120t", "in"]
put("gguf", "bpe-vocab", gguf([
    kv("general.architecture", T_STR, "llama"),
    kv("tokenizer.ggml.model", T_STR, "gpt2"),
    kv("tokenizer.ggml.pre", T_STR, "smollm"),
    kv("tokenizer.ggml.tokens", T_ARR, (T_STR, bpe_tok)),
    kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [3] + [1] * (len(bpe_tok) - 1))),
    kv("tokenizer.ggml.merges", T_ARR, (T_STR, ["t h", "th e", "\u0120 t", "i n"])),
    kv("tokenizer.ggml.eos_token_id", T_U32, 0),
], [f32]))
put("gguf", "bare-tensors", gguf([kv("general.alignment", T_U32, 32)],
    [f32, ("b", [2, 3], 1, struct.pack("<6e", *range(6)))]))
put("gguf", "empty", gguf([], []))

texts = [b"Hello, world! The quick brown fox.", "caf\u00e9 \u2581 na\u00efve 12345 <s> </s> <|user|>".encode(),
         b"\xff\xfe\x80 invalid utf8 \xc3", b"   leading  spaces\n\ttabs\r\n", b"1234567890 it's they're"]
for i, t in enumerate(texts):
    for mode in (0, 1, 2, 3):
        put("tokenizer", "text-%d-mode%d" % (i, mode), bytes([mode]) + t)
put("tokenizer", "vocab-spm", bytes([4]) + "\u2581hello\nhe\nllo\n<ctl>\n".encode() + b"\0" + b"hello there <ctl>")
put("tokenizer", "vocab-bpe", bytes([5]) + b"he\nhel\nh e\nhe l\n" + b"\0" + b"hello hell")
