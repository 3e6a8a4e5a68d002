"""test_server.py — `sjkvarn serve` driven by real clients: the PyPI `openai` package for
chat, streaming, usage and errors; raw HTTP (http.client, sockets) for the malformed cases.

    python tests/server/test_server.py build/sjkvarn

Starts the real server on a free loopback port (--port 0; the address is read from its
first stdout line) with Gemma 3 270M and small max_tokens, checks greedy output against
`sjkvarn run` for the same prompt and cache, and stops it with SIGTERM (exit status 0).
Prints one line per test and "N passed, N failed, N skipped" last (tests/run_tests.sh).
A missing model is a SKIP (SJK_REQUIRE_ALL=1 makes the suite fail on it).

Under SJK_TEST_LIGHT=1 (the sanitizer and valgrind runs; tests/harness.h, docs/RELIABILITY.md)
every test runs, on less data: a context of 256 instead of 512, about half the generated
tokens (N() below) and shorter prompts; the same requests, routes and checks."""
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import openai

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/sjkvarn")
MODEL_DIR = os.environ.get("SJK_MODEL_DIR") or os.path.join(os.environ.get("HOME", "."), ".cache/sjkvarn/models")
GEMMA = os.path.join(MODEL_DIR, "gemma-3-270m-q4_k_m.gguf")
KEY = "test-key-123"
LIGHT = os.environ.get("SJK_TEST_LIGHT") == "1"
CTX = 256 if LIGHT else 512


def N(full, light):
    """A size: full normally, light under SJK_TEST_LIGHT=1."""
    return light if LIGHT else full


THREADS = "2"
results = {"pass": 0, "fail": 0, "skip": 0}


class Server:
    """One `sjkvarn serve` process; .port once it listens."""

    def __init__(self, *args, key=KEY, model=GEMMA, env=None):
        self.key = key
        cmd = [BIN, "serve", "-m", model, "--port", "0", "-t", THREADS] + list(args)
        if key:
            cmd += ["--api-key", key]
        self.log = tempfile.TemporaryFile()
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  env=dict(os.environ, **env) if env else None)
        line = ""
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.p.stdout.readline()
            if line or self.p.poll() is not None:
                break
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line or "")
        if not m:
            self.p.kill()
            raise RuntimeError("server did not start: " + (line or "") + self.stderr())
        self.port = int(m.group(1))
        self.base = "http://127.0.0.1:%d" % self.port

    def stderr(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def client(self, key=None):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key or self.key or "none", max_retries=0,
                             timeout=120)

    def raw(self, method, path, body=None, headers=None, key=True):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = dict(headers or {})
        if key and self.key:
            h.setdefault("Authorization", "Bearer " + self.key)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def json(self, method, path, body=None):
        st, _, data = self.raw(method, path, body)
        return st, json.loads(data)

    def metrics(self):
        st, _, data = self.raw("GET", "/metrics")
        assert st == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def wait_idle(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st, slots = self.json("GET", "/slots")
            if all(s["state"] == "idle" for s in slots):
                return slots
            time.sleep(0.05)
        raise AssertionError("slots still busy after %gs: %s" % (timeout, slots))

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError("server did not exit within 20 s of SIGTERM")
        return rc


def run_cli(prompt, n, kv="f16", chat=False):
    cmd = [BIN, "run", "-m", GEMMA, "-p", prompt, "-n", str(n), "--temp", "0", "-c", str(CTX), "-t", THREADS,
           "--kv", kv]
    if chat:
        cmd.append("--chat")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout


def test(fn):
    name = fn.__name__
    try:
        fn()
        results["pass"] += 1
        print("ok   " + name, flush=True)
    except SkipTest as e:
        results["skip"] += 1
        print("  SKIP %s: %s" % (name, e))
        print("SKIP " + name, flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        results["fail"] += 1
        print("  %s: %s: %s" % (name, type(e).__name__, e))
        print("FAIL " + name, flush=True)


class SkipTest(Exception):
    pass


S = None  # the main server: --parallel 2, API key, slot dir, small body limit
SLOT_DIR = tempfile.mkdtemp(prefix="sjk_slots_")
PROMPT = "The capital of France is"
QUESTION = "Name three colours of the rainbow."


def t_health_models_props():
    st, h = S.json("GET", "/health")
    assert st == 200 and h["status"] == "ok" and h["slots_total"] == 2, h
    st, _, _ = S.raw("GET", "/health", key=False)  # /health needs no key
    assert st == 200
    models = S.client().models.list()
    assert [m.id for m in models.data] == ["gemma-3-270m-q4_k_m.gguf"], models
    st, p = S.json("GET", "/props")
    assert st == 200 and p["n_ctx"] == CTX and p["parallel"] == 2 and p["kv"] == "f16", p
    assert p["kv_allocated_bytes"] > 0 and p["chat_template"] == "gemma", p


def t_completion_greedy_equals_run():
    n = N(12, 6)
    r = S.client().completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=0)
    want = run_cli(PROMPT, n)
    got = PROMPT + r.choices[0].text + "\n"
    assert got == want, "server %r != run %r" % (got, want)
    assert r.usage.prompt_tokens == 6 and r.usage.completion_tokens == n, r.usage
    assert r.usage.total_tokens == 6 + n and r.choices[0].finish_reason == "length"
    assert r.id.startswith("cmpl-") and r.object == "text_completion"


def t_chat_greedy_equals_run():
    r = S.client().chat.completions.create(model="x", messages=[{"role": "user", "content": QUESTION}],
                                           max_tokens=N(16, 8), temperature=0)
    content = r.choices[0].message.content
    want = run_cli(QUESTION, N(16, 8), chat=True)
    assert want.endswith("<start_of_turn>model\n" + content + "\n"), "server %r vs run %r" % (content, want)
    assert r.choices[0].message.role == "assistant" and r.id.startswith("chatcmpl-")
    assert r.usage.prompt_tokens > 5 and r.usage.prompt_tokens_details.cached_tokens >= 0, r.usage


def t_stream_chat_with_usage():
    msgs = [{"role": "user", "content": QUESTION}]
    c = S.client()
    n = N(10, 5)
    plain = c.chat.completions.create(model="x", messages=msgs, max_tokens=n, temperature=0)
    chunks = list(c.chat.completions.create(model="x", messages=msgs, max_tokens=n, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == plain.choices[0].message.content, (text, plain.choices[0].message.content)
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [plain.choices[0].finish_reason], finishes
    assert chunks[0].choices[0].delta.role == "assistant"
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == plain.usage.completion_tokens, last
    assert last.usage.prompt_tokens == plain.usage.prompt_tokens


def t_stream_raw_sse_ends_with_done():
    st, h, data = S.raw("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": N(4, 2), "temperature": 0,
                                                    "stream": True})
    assert st == 200 and h.get("Content-Type") == "text/event-stream", (st, h)
    text = data.decode()
    assert text.endswith("data: [DONE]\n\n"), text[-80:]
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), events
    body = [json.loads(e[6:]) for e in events[:-1]]
    assert body[-1]["choices"][0]["finish_reason"] == "length" and "usage" not in body[-1]


def t_prefix_reuse_cached_tokens():
    c = S.client()
    S.wait_idle()
    m1 = [{"role": "user", "content": "Write one short sentence about the sea."}]
    r1 = c.chat.completions.create(model="x", messages=m1, max_tokens=N(12, 6), temperature=0)
    m2 = m1 + [{"role": "assistant", "content": r1.choices[0].message.content},
               {"role": "user", "content": "And one about the mountains."}]
    before = S.metrics()
    r2 = c.chat.completions.create(model="x", messages=m2, max_tokens=N(8, 4), temperature=0)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    # the whole first prompt is shared (the reply's re-tokenization may differ at its end)
    assert cached >= r1.usage.prompt_tokens and cached < r2.usage.prompt_tokens, (cached, r1.usage, r2.usage)
    after = S.metrics()
    assert after["sjkvarn_prefix_cache_hits_total"] == before["sjkvarn_prefix_cache_hits_total"] + 1
    assert after["sjkvarn_prefill_tokens_total"] - before["sjkvarn_prefill_tokens_total"] == \
        r2.usage.prompt_tokens - cached


def t_stop_strings():
    c = S.client()
    n = N(12, 8)
    full = c.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=0).choices[0].text
    words = full.split(" ")
    assert len(words) > 3, full
    stop = " " + words[3]
    r = c.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=0, stop=[stop, "zzzz"])
    assert r.choices[0].text == full[:full.index(stop)] and r.choices[0].finish_reason == "stop", (r, full)
    # streamed: the held-back text never shows the stop string
    chunks = list(c.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=0, stop=stop,
                                       stream=True))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == r.choices[0].text, (text, r.choices[0].text)


def t_sampling_seed_is_reproducible():
    c = S.client()
    n = N(10, 5)
    a = c.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=1.0, top_p=0.9, seed=42)
    b = c.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=1.0, top_p=0.9, seed=42)
    assert a.choices[0].text == b.choices[0].text


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def err_of(status, data):
    e = json.loads(data)["error"]
    assert e["code"] == status, e
    return e


def t_errors_openai_client():
    try:
        S.client(key="wrong").chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("no 401")
    except openai.AuthenticationError as e:
        assert e.status_code == 401 and e.body["type"] == "authentication_error", e.body
    try:
        S.client().chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], temperature=7)
        raise AssertionError("no 400")
    except openai.BadRequestError as e:
        assert "temperature" in e.body["message"], e.body
    long_prompt = "word " * (CTX + 50)
    try:
        S.client().completions.create(model="x", prompt=long_prompt, max_tokens=4)
        raise AssertionError("no 400 for a prompt over the context")
    except openai.BadRequestError as e:
        b = e.body
        assert b["type"] == "exceed_context_size_error" and b["n_ctx"] == CTX and b["n_prompt_tokens"] > CTX, b


def t_errors_raw_http():
    st, _, d = S.raw("POST", "/v1/chat/completions", "{not json", {"Content-Type": "application/json"})
    assert st == 400 and "not valid JSON" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/chat/completions", {"messages": "hello"})
    assert st == 400 and "messages" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                      "max_tokens": "ten"})
    assert st == 400 and "max_tokens" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]})
    assert st == 400 and "messages[0].role" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/completions", {"max_tokens": 3})
    assert st == 400 and "prompt" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/completions", {"prompt": "x", "stream": "yes"})
    assert st == 400 and "stream" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/completions", "[1, 2]")
    assert st == 400 and "object" in err_of(400, d)["message"]
    st, _, d = S.raw("POST", "/v1/completions", {"prompt": "x" * 70000})  # --max-body 65536
    assert st == 413, st
    err_of(413, d)
    st, _, d = S.raw("GET", "/v1/nothing")
    assert st == 404 and err_of(404, d)["type"] == "not_found_error"
    st, _, d = S.raw("GET", "/v1/chat/completions")
    assert st == 405, st
    st, _, d = S.raw("GET", "/v1/models", key=False)
    assert st == 401 and err_of(401, d)["type"] == "authentication_error"
    st, _, d = S.raw("GET", "/metrics", headers={"Authorization": "Bearer nope"})
    assert st == 401


def open_stream(prompt, max_tokens):
    """A raw streaming request; returns the socket after the response headers."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True})
    s = socket.create_connection(("127.0.0.1", S.port), timeout=60)
    s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (KEY, len(body), body)).encode())
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 200"), got[:100]
    return s


def t_busy_503_and_disconnect_frees_the_session():
    S.wait_idle()
    a, b = open_stream(PROMPT, N(400, 200)), open_stream(PROMPT, N(400, 200))
    st, h, d = S.raw("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
    assert st == 503 and h.get("Retry-After") == "1" and err_of(503, d)["type"] == "unavailable_error", (st, h)
    # both clients hang up mid-stream: their sessions are freed at the next token
    a.close()
    b.close()
    t0 = time.time()
    S.wait_idle(timeout=10)
    assert time.time() - t0 < 10
    r = S.client().completions.create(model="x", prompt=PROMPT, max_tokens=2, temperature=0)
    assert r.usage.completion_tokens == 2


def t_batched_decode_matches_sequential():
    c = S.client()
    S.wait_idle()
    prompts = [PROMPT, "Once upon a time"]
    n = N(24, 12)
    seq = [c.completions.create(model="x", prompt=p, max_tokens=n, temperature=0).choices[0].text for p in prompts]
    before = S.metrics()
    out = [None, None]

    def go(i):
        chunks = c.completions.create(model="x", prompt=prompts[i], max_tokens=n, temperature=0, stream=True)
        out[i] = "".join(ch.choices[0].text for ch in chunks if ch.choices)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    after = S.metrics()
    assert out == seq, (out, seq)
    steps = after["sjkvarn_decode_steps_total"] - before["sjkvarn_decode_steps_total"]
    rows = after["sjkvarn_decode_rows_total"] - before["sjkvarn_decode_rows_total"]
    assert rows > steps, "no decode step carried two sessions (rows %d, steps %d)" % (rows, steps)


def t_slots_save_restore_erase():
    S.wait_idle()
    c = S.client()
    r = c.completions.create(model="x", prompt="A slot that is saved and restored", max_tokens=N(4, 2),
                             temperature=0)
    st, slots = S.json("GET", "/slots")
    sid = max(slots, key=lambda s: s["n_cached_tokens"])["id"]
    n = slots[sid]["n_cached_tokens"]
    assert n >= r.usage.prompt_tokens, slots
    st, j = S.json("POST", "/slots/%d?action=save" % sid, {"filename": "s1"})
    assert st == 200 and j["n_saved"] == n, j
    with open(os.path.join(SLOT_DIR, "s1.tokens"), "rb") as f:  # docs/FORMAT.md "Server token files"
        tok = f.read()
    assert os.path.exists(os.path.join(SLOT_DIR, "s1"))
    magic, version, count, crc = tok[:8], *struct.unpack("<III", tok[8:20])
    assert magic == b"SJKTOKEN" and version == 1 and count == n and len(tok) == 20 + 4 * n, (magic, version, count)
    assert crc == crc32c(tok[8:16] + tok[20:]), "token file checksum"
    st, j = S.json("POST", "/slots/%d?action=erase" % sid)
    assert st == 200 and j["n_erased"] == n, j
    st, slots = S.json("GET", "/slots")
    assert slots[sid]["n_cached_tokens"] == 0
    st, j = S.json("POST", "/slots/%d?action=restore&filename=s1" % sid)
    assert st == 200 and j["n_restored"] == n, j
    st, slots = S.json("GET", "/slots")
    assert slots[sid]["n_cached_tokens"] == n
    # a damaged token file, then a damaged session file, is refused and changes nothing
    with open(os.path.join(SLOT_DIR, "s1.tokens"), "r+b") as f:
        f.seek(20)
        f.write(b"\x01")
    st, j = S.json("POST", "/slots/%d?action=restore&filename=s1" % sid)
    assert st == 400 and "checksum" in j["error"]["message"], j
    with open(os.path.join(SLOT_DIR, "s1.tokens"), "wb") as f:
        f.write(tok)
    with open(os.path.join(SLOT_DIR, "s1"), "r+b") as f:
        f.seek(200)
        f.write(b"\xff\xff\xff\xff")
    st, j = S.json("POST", "/slots/%d?action=restore&filename=s1" % sid)
    assert st == 400 and "error" in j, j
    st, slots = S.json("GET", "/slots")
    assert slots[sid]["n_cached_tokens"] == n
    for bad in ["../x", ".hidden", ""]:
        st, j = S.json("POST", "/slots/%d?action=save" % sid, {"filename": bad})
        assert st == 400, (bad, j)
    st, j = S.json("POST", "/slots/99?action=erase")
    assert st == 404
    st, j = S.json("POST", "/slots/0?action=explode")
    assert st == 400


def t_metrics_series():
    m = S.metrics()
    for k in ["sjkvarn_requests_total{kind=\"chat\"}", "sjkvarn_generated_tokens_total",
              "sjkvarn_decode_tokens_per_second", "sjkvarn_prefill_tokens_per_second",
              "sjkvarn_kv_bytes{region=\"total\"}", "sjkvarn_sessions{state=\"idle\"}", "sjkvarn_idle_seals_total",
              "sjkvarn_prefix_cache_hits_total", "sjkvarn_errors_total{class=\"4xx\"}"]:
        assert k in m, k
    assert m["sjkvarn_requests_total{kind=\"chat\"}"] >= 3 and m["sjkvarn_generated_tokens_total"] > N(20, 10)
    assert m["sjkvarn_kv_bytes{region=\"total\"}"] > 0 and m["sjkvarn_errors_total{class=\"4xx\"}"] >= 5


def t_idle_seal_and_sj_greedy():
    kv = "sj:4/4:sink=0:tail_min=0:tail_max=256"
    s2 = Server("-c", str(CTX), "--kv", kv, "--idle-seal", "1", key=None)
    try:
        prompt = " ".join("word%d" % i for i in range(60))
        r = s2.client().completions.create(model="x", prompt=prompt, max_tokens=N(6, 3), temperature=0)
        want = run_cli(prompt, N(6, 3), kv=kv)
        assert prompt + r.choices[0].text + "\n" == want, (r.choices[0].text, want[-60:])
        assert r.usage.prompt_tokens >= 128, r.usage
        deadline = time.time() + 10
        while time.time() < deadline:
            st, slots = s2.json("GET", "/slots")
            if slots[0]["idle_sealed"]:
                break
            time.sleep(0.2)
        assert slots[0]["idle_sealed"] and slots[0]["sealed_positions"] > 0, slots
        assert s2.metrics()["sjkvarn_idle_seals_total"] == 1
        assert "sealed to tail_min" in s2.stderr()
    finally:
        assert s2.stop() == 0


def t_kv_auto_and_refusal():
    ctx, budget = N((16384, 100), (8192, 80))  # positions, MiB: f16 does not fit, a tier does
    s3 = Server("-c", str(ctx), "-np", "2", "--kv", "auto", "--mem-budget", "%dM" % budget, key=None)
    try:
        st, p = s3.json("GET", "/props")
        assert p["kv"] != "f16" and "auto tier" in p["kv_reason"] and p["kv_allocated_bytes"] <= budget << 20, p
        assert p["kv_allocated_bytes"] == p["kv_planned_bytes"], p  # the plan is the allocation
        st, h = s3.json("GET", "/health")
        assert h["kv"] == p["kv"] and h["kv_reason"] == p["kv_reason"]
    finally:
        assert s3.stop() == 0
    r = subprocess.run([BIN, "serve", "-m", GEMMA, "--port", "0", "-c", "32768", "-np", "4", "--kv", "f16",
                        "--mem-budget", "300M"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "refusing to start" in r.stderr and "--parallel 2 would fit" in r.stderr, r.stderr
    r = subprocess.run([BIN, "serve", "-m", GEMMA, "--port", "0", "-c", "32768", "-np", "4", "--kv", "auto",
                        "--mem-budget", "8M"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "would fit" in r.stderr, r.stderr


def t_sigterm_during_stream_exits_0():
    s4 = Server("-c", str(CTX), key=None)
    c = s4.client()
    got = []

    def go():
        try:
            for ch in c.completions.create(model="x", prompt=PROMPT, max_tokens=N(400, 200), temperature=0, stream=True):
                got.append(ch)
        except Exception as e:  # noqa: BLE001 - the stream may end with an error event
            got.append(e)

    t = threading.Thread(target=go)
    t.start()
    time.sleep(1.0)
    rc = s4.stop()
    t.join(30)
    assert rc == 0 and not t.is_alive(), (rc, s4.stderr())
    assert "stopped" in s4.stderr()


FAULT = "FAULT-MARKER-7"


def t_sse_ping_and_forward_fault():
    """--sse-ping: a stream in a long prefill gets ": ping" comment lines before its first
    event (raw HTTP: the openai client skips comments, as every SSE client must). The
    test-only fault switch (SJKVARN_SERVE_TEST_FAULT): a request whose prompt holds the
    marker fails at its first decode step as a row the forward pass reported corrupt: 500
    in the OpenAI shape with the reason, while a session decoding beside it in the same
    steps gives exactly its solo output, and the failed session serves again afterwards."""
    s5 = Server("-c", str(CTX), "-np", "2", "--sse-ping", "0.02", key=None, env={"SJKVARN_SERVE_TEST_FAULT": FAULT})
    try:
        long_prompt = "The quick brown fox jumps over the lazy dog. " * N(40, 20)  # ~400 (200) tokens of prefill
        c = http.client.HTTPConnection("127.0.0.1", s5.port, timeout=120)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": long_prompt, "max_tokens": 3,
                                                               "temperature": 0, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        assert r.status == 200 and body.endswith("data: [DONE]\n\n"), (r.status, body[-200:])
        events = [e for e in body.split("\n\n") if e]
        assert all(e == ": ping" or e.startswith("data: ") for e in events), events[:5]
        first_data = next(i for i, e in enumerate(events) if e.startswith("data: "))
        assert first_data > 0 and events[0] == ": ping", "no ping during the prefill: %s" % events[:3]
        pings = sum(e == ": ping" for e in events)

        cl = s5.client()
        n = N(64, 32)
        solo = cl.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=0).choices[0].text
        out = {}

        def go():
            out["a"] = cl.completions.create(model="x", prompt=PROMPT, max_tokens=n, temperature=0).choices[0].text

        t = threading.Thread(target=go)
        t.start()
        time.sleep(0.05)
        st, _, d = s5.raw("POST", "/v1/completions", {"prompt": FAULT + " hello", "max_tokens": 8,
                                                      "temperature": 0})
        overlapped = t.is_alive()
        t.join(120)
        e = err_of(500, d)
        assert st == 500 and e["type"] == "server_error" and "forward pass" in e["message"], (st, e)
        assert overlapped, "the faulty request did not run beside the other one"
        assert out.get("a") == solo, (out.get("a"), solo)
        s5.wait_idle()
        got = []  # two at once: both sessions (the reset one among them) serve again

        def again():
            got.append(cl.completions.create(model="x", prompt=PROMPT, max_tokens=2, temperature=0))

        ts = [threading.Thread(target=again) for _ in range(2)]
        for t2 in ts:
            t2.start()
        for t2 in ts:
            t2.join(120)
        assert len(got) == 2 and all(r2.usage.completion_tokens == 2 for r2 in got), got
        print("  %d pings before and between the events of a long prefill; fault: %s" % (pings, e["message"]))
    finally:
        assert s5.stop() == 0


def main():
    global S
    if not os.path.exists(GEMMA):
        print("  SKIP test_server: no model %s (scripts/fetch-model gemma3-270m)" % GEMMA)
        print("SKIP test_server")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    S = Server("-c", str(CTX), "-np", "2", "--slot-dir", SLOT_DIR, "--max-body", "65536")
    try:
        for fn in [t_health_models_props, t_completion_greedy_equals_run, t_chat_greedy_equals_run,
                   t_stream_chat_with_usage, t_stream_raw_sse_ends_with_done, t_prefix_reuse_cached_tokens,
                   t_stop_strings, t_sampling_seed_is_reproducible, t_errors_openai_client, t_errors_raw_http,
                   t_busy_503_and_disconnect_frees_the_session, t_batched_decode_matches_sequential,
                   t_slots_save_restore_erase, t_metrics_series]:
            test(fn)
    finally:
        rc = S.stop()
    if rc == 0:
        results["pass"] += 1
        print("ok   t_sigterm_clean_exit", flush=True)
    else:
        results["fail"] += 1
        print("  exit status %s\n%s" % (rc, S.stderr()[-2000:]))
        print("FAIL t_sigterm_clean_exit", flush=True)
    for fn in [t_idle_seal_and_sj_greedy, t_kv_auto_and_refusal, t_sigterm_during_stream_exits_0,
               t_sse_ping_and_forward_fault]:
        test(fn)
    print("%d passed, %d failed, %d skipped" % (results["pass"], results["fail"], results["skip"]))
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
