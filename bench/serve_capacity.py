"""serve_capacity.py — sessions per memory budget, measured in the server.

    python3 bench/serve_capacity.py [--bin build/sjkvarn] [--model gemma3-270m] [--ctx 32768]
        [--budget 1G] [--threads 2] [--kv f16,q8_0/q4_0,sj:4/4,sj:3/3t,sj:3/2t] [--window f16|q8_0] [--json]

For each configuration: the plan's prediction (`sjkvarn plan --sessions 1 --json`: how many
sessions fit the budget at the context), then the measurement: `sjkvarn serve --parallel P
--ctx CTX --kv CFG --mem-budget BUDGET` started for P around the prediction; a P counts
when the server starts (its sessions' caches, as allocated and measured by the server, fit
the budget) and answers a completion; the next P must be refused. Loopback only; each
server is stopped with SIGTERM. No timing is involved, so a busy machine does not distort
the table."""
import argparse
import json
import re
import signal
import subprocess
import sys
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="build/sjkvarn")
ap.add_argument("--model", default="gemma3-270m")
ap.add_argument("--ctx", type=int, default=32768)
ap.add_argument("--budget", default="1G")
ap.add_argument("--threads", default="2")
ap.add_argument("--kv", default="f16,q8_0/q4_0,sj:4/4,sj:3/3t,sj:3/2t")
ap.add_argument("--window", default="f16", help="storage of Gemma 3's sliding-window layers: f16 or q8_0")
ap.add_argument("--json", action="store_true")
a = ap.parse_args()


def plan(kv):
    out = subprocess.run([a.bin, "plan", "-m", a.model, "--ctx", str(a.ctx), "--budget", a.budget, "--sessions",
                          "1", "-t", a.threads, "--kv", kv, "--window", a.window, "--json"], capture_output=True, text=True, check=True)
    j = json.loads(out.stdout)
    rows = j.get("configs") or j.get("rows") or j
    row = next(r for r in rows if r.get("kv") == kv or r.get("config") == kv)
    return row


def serve(kv, p):
    """(started and served, stderr tail, kv_allocated_bytes)"""
    cmd = [a.bin, "serve", "-m", a.model, "--port", "0", "-np", str(p), "-c", str(a.ctx), "-t", a.threads, "--kv", kv,
           "--mem-budget", a.budget, "--window", a.window]
    s = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = s.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        err = s.stderr.read()
        s.wait(timeout=60)
        return False, err.strip().splitlines()[-1] if err.strip() else "", 0
    base = "http://127.0.0.1:%s" % m.group(1)
    ok = False
    alloc = 0
    try:
        req = urllib.request.Request(base + "/v1/completions", data=json.dumps(
            {"prompt": "Hello", "max_tokens": 2, "temperature": 0}).encode(), headers={"Content-Type": "application/json"})
        r = json.loads(urllib.request.urlopen(req, timeout=300).read())
        props = json.loads(urllib.request.urlopen(base + "/props", timeout=30).read())
        alloc = props["kv_allocated_bytes"]
        ok = r["usage"]["completion_tokens"] == 2
    finally:
        s.send_signal(signal.SIGTERM)
        s.wait(timeout=60)
    return ok and s.returncode == 0, "", alloc


table = []
for kv in a.kv.split(","):
    row = plan(kv)
    pred = int(row.get("sessions_at_ctx", row.get("sessions", 0)))
    p = max(pred, 1)
    best, alloc, refusal = 0, 0, ""
    ok, _, al = serve(kv, p)
    if ok:
        best, alloc = p, al
        while True:  # upward until refused (bounded by the budget: each step allocates more)
            ok, why, al = serve(kv, best + 1)
            if not ok:
                refusal = why
                break
            best, alloc = best + 1, al
    else:
        while p > 1:
            p -= 1
            ok, why, al = serve(kv, p)
            if ok:
                best, alloc = p, al
                break
        refusal = "(the prediction %d was refused)" % pred
    table.append({"kv": kv, "plan_sessions": pred, "served_sessions": best, "kv_allocated_bytes": alloc,
                  "next_refused": refusal})
    if not a.json:
        print("%-10s plan %3d  served %3d  allocated %8.1f MiB   next: %s" % (kv, pred, best, alloc / 1048576.0,
                                                                             refusal[:160]), flush=True)
if a.json:
    print(json.dumps({"model": a.model, "ctx": a.ctx, "budget": a.budget, "threads": a.threads, "window": a.window,
                      "rows": table},
                     indent=1))
sys.exit(0 if all(r["served_sessions"] == r["plan_sessions"] for r in table) else 1)
