#!/usr/bin/env python3
"""Measures `toolnexus serve` (the binary given) under faults and abuse:
a bad --cors-origin, bad store files, slowloris/idle/flooding connections,
an fd limit (EMFILE), over-limit bodies read by urllib and Node fetch, 1 MiB
tasks in the memory store (RSS), sends to a model that never answers
(model connections), a silent config agent, SIGTERM with work in flight.
Prints one line per figure; compare two builds by running it on each.
Usage: python3 host-native/benches/faults.py target/release/toolnexus [item ...]
Items: cors store slow idle emfile 413 rss work config sigterm (default: all).
Needs python3, node and util-linux prlimit; loopback only."""
import json, os, socket, subprocess, sys, tempfile, threading, time, urllib.request, urllib.error

BIN = sys.argv[1]
ITEMS = set(sys.argv[2:]) or {"cors", "store", "slow", "idle", "emfile", "413", "rss", "work", "config", "sigterm"}

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(args, prefix=(), wait=15):
    port = free_port()
    p = subprocess.Popen(list(prefix) + [BIN, "serve", "--addr", f"127.0.0.1:{port}"] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t0 = time.time()
    while time.time() - t0 < wait:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, port, time.time() - t0
        except OSError:
            if p.poll() is not None:
                return p, None, time.time() - t0
            time.sleep(0.05)
    return p, None, time.time() - t0

def stop(p):
    p.kill(); p.wait()

def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))

def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])

def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

def rpc(port, method, params, version="1.0", timeout=30):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body,
                                 headers={"Content-Type": "application/json", "A2A-Version": version})
    return json.load(urllib.request.urlopen(req, timeout=timeout))

def msg(text, blocking):
    return {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": not blocking}}

def closed_within(socks, secs):
    deadline = time.time() + secs
    closed = 0
    for s in socks:
        s.settimeout(max(0.01, deadline - time.time()))
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    closed += 1; break
        except (socket.timeout, TimeoutError):
            pass
        except OSError:
            closed += 1
    return closed

def out(item, text):
    print(f"{item:8} {text}", flush=True)

if "cors" in ITEMS:
    t0 = time.time()
    try:
        r = subprocess.run([BIN, "serve", "--addr", "127.0.0.1:0", "--llm", "echo", "--cors-origin", "http://a\r\nX: 1"],
                           capture_output=True, text=True, timeout=5)
        out("cors", f"exit {r.returncode} in {time.time()-t0:.2f}s: {r.stderr.strip()[:120]}")
    except subprocess.TimeoutExpired:
        out("cors", "still running after 5 s (accepted the origin)")

if "store" in ITEMS:
    d = tempfile.mkdtemp()
    for name, body in [("empty.json", ""), ("trunc.json", '{"id":'), ("array.json", "[]"), ("other.json", '{"a":1}')]:
        open(os.path.join(d, name), "w").write(body)
    os.mkdir(os.path.join(d, "dir.json")); os.mkfifo(os.path.join(d, "pipe.json"))
    p, port, took = start(["--llm", "echo", "--store", f"file:{d}"], wait=10)
    state = "listening" if port else (f"exited {p.returncode}" if p.poll() is not None else "hung (not listening after 10 s)")
    q = os.path.join(d, "quarantine")
    out("store", f"{state} after {took:.2f}s; quarantined: {sorted(os.listdir(q)) if os.path.isdir(q) else []}")
    stop(p)

if "slow" in ITEMS or "idle" in ITEMS:
    p, port, _ = start(["--llm", "echo"])
    base = fds(p.pid)
    if "slow" in ITEMS:
        socks = []
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-A"); socks.append(s)
        time.sleep(0.5)
        peak = fds(p.pid)
        c = closed_within(socks, 25)
        out("slow", f"1000 slowloris connections: server fds {base} -> {peak}; closed by the server within 25 s: {c}; fds after: {fds(p.pid)}")
        for s in socks: s.close()
        time.sleep(0.5)
    if "idle" in ITEMS:
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(5000)]
        time.sleep(0.5)
        peak = fds(p.pid)
        c = closed_within(socks, 25)
        out("idle", f"5000 idle connections: server fds {base} -> {peak}; closed within 25 s: {c}; fds after: {fds(p.pid)}; RSS {rss_mib(p.pid):.0f} MiB")
        for s in socks: s.close()
    stop(p)

if "emfile" in ITEMS:
    p, port, _ = start(["--llm", "echo"], prefix=("prlimit", "--nofile=64"))
    socks = []
    for _ in range(100):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    time.sleep(1)
    t0, c0 = time.time(), cpu_ticks(p.pid)
    time.sleep(3)
    cpu = (cpu_ticks(p.pid) - c0) / os.sysconf("SC_CLK_TCK") / (time.time() - t0) * 100
    # A new client while the flood holds every descriptor, then after it leaves.
    def card():
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=5).read(); return "served"
        except Exception as e:
            return f"failed ({type(e).__name__})"
    during = card()
    for s in socks: s.close()
    time.sleep(0.5)
    after = card()
    out("emfile", f"fd limit 64, {len(socks)} idle connections: server CPU {cpu:.0f}% over 3 s; new client during: {during}; after the flood closes: {after}")
    stop(p)

if "413" in ITEMS:
    p, port, _ = start(["--llm", "echo"])
    for n in (10 * 1024 * 1024, 1024 * 1024 + 1):
        ok = 0
        for _ in range(10):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=b"x" * n, headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=30)
            except urllib.error.HTTPError as e:
                ok += e.code == 413
            except Exception:
                pass
        node = subprocess.run(["node", "-e", """
const [url, n] = [process.argv[1], Number(process.argv[2])]; let ok = 0;
(async () => { for (let i = 0; i < 10; i++) { try { const r = await fetch(url, {method: "POST", body: Buffer.alloc(n, 120)}); await r.text(); ok += r.status === 413; } catch (e) {} } console.log(ok); })();
""", f"http://127.0.0.1:{port}/", str(n)], capture_output=True, text=True, timeout=120).stdout.strip()
        out("413", f"{n} bytes: urllib read 413 {ok}/10, node fetch {node}/10")
    stop(p)

if "rss" in ITEMS:
    p, port, _ = start(["--llm", "echo"])
    text = "x" * (1024 * 1024 - 300)
    t0 = time.time()
    for i in range(1000):
        rpc(port, "SendMessage", msg(text, True))
    out("rss", f"1000 tasks of ~1 MiB (memory store): RSS {rss_mib(p.pid):.0f} MiB after {time.time()-t0:.1f}s")
    stop(p)

def silent_model():
    """A TCP server that accepts and never answers; counts connections."""
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0)); srv.listen(4096)
    state = {"n": 0, "socks": []}
    def loop():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            state["n"] += 1; state["socks"].append(c)
    threading.Thread(target=loop, daemon=True).start()
    return srv, state

if "work" in ITEMS:
    srv, st = silent_model()
    p, port, _ = start(["--llm", "openai", "--llm-base-url", f"http://127.0.0.1:{srv.getsockname()[1]}", "--model", "m", "--api-key-env", "PATH"])
    refused = 0
    for _ in range(1500):
        try:
            r = rpc(port, "SendMessage", msg("hi", False))
            refused += "error" in r
        except Exception:
            refused += 1
    time.sleep(2)
    out("work", f"1500 non-blocking sends, a model that never answers: model connections {st['n']}; refused as busy: {refused}; server fds {fds(p.pid)}")
    stop(p); srv.close()

if "config" in ITEMS:
    srv, _ = silent_model()
    d = tempfile.mkdtemp(); cfg = os.path.join(d, "c.json")
    json.dump({"agents": {"s": {"card": f"http://127.0.0.1:{srv.getsockname()[1]}/.well-known/agent-card.json"}}}, open(cfg, "w"))
    p, port, took = start(["--llm", "echo", "--config", cfg], wait=20)
    out("config", f"a config agent whose card never answers: {'listening after %.1fs' % took if port else 'not listening after 20 s'}")
    stop(p); srv.close()

if "sigterm" in ITEMS:
    srv, _ = silent_model()
    p, port, _ = start(["--llm", "openai", "--llm-base-url", f"http://127.0.0.1:{srv.getsockname()[1]}", "--model", "m", "--api-key-env", "PATH"])
    threading.Thread(target=lambda: rpc(port, "SendMessage", msg("hi", True), timeout=60), daemon=True).start()
    rpc(port, "SendMessage", msg("hi", False))
    idle = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.5)
    t0 = time.time(); p.terminate(); p.wait(timeout=60)
    out("sigterm", f"a blocking request and a task that never end: exit {p.returncode} {time.time()-t0:.1f}s after SIGTERM")
    srv.close()
