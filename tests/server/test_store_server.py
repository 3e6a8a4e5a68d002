"""test_store_server.py — two `sjkvarn serve` processes sharing prompt blocks through a
real Redis (docs/STORE.md), driven by the PyPI `openai` client:

    python tests/server/test_store_server.py build/sjkvarn

Starts redis-server processes on free loopback ports (one node, and a three-node cluster
made with `redis-cli --cluster create`), two servers on SmolLM2-135M with --kv f16 and
--prefix-store, and checks that the second answers a prompt the first has prefilled with
only the unsealed remainder prefilled (usage.prompt_tokens_details.cached_tokens = the
stored blocks) and the same greedy text; that a corrupted, truncated, foreign-fingerprint
or evicted value falls back to recompute with the same text; and that killing or stopping
Redis under a request loses no request and shows in /metrics. Prints one line per test
and "N passed, N failed, N skipped" last. No redis-server or no model: SKIP
(SJK_REQUIRE_ALL=1 makes the suite fail on it)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402 - the Server class and the test runner

SMOL = os.path.join(ts.MODEL_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")
BLOCK = 128
CTX = "1024"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def prompt_text(path, start, nchars):
    """Real text from the repository's docs: about nchars characters from line start."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().splitlines()[start:]
    out = ""
    for ln in lines:
        out += ln + "\n"
        if len(out) >= nchars:
            break
    return out


# a little over 3 blocks of SmolLM2 tokens: 3 blocks to share, and the remainder
P1 = prompt_text("docs/DESIGN.md", 0, 1450)


# ---- Redis ---------------------------------------------------------------------------
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """One redis-server on a free loopback port, in its own directory, no persistence."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="sjk_redis_")
        for _ in range(5):
            self.port = free_port()
            self.p = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--dir", self.dir, "--protected-mode", "no"] +
                                      list(extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                try:
                    if Resp(self.port).cmd("PING") == "PONG":
                        return
                except OSError:
                    pass
                if self.p.poll() is not None:
                    break
                time.sleep(0.05)
            self.kill()
        raise RuntimeError("redis-server did not start")

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGCONT)
            self.p.kill()
        self.p.wait()

    def close(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisError(Exception):
    pass


class Resp:
    """A minimal RESP2 client: binary-safe commands, replies as Python values."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode() if isinstance(a, str) else bytes(a) if not isinstance(a, int) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RedisError("bad reply %r" % line)


_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _CRC_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def growing_keys(r):
    """{block index: key} of the growing-layer values in a single node (docs/FORMAT.md
    "Prefix-store values": the block index is the u32 at offset 16)."""
    out = {}
    for k in r.cmd("KEYS", "sjkv1:*:g:*"):
        out[int.from_bytes(r.cmd("GETRANGE", k, 16, 19), "little")] = k
    return out


# ---- helpers ---------------------------------------------------------------------------
def serve(url, *extra):
    return ts.Server("-c", CTX, "--kv", "f16", "--prefix-store", url, *extra, key=None, model=SMOL)


def ask(srv, prompt, n=6):
    c = srv.client().with_options(timeout=900)  # sanitizer builds prefill slowly
    r = c.completions.create(model="x", prompt=prompt, max_tokens=n, temperature=0)
    srv.wait_idle(timeout=60)  # the slot is busy until its blocks are published
    return r.choices[0].text, r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens


def erase(srv):
    st, j = srv.json("POST", "/slots/0?action=erase")
    assert st == 200, j


def delta(after, before, name):
    return after["sjkvarn_" + name] - before["sjkvarn_" + name]


REF = {}  # "p1" -> (text, prompt tokens): server A's answer through a cold store


def warm_share(url, tag):
    """Server A answers P1 through a cold store and publishes; server B imports the blocks."""
    a, b = serve(url), serve(url)
    try:
        text_a, n, cached_a = ask(a, P1)
        cut = (n - 1) // BLOCK
        assert cut >= 3, "the prompt has %d tokens, fewer than 3 blocks to share" % n
        ma = a.metrics()
        assert cached_a == 0 and ma["sjkvarn_store_lookups_total"] == 1, (cached_a, ma)
        assert ma["sjkvarn_store_published_total"] == cut and ma["sjkvarn_store_hit_blocks_total"] == 0, ma
        assert ma["sjkvarn_store_enabled"] == 1 and ma["sjkvarn_store_published_bytes_total"] > cut * 100000, ma
        b0 = b.metrics()
        text_b, n_b, cached_b = ask(b, P1)
        mb = b.metrics()
        assert n_b == n and cached_b == cut * BLOCK, "%s: B took %d of %d tokens from the store, want %d" % (
            tag, cached_b, n, cut * BLOCK)
        assert text_b == text_a, "%s: B %r != A %r" % (tag, text_b, text_a)
        assert delta(mb, b0, "store_hit_blocks_total") == cut and delta(mb, b0, "store_hit_tokens_total") == cut * BLOCK
        assert delta(mb, b0, "prefill_tokens_total") == n - cut * BLOCK, mb  # only the remainder
        assert delta(mb, b0, "prompt_tokens_cached_total") == cut * BLOCK
        assert delta(mb, b0, "store_published_total") == 0 and mb["sjkvarn_store_fallbacks_total"] == 0, mb
        if "p1" in REF:
            assert REF["p1"][0] == text_a, "%s: the text differs from the single node's" % tag
        else:
            REF["p1"] = (text_a, n)
        return mb
    finally:
        assert a.stop() == 0 and b.stop() == 0


# ---- tests -----------------------------------------------------------------------------
R = None  # the single node


def t_single_node_second_server_imports_the_blocks():
    warm_share("redis://127.0.0.1:%d" % R.port, "single node")


def t_cluster_second_server_imports_the_blocks():
    nodes = [Redis("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf") for _ in range(3)]
    try:
        addrs = ["127.0.0.1:%d" % r.port for r in nodes]
        subprocess.run(["redis-cli", "--cluster", "create"] + addrs + ["--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        deadline = time.time() + 10
        while not all(b"cluster_state:ok" in Resp(r.port).cmd("CLUSTER", "INFO") for r in nodes):
            assert time.time() < deadline, "the cluster did not form"
            time.sleep(0.1)
        mb = warm_share("redis://" + ",".join(addrs), "cluster")
        # the blocks were spread over the nodes
        held = [Resp(r.port).cmd("DBSIZE") for r in nodes]
        assert sum(held) >= 3 and sum(1 for h in held if h) >= 2, held
        assert mb["sjkvarn_store_errors_total"] == 0, mb
    finally:
        for r in nodes:
            r.close()


def damage_corrupt(r, keys, v):
    v = bytearray(v)
    v[len(v) // 2] ^= 0x55  # a payload byte: the CRC fails
    r.cmd("SET", keys[2], bytes(v))
    return 2


def damage_truncate(r, keys, v):
    r.cmd("SET", keys[2], v[:len(v) - 1000])
    return 2


def damage_foreign(r, keys, v):
    v = bytearray(v)
    v[40:72] = bytes(x ^ 0xA5 for x in v[40:72])  # another model's fingerprint, CRC made valid
    v[-4:] = crc32c(v[:-4]).to_bytes(4, "little")
    r.cmd("SET", keys[2], bytes(v))
    return 2


def damage_evict(r, keys, v):
    r.cmd("DEL", keys[1])
    return 1


def t_damaged_entries_fall_back_with_identical_output():
    url = "redis://127.0.0.1:%d" % R.port
    r = Resp(R.port)
    b = serve(url)
    try:
        text, n = REF["p1"]
        cut = (n - 1) // BLOCK
        keys = growing_keys(r)
        assert sorted(keys) == list(range(cut)), sorted(keys)
        for damage in [damage_corrupt, damage_truncate, damage_foreign, damage_evict]:
            which = {damage_corrupt: 2, damage_truncate: 2, damage_foreign: 2, damage_evict: 1}[damage]
            good = r.cmd("GET", keys[which])
            depth = damage(r, keys, good)
            erase(b)
            m0 = b.metrics()
            got, n_b, cached = ask(b, P1)
            m1 = b.metrics()
            name = damage.__name__
            assert got == text, "%s: %r != %r" % (name, got, text)
            assert cached == depth * BLOCK, "%s of block %d: %d cached" % (name, which, cached)
            assert delta(m1, m0, "store_miss_blocks_total") == cut - depth, name
            assert delta(m1, m0, "prefill_tokens_total") == n - depth * BLOCK, name
            refused = delta(m1, m0, "store_rejected_total")
            assert refused == (0 if damage is damage_evict else 1), (name, refused)
            assert delta(m1, m0, "store_fallbacks_total") == (0 if damage is damage_evict else 1), name
            # the damaged or missing value was published again, exactly as before
            assert delta(m1, m0, "store_published_total") == 1, name
            assert r.cmd("GET", keys[which]) == good, "%s: block %d not restored" % (name, which)
        # the session holds a short prefix of the prompt (a shorter prompt's), the store
        # all of its blocks: the store wins (the session starts fresh and imports them)
        _, n_q, cached_q = ask(b, P1[:400])
        assert 0 < cached_q < BLOCK and n_q < BLOCK, (n_q, cached_q)  # reused from P1, nothing stored
        m0 = b.metrics()
        got, _, cached = ask(b, P1)
        m1 = b.metrics()
        assert got == text and cached == cut * BLOCK, (got, cached)
        assert delta(m1, m0, "prefix_cache_hits_total") == 0 and delta(m1, m0, "store_hit_blocks_total") == cut
    finally:
        assert b.stop() == 0


def t_killing_redis_loses_no_request():
    r2 = Redis()
    url = "redis://127.0.0.1:%d?timeout_ms=300" % r2.port
    a = serve(url)
    try:
        out = {}

        def go():
            try:
                out["r"] = ask(a, P1)
            except Exception as e:  # noqa: BLE001 - reported below
                out["e"] = e

        t = threading.Thread(target=go)
        t.start()
        time.sleep(0.5)  # the lookup is done (an empty store), the prefill runs
        r2.kill()
        t.join(900)
        assert "r" in out, out
        m = a.metrics()
        # the request completed with the cold store's text; what it could not publish is counted
        assert out["r"][0] == REF["p1"][0] and out["r"][2] == 0, (out["r"], REF["p1"])
        assert m["sjkvarn_store_publish_failures_total"] + m["sjkvarn_store_lookup_failures_total"] >= 1, m
        assert m["sjkvarn_store_errors_total"] >= 1 and m["sjkvarn_store_published_total"] == 0, m
    finally:
        assert a.stop() == 0
        r2.close()


def t_hung_redis_costs_bounded_time():
    r3 = Redis()
    url = "redis://127.0.0.1:%d?timeout_ms=300" % r3.port
    a = serve(url)
    try:
        r3.p.send_signal(signal.SIGSTOP)  # accepts connections (the kernel does), never answers
        got, n, cached = ask(a, P1)
        assert got == REF["p1"][0] and cached == 0, (got, cached)
        m = a.metrics()
        assert m["sjkvarn_store_lookup_failures_total"] == 1 and m["sjkvarn_store_fallbacks_total"] == 1, m
        assert m["sjkvarn_store_publish_failures_total"] == (n - 1) // BLOCK, m
        assert m["sjkvarn_prefill_tokens_total"] == n, m
        # a few 300 ms timeouts at most (a node that failed is skipped for a second)
        assert m["sjkvarn_store_seconds_total{op=\"lookup\"}"] < 2.0, m
        assert m["sjkvarn_store_seconds_total{op=\"publish\"}"] < 2.0, m
        assert "got no answer" in a.stderr(), a.stderr()[-2000:]
    finally:
        assert a.stop() == 0
        r3.close()


def main():
    global R
    if not os.path.exists(SMOL):
        print("  SKIP test_store_server: no model %s (scripts/fetch-model smollm2-135m)" % SMOL)
        print("SKIP test_store_server\n0 passed, 0 failed, 1 skipped")
        return 0
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        print("  SKIP test_store_server: no redis-server / redis-cli (apt-get install redis-server)")
        print("SKIP test_store_server\n0 passed, 0 failed, 1 skipped")
        return 0
    R = Redis()
    try:
        for fn in [t_single_node_second_server_imports_the_blocks, t_cluster_second_server_imports_the_blocks,
                   t_damaged_entries_fall_back_with_identical_output, t_killing_redis_loses_no_request,
                   t_hung_redis_costs_bounded_time]:
            ts.test(fn)
    finally:
        R.close()
    res = ts.results
    print("%d passed, %d failed, %d skipped" % (res["pass"], res["fail"], res["skip"]))
    return 1 if res["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
