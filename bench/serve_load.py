"""serve_load.py — load run of `sjkvarn serve` on loopback: N concurrent streaming clients.

    $(scripts/server-venv) bench/serve_load.py [--bin build/sjkvarn] [--model gemma3-270m]
        [--clients 1,2,4,8] [--requests 4] [--max-tokens 64] [--ctx 2048] [--threads T]
        [--kv f16] [--seconds 120] [--json]

Starts one server with --parallel max(N) on 127.0.0.1 (a free port) and, for each N, runs
N client threads that each send --requests streamed completions (greedy, max_tokens
--max-tokens, include_usage) one after another. Bounded: each N stops issuing requests
after --seconds, and every request has a timeout. Reports per N: requests completed, clean
503s, other failures, the aggregate decode rate seen by the clients (completion tokens /
wall time of the N clients), the engine's decode rate over that interval (from /metrics:
rows / decode seconds) and its mean batch (rows / steps), and the server's RSS after the
run (VmRSS of the process). The ratio of the N = 4 engine rate to the N = 1 rate is the
batched-decode gain. Timings are only meaningful on an otherwise idle machine."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import openai

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="build/sjkvarn")
ap.add_argument("--model", default="gemma3-270m")
ap.add_argument("--clients", default="1,2,4,8")
ap.add_argument("--requests", type=int, default=4)
ap.add_argument("--max-tokens", type=int, default=64)
ap.add_argument("--ctx", type=int, default=2048)
ap.add_argument("--threads", default=str(os.cpu_count() or 1))
ap.add_argument("--kv", default="f16")
ap.add_argument("--seconds", type=float, default=120)
ap.add_argument("--json", action="store_true")
a = ap.parse_args()
ns = [int(x) for x in a.clients.split(",")]
PROMPTS = ["The history of the river begins", "A short guide to baking bread:", "In the year 2050, cities",
           "The most important rule of chess is", "Dear diary, today I", "Photosynthesis is the process",
           "The old lighthouse keeper said", "Three reasons to learn a language:"]

cmd = [a.bin, "serve", "-m", a.model, "--port", "0", "-np", str(max(ns)), "-c", str(a.ctx), "-t", a.threads,
       "--kv", a.kv]
srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
line = srv.stdout.readline()
m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
if not m:
    srv.kill()
    sys.exit("server did not start: " + line)
base = "http://127.0.0.1:%s" % m.group(1)


def metrics():
    import urllib.request
    out = {}
    for ln in urllib.request.urlopen(base + "/metrics", timeout=30).read().decode().splitlines():
        if ln and not ln.startswith("#"):
            k, v = ln.rsplit(" ", 1)
            out[k] = float(v)
    return out


def rss_kib():
    with open("/proc/%d/status" % srv.pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=300)
rows = []
try:
    for n in ns:
        stats = {"ok": 0, "busy": 0, "fail": 0, "tokens": 0}
        lock = threading.Lock()
        t_end = time.time() + a.seconds

        def worker(i):
            for r in range(a.requests):
                if time.time() > t_end:
                    return
                try:
                    toks = 0
                    for ch in client.completions.create(model="x", prompt=PROMPTS[(i + r) % len(PROMPTS)],
                                                        max_tokens=a.max_tokens, temperature=0, stream=True,
                                                        stream_options={"include_usage": True}):
                        if ch.usage:
                            toks = ch.usage.completion_tokens
                    with lock:
                        stats["ok"] += 1
                        stats["tokens"] += toks
                except openai.APIStatusError as e:
                    with lock:
                        stats["busy" if e.status_code == 503 else "fail"] += 1
                except Exception:  # noqa: BLE001 - counted, the run goes on
                    with lock:
                        stats["fail"] += 1

        m0 = metrics()
        t0 = time.time()
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(a.seconds + 300)
        wall = time.time() - t0
        m1 = metrics()
        d_rows = m1["sjkvarn_decode_rows_total"] - m0["sjkvarn_decode_rows_total"]
        d_steps = m1["sjkvarn_decode_steps_total"] - m0["sjkvarn_decode_steps_total"]
        d_s = m1["sjkvarn_decode_seconds_total"] - m0["sjkvarn_decode_seconds_total"]
        rows.append({"clients": n, "requests_ok": stats["ok"], "busy_503": stats["busy"], "failed": stats["fail"],
                     "tokens": stats["tokens"], "wall_s": round(wall, 2),
                     "client_tok_s": round(stats["tokens"] / wall, 1) if wall else 0,
                     "engine_decode_tok_s": round(d_rows / d_s, 1) if d_s else 0,
                     "mean_batch": round(d_rows / d_steps, 2) if d_steps else 0, "rss_mib": round(rss_kib() / 1024, 1)})
        if not a.json:
            print("N=%(clients)d: %(requests_ok)d ok, %(busy_503)d busy, %(failed)d failed; %(tokens)d tokens in "
                  "%(wall_s)ss = %(client_tok_s)s tok/s (clients), engine decode %(engine_decode_tok_s)s tok/s, "
                  "mean batch %(mean_batch)s, RSS %(rss_mib)s MiB" % rows[-1], flush=True)
finally:
    srv.send_signal(signal.SIGTERM)
    rc = srv.wait(timeout=30)
base1 = next((r for r in rows if r["clients"] == 1), None)
summary = {"server": " ".join(cmd), "exit_status": rc, "runs": rows}
if base1 and base1["engine_decode_tok_s"]:
    summary["engine_gain_vs_n1"] = {str(r["clients"]): round(r["engine_decode_tok_s"] / base1["engine_decode_tok_s"], 2)
                                    for r in rows}
if a.json:
    print(json.dumps(summary, indent=1))
else:
    if "engine_gain_vs_n1" in summary:
        print("engine decode tok/s relative to N=1: " +
              ", ".join("N=%s %.2fx" % kv for kv in summary["engine_gain_vs_n1"].items()))
    print("server exit status %d" % rc)
sys.exit(0 if rc == 0 and all(r["failed"] == 0 for r in rows) else 1)
