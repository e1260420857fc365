#!/usr/bin/env python3
"""Issue 11's adversarial campaign against the `toolnexus` binary, item by item.

Each item re-runs the attack the issue describes and prints the figure the
issue quoted ("before") beside what this binary does now ("now"), ending with
"holds" or "DOES NOT HOLD". Everything runs on 127.0.0.1; every wait is
bounded. Run it through campaign.sh (it builds the release binary and raises
the fd limit); by hand:

    python3 host-native/benches/campaign.py target/release/toolnexus [ITEM ...]

ITEM is a number 1-17 (default: all). Needs python3, node, util-linux
(prlimit, unshare, nsenter) and /usr/bin/time; item 2 needs root (a tmpfs in a
private mount namespace makes a real full disk and a real read-only store).
"""
import http.client, json, os, random, re, shutil, signal, socket, subprocess, sys, tempfile
import threading, time, urllib.error, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIN = os.path.abspath(sys.argv[1])
ITEMS = [int(a) for a in sys.argv[2:]] or list(range(1, 18))
TMP = tempfile.mkdtemp(prefix="campaign-")
CACHE = os.path.join(TMP, "card-cache")
failures = []

# ---------------------------------------------------------------- printing

def item(n, title, before):
    print(f"\n§{n} {title}", flush=True)
    print(f"   before (issue 11): {before}", flush=True)

def now(text):
    print(f"   now: {text}", flush=True)

def verdict(n, ok, why=""):
    print(f"   => {'holds' if ok else 'DOES NOT HOLD'}{': ' + why if why and not ok else ''}", flush=True)
    if not ok:
        failures.append(n)

# ---------------------------------------------------------------- processes

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

class Serve:
    """`toolnexus serve` on a free port, stderr collected line by line."""

    def __init__(self, args, prefix=(), wait=20, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.err = []
        self.p = subprocess.Popen(list(prefix) + [BIN, "serve", "--addr", f"127.0.0.1:{self.port}"] + list(args),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        threading.Thread(target=self._read_err, daemon=True).start()
        self.started = time.time()
        first, said = [], threading.Event()

        def read_out():
            first.append(self.p.stdout.readline().decode(errors="replace"))  # "listening on …" or EOF
            said.set()
            self.p.stdout.read()
        threading.Thread(target=read_out, daemon=True).start()
        said.wait(wait)  # a server that hangs before listening is reported, not waited for
        self.listen_s = time.time() - self.started
        self.listening = bool(first) and first[0].startswith("listening on")
        self.pid = self.p.pid
        # Under unshare/prlimit the server is a child of the wrapper (or the wrapper exec'd it).
        self.pid = server_pid(self.p.pid)

    def _read_err(self):
        for line in self.p.stderr:
            self.err.append(line.decode(errors="replace"))

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()

def server_pid(pid):
    """The toolnexus process itself: `pid`, or its one child when pid is a wrapper."""
    for _ in range(100):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return pid
        if exe == BIN:
            return pid
        try:
            kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        except OSError:
            kids = []
        if kids:
            pid = int(kids[0]); continue
        time.sleep(0.02)
    return pid

def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1

def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])

def cpu_pct(pid, secs):
    t0, c0 = time.time(), cpu_ticks(pid)
    time.sleep(secs)
    return (cpu_ticks(pid) - c0) / os.sysconf("SC_CLK_TCK") / (time.time() - t0) * 100

def status_kib(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0

def run_cli(args, timeout=120, env_extra=None):
    """Runs `toolnexus ARGS` under /usr/bin/time -v: (exit, stdout, stderr, wall s, peak RSS MiB)."""
    tf = os.path.join(TMP, "time.txt")
    env = dict(os.environ, TOOLNEXUS_CACHE_DIR=CACHE, **(env_extra or {}))
    t0 = time.time()
    r = subprocess.run(["/usr/bin/time", "-v", "-o", tf, BIN] + args, capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, env=env)
    wall = time.time() - t0
    rss = 0.0
    for line in open(tf):
        if "Maximum resident set size" in line:
            rss = int(line.split(":")[1]) / 1024
    return r.returncode, r.stdout, r.stderr, wall, rss

# ---------------------------------------------------------------- HTTP helpers

def rpc(url, method, params, version="1.0", timeout=60):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(url + "/", data=body,
                                 headers={"Content-Type": "application/json", "A2A-Version": version})
    return json.load(urllib.request.urlopen(req, timeout=timeout))

class Conn:
    """One keep-alive JSON-RPC connection (A2A 1.0)."""

    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def rpc(self, method, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        self.c.request("POST", "/", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})
        return json.loads(self.c.getresponse().read())

def msg(text, blocking):
    return {"message": {"role": "ROLE_USER", "messageId": f"m{random.random()}", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": not blocking}}

def state_of(reply):
    """The task state in a 1.0 reply (SendMessage's {task}, or a bare task), or the error code."""
    if "error" in reply:
        return reply["error"].get("code")
    r = reply.get("result", {})
    t = r.get("task", r)
    return t.get("status", {}).get("state", "?").replace("TASK_STATE_", "").lower().replace("_", "-")

def task_id(reply):
    r = reply.get("result", {})
    return r.get("task", r).get("id")

def healthz(url):
    try:
        return urllib.request.urlopen(url + "/healthz", timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return type(e).__name__

def hooks(serve):
    """Terminal-state hook lines of `serve` ("toolnexus: task ID STATE"), per task id."""
    seen = {}
    for line in list(serve.err):
        m = re.match(r"toolnexus: task (\S+) (completed|failed|canceled|rejected)\s*$", line)
        if m:
            seen.setdefault(m.group(1), []).append(m.group(2))
    return seen

# ---------------------------------------------------------------- peers on 127.0.0.1

class Peer:
    """A scripted HTTP peer: script(req) -> (status, headers, body bytes, delay s).
    `req` has method, path, headers, body (parsed JSON or None), rpc, n (how
    many earlier requests had this rpc method), at. Every request is logged."""

    def __init__(self, script):
        self.log, self.lock, self.counts, self.conns = [], threading.Lock(), {}, 0
        peer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with peer.lock:
                    peer.conns += 1

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                rpc_name = body.get("method", "") if isinstance(body, dict) else ""
                with peer.lock:
                    k = peer.counts.get(rpc_name, 0); peer.counts[rpc_name] = k + 1
                    req = dict(method=self.command, path=self.path, headers=dict(self.headers), body=body,
                               rpc=rpc_name, n=k, at=time.time())
                    peer.log.append(req)
                status, headers, out, delay = script(req)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k2, v in headers:
                        self.send_header(k2, v)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    self.close_connection = True

            do_GET = do_POST = handle_one

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that hangs up mid-answer (a card cut at its limit) is expected

        self.srv = Server(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def calls(self, name):
        return [r for r in self.log if r["rpc"] == name]

    def close(self):
        self.srv.shutdown(); self.srv.server_close()

def js(status, v, headers=()):
    return status, [("Content-Type", "application/json")] + list(headers), json.dumps(v).encode(), 0

def result(req, v, headers=()):
    return js(200, {"jsonrpc": "2.0", "id": (req["body"] or {}).get("id"), "result": v}, headers)

def rpc_error(req, code, message):
    return js(200, {"jsonrpc": "2.0", "id": (req["body"] or {}).get("id"), "error": {"code": code, "message": message}})

def model(delay=lambda: 0.0, text="done"):
    """An OpenAI-style model: answers every chat completion with `text` after delay()."""
    return Peer(lambda req: (200, [("Content-Type", "application/json")],
                             json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode(),
                             delay()))

def silent_model():
    """A TCP server that accepts and never answers; counts connections and their peak."""
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0)); srv.listen(4096)
    st = {"n": 0, "socks": [], "url": f"http://127.0.0.1:{srv.getsockname()[1]}"}

    def loop():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            st["n"] += 1; st["socks"].append(c)
    threading.Thread(target=loop, daemon=True).start()
    st["srv"] = srv
    return st

def close_silent(st):
    st["srv"].close()
    for s in st["socks"]:
        s.close()

def openai_args(url):
    return ["--llm", "openai", "--llm-base-url", url, "--model", "m"]

def closed_times(socks, opened, secs):
    """Waits up to `secs` for the server to close each socket: seconds from open to close, per closed socket."""
    deadline = time.time() + secs
    out = []
    for s in socks:
        s.settimeout(max(0.01, deadline - time.time()))
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    out.append(time.time() - opened); break
        except (socket.timeout, TimeoutError):
            pass
        except OSError:
            out.append(time.time() - opened)
    return out

def timed_get(url, timeout=40):
    t0 = time.time()
    try:
        urllib.request.urlopen(url, timeout=timeout).read()
        return f"served after {time.time() - t0:.1f} s"
    except Exception as e:
        return f"failed after {time.time() - t0:.1f} s ({type(e).__name__})"

def median(xs):
    xs = sorted(xs); return xs[len(xs) // 2] if xs else float("nan")

# ================================================================= items

def item1():
    item(1, "cancel racing progress on the file store (2 x 1,000 tasks)",
         "961 answered canceled; 213 stayed working forever, 16 ended completed; the on_task hook fired twice for 96")
    ok = True
    # Two races: a cancel sent at once against the echo model's instant answer (the
    # cancel meets the terminal save), and one sent 0-30 ms in against a model that
    # answers 0-30 ms in (the cancel meets the working save or the answer).
    for what, args, pause in (("echo model, cancel at once", ["--llm", "echo"], 0.0),
                              ("model 0-30 ms, cancel 0-30 ms", None, 0.03)):
        rnd = random.Random(11)
        m = model(delay=lambda: rnd.random() * 0.03)
        d = os.path.join(TMP, f"store1-{pause}")
        s = Serve(["--store", f"file:{d}"] + (args or openai_args(m.url)))
        answers, lock = {}, threading.Lock()
        N, THREADS = 1000, 8

        def worker(k):
            c, r = Conn(s.port), random.Random(k)
            for _ in range(N // THREADS + (k < N % THREADS)):
                tid = task_id(c.rpc("SendMessage", msg("race", False)))
                if pause:
                    time.sleep(r.random() * pause)
                a = state_of(c.rpc("CancelTask", {"id": tid}))
                with lock:
                    answers[tid] = a
        t0 = time.time()
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
        [t.start() for t in ts]; [t.join() for t in ts]
        took = time.time() - t0
        # Let every task settle (bounded), then read each one back.
        c = Conn(s.port)
        final = {}
        for _ in range(25):
            final = {t: state_of(c.rpc("GetTask", {"id": t})) for t in answers}
            if all(v in ("completed", "canceled", "failed") for v in final.values()) and \
                    len(hooks(s)) >= len(answers):
                break
            time.sleep(0.2)
        files = {}
        for name in os.listdir(d):
            if name.endswith(".json"):
                t = json.load(open(os.path.join(d, name)))
                files[t["id"]] = t["status"]["state"].replace("TASK_STATE_", "").lower()
        hk = hooks(s)
        canceled = [t for t, a in answers.items() if a == "canceled"]
        stuck = sum(1 for v in final.values() if v not in ("completed", "canceled", "failed"))
        cancel_then_other = sum(1 for t in canceled if final[t] != "canceled")
        stored_differs = sum(1 for t in canceled if files.get(t) != "canceled")
        refused = sum(1 for a in answers.values() if a == -32002)
        other = len(answers) - len(canceled) - refused
        hook_not_once = sum(1 for t in answers if len(hk.get(t, [])) != 1)
        hook_wrong = sum(1 for t in answers if hk.get(t) and hk[t][-1] != final[t])
        now(f"[{what}] {len(answers)} tasks in {took:.1f} s (8 clients): CancelTask answered canceled {len(canceled)}, "
            f"-32002 (already finished) {refused}, other {other}")
        now(f"[{what}] after settling: not terminal {stuck}; answered canceled but now completed/other "
            f"{cancel_then_other}; task file not canceled {stored_differs}; hook calls != 1 for {hook_not_once} "
            f"tasks; hook state != stored state {hook_wrong}")
        ok &= stuck == 0 and cancel_then_other == 0 and stored_differs == 0 and hook_not_once == 0 \
            and hook_wrong == 0 and other == 0
        s.stop(); m.close()
    verdict(1, ok, "see the lines above")

def in_namespace_store(size_kib):
    """serve's prefix: a private mount namespace with a small tmpfs at STORE."""
    mnt = os.path.join(TMP, "mnt")
    os.makedirs(mnt, exist_ok=True)
    return mnt, ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 f'mount -t tmpfs -o size={size_kib}k tmpfs "{mnt}" && exec "$0" "$@"']

def item2():
    item(2, "store failures after the first save (a full disk; a store made read-only mid-task)",
         "full disk: a blocking SendMessage returned completed while GetTask said working forever; "
         "read-only: CancelTask said canceled but nothing was saved; the hook reported states never stored")
    if os.geteuid() != 0:
        now("skipped: needs root (a tmpfs in a private mount namespace)"); return
    ok = True
    for fault in ("full", "read-only"):
        m = model(delay=lambda: 1.5)
        mnt, prefix = in_namespace_store(512)
        s = Serve(["--store", f"file:{mnt}/store"] + openai_args(m.url), prefix=prefix)
        root = f"/proc/{s.pid}/root{mnt}"
        got = {}
        th = threading.Thread(target=lambda: got.update(a=rpc(s.url, "SendMessage", msg("blocking", True))))
        th.start()
        b = task_id(rpc(s.url, "SendMessage", msg("to cancel", False)))
        for _ in range(100):  # both tasks saved working
            if len(m.log) >= 2:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        if fault == "full":
            try:
                with open(f"{root}/fill", "wb") as f:
                    while True:
                        f.write(b"\0" * 65536)
            except OSError:
                pass
        else:
            subprocess.run(["nsenter", "-t", str(s.pid), "-m", "mount", "-o", "remount,ro", mnt], check=True)
        cancel = rpc(s.url, "CancelTask", {"id": b})
        th.join(30)
        a_reply = got.get("a", {})
        a = task_id(a_reply) or next((t for t in os.listdir(f"{root}/store") if t.endswith(".json") and
                                      t[:-5] != b), "?")[:-5]
        ga, gb = state_of(rpc(s.url, "GetTask", {"id": a})), state_of(rpc(s.url, "GetTask", {"id": b}))
        health = healthz(s.url)
        hk_during = {t: v for t, v in hooks(s).items()}
        def said(r):
            e = r.get("error")
            return f"{e['code']} {e['message'][:110]!r}" if e else state_of(r)
        now(f"[{fault}] blocking SendMessage got {said(a_reply)}")
        now(f"[{fault}] CancelTask got {said(cancel)}")
        now(f"[{fault}] reads go on: GetTask says {ga} / {gb} (what is stored); /healthz {health}; "
            f"hook lines for states not stored: {sum(len(v) for v in hk_during.values())}")
        # The fault clears: the refused terminal states are saved on a later try.
        if fault == "full":
            os.remove(f"{root}/fill")
        else:
            subprocess.run(["nsenter", "-t", str(s.pid), "-m", "mount", "-o", "remount,rw", mnt], check=True)
        t0 = time.time()
        while time.time() - t0 < 20:
            ga2 = state_of(rpc(s.url, "GetTask", {"id": a}))
            if ga2 == "completed" and healthz(s.url) == 200:
                break
            time.sleep(0.1)
        gb2 = state_of(rpc(s.url, "GetTask", {"id": b}))
        hk = hooks(s)
        now(f"[{fault}] fault cleared: {time.time() - t0:.1f} s later GetTask says {ga2} / {gb2}, /healthz "
            f"{healthz(s.url)}, hook calls {len(hk.get(a, []))} / {len(hk.get(b, []))}")
        ok &= (isinstance(a_reply.get("error", {}).get("code"), int) and a_reply["error"]["code"] == -32603
               and cancel.get("error", {}).get("code") == -32603 and ga == "working" and gb == "working"
               and health == 503 and not hk_during and ga2 == "completed" and len(hk.get(a, [])) == 1)
        s.stop(); m.close()
    verdict(2, ok, "see the lines above")

def item3():
    item(3, "bad files in the store at startup",
         "an empty, truncated, non-task or array .json, or a folder x.json, made serve exit 1; a FIFO x.json hung startup")
    d = os.path.join(TMP, "store3"); os.makedirs(d)
    bad = {"empty.json": "", "trunc.json": '{"id":', "array.json": "[]", "other.json": '{"a":1}'}
    for name, body in bad.items():
        open(os.path.join(d, name), "w").write(body)
    os.mkdir(os.path.join(d, "dir.json")); os.mkfifo(os.path.join(d, "pipe.json"))
    s = Serve(["--llm", "echo", "--store", f"file:{d}"], wait=10)
    q = os.path.join(d, "quarantine")
    quarantined = sorted(os.listdir(q)) if os.path.isdir(q) else []
    served = state_of(rpc(s.url, "SendMessage", msg("hi", True))) if s.listening else "-"
    time.sleep(0.2)
    warnings = sum("quarantine" in l for l in s.err)
    now(f"{'listening after %.0f ms' % (s.listen_s * 1000) if s.listening else 'NOT listening'}; quarantined {quarantined}; "
        f"left in place: dir.json (a folder), pipe.json (a FIFO, never opened); {warnings} warning lines; "
        f"a new task: {served}")
    verdict(3, s.listening and quarantined == sorted(bad) and served == "completed")
    s.stop()

def item4():
    item(4, "a long task id; model failures",
         "GetTask with a 300-byte id on the file store: -32603 with the absolute store path ('File name too long'); "
         "model-failure text carried the internal model URL")
    d = os.path.join(TMP, "store4")
    s = Serve(["--llm", "echo", "--store", f"file:{d}"])
    rs = [rpc(s.url, "GetTask", {"id": "x" * n}) for n in (256, 300, 4096)]
    codes = [r.get("error", {}).get("code") for r in rs]
    leaked = sum(d in json.dumps(r) or TMP in json.dumps(r) for r in rs)
    s.stop()
    now(f"GetTask with 256-, 300- and 4,096-byte ids: codes {codes}; answers naming the store path: {leaked}")
    dead = free_port()
    s = Serve(openai_args(f"http://127.0.0.1:{dead}/internal-secret-path"))
    r = rpc(s.url, "SendMessage", msg("hi", True))
    text = json.dumps(r)
    named = str(dead) in text or "internal-secret-path" in text
    st = state_of(r)
    m = r.get("result", {}).get("task", {}).get("status", {}).get("message", {}).get("parts", [{}])[0].get("text", "")
    now(f"a model that refuses connections: task {st}, status message {m!r}; names the model URL: {named}")
    verdict(4, codes == [-32001] * 3 and leaked == 0 and st == "failed" and not named)
    s.stop()

class Flood:
    """`n` connections opened at once without blocking (the kernel retries SYNs the
    server's backlog drops), each sending `first` when connected and then `trickle`
    every 2 s; records when each connected and when the server closed it, and probes
    with a new client (GET /healthz) every `probe_every` s."""

    def __init__(self, port, n, first=b"", trickle=b""):
        import selectors
        self.port, self.n, self.first, self.trickle = port, n, first, trickle
        self.sel = selectors.DefaultSelector()
        self.t0 = time.time()
        self.connected, self.closed, self.probes = {}, {}, []
        self.socks = []
        for i in range(n):
            c = socket.socket(); c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            self.socks.append(c)
            self.sel.register(c, selectors.EVENT_WRITE, i)

    def run(self, secs, pid, probe_every=2.0):
        import selectors
        deadline, next_trickle = self.t0 + secs, self.t0 + 2
        self.peak_fds, cpu0 = fds(pid), (time.time(), cpu_ticks(pid))
        done = threading.Event()

        def probing():  # a new client every `probe_every` s, each on its own
            while not done.wait(probe_every):
                if time.time() + 0.5 < deadline:
                    self.probes.append(self._probe(deadline - time.time()))
        prober = threading.Thread(target=probing, daemon=True)
        prober.start()
        while time.time() < deadline and len(self.closed) < self.n:
            for key, ev in self.sel.select(timeout=0.2):
                i, c = key.data, key.fileobj
                if i not in self.connected:
                    if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        self.closed[i] = time.time() - self.t0; self.sel.unregister(c); continue
                    self.connected[i] = time.time() - self.t0
                    if self.first:
                        try:
                            c.send(self.first)
                        except OSError:
                            pass
                    self.sel.modify(c, selectors.EVENT_READ, i)
                    continue
                try:
                    d = c.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    d = b""
                if not d:
                    self.closed[i] = time.time() - self.t0; self.sel.unregister(c)
            t = time.time()
            self.peak_fds = max(self.peak_fds, fds(pid))
            if self.trickle and t >= next_trickle:
                next_trickle = t + 2
                for i in self.connected:
                    if i not in self.closed:
                        try:
                            self.socks[i].send(self.trickle)
                        except OSError:
                            pass
        done.set(); prober.join()
        self.cpu = (cpu_ticks(pid) - cpu0[1]) / os.sysconf("SC_CLK_TCK") / (time.time() - cpu0[0]) * 100
        for c in self.socks:
            c.close()

    def _probe(self, limit):
        t = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=max(0.5, min(limit, 30)))
            c.request("GET", "/.well-known/agent-card.json"); c.getresponse().read(); c.close()
            return time.time() - t
        except Exception:
            return None

    def summary(self):
        closed = sorted(self.closed.values())
        ok = [p for p in self.probes if p is not None]
        q = lambda xs, f: xs[min(len(xs) - 1, int(len(xs) * f))] if xs else float("nan")
        return (f"connected {len(self.connected)}/{self.n}; closed by the server {len(closed)}/{self.n} "
                f"(at {q(closed, 0):.1f} / {q(closed, 0.5):.1f} / {q(closed, 1):.1f} s: first / median / last); "
                f"server fds at most {self.peak_fds}, CPU {self.cpu:.0f}%; new clients meanwhile: "
                f"{len(ok)}/{len(self.probes)} served, slowest {max(ok or [0]):.2f} s")

def item5():
    item(5, "held-open connections, and out of descriptors",
         "1,000 slowloris connections held 45 s and 5,000 idle ones 62 s, never closed; under a 1,024 fd limit "
         "1,124 idle connections pinned the server at 100-122% CPU and new clients timed out (accept spun on EMFILE)")
    ok = True
    # A new client must be served within about EVICT_AFTER (1 s) plus a scheduling margin.
    served = lambda f: len(f.probes) > 0 and all(p is not None and p < 3 for p in f.probes)
    for what, n, first, trickle, secs in (
            ("1,000 slowloris (half a head, then a byte every 2 s)", 1000, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A", b"a", 40),
            ("5,000 idle", 5000, b"", b"", 30)):
        s = Serve(["--llm", "echo"])
        base = fds(s.pid)
        f = Flood(s.port, n, first, trickle)
        f.run(secs, s.pid)
        # The flood leaves: what the server still holds drains (the backlog's share is accepted, then seen closed).
        left = time.time()
        while fds(s.pid) > base + 2 and time.time() - left < 15:
            time.sleep(0.1)
        now(f"{what}, watched {secs} s: {f.summary()}; server fds before {base}, after the flood left "
            f"{fds(s.pid)} (in {time.time() - left:.1f} s)")
        ok &= served(f) and f.cpu < 50 and f.peak_fds <= 530 and fds(s.pid) <= base + 2
        # Every connection of the smaller flood is closed within the window (the larger one
        # waits partly in the kernel: a full backlog drops SYNs, which clients resend 1, 3, 7, 15, 31 s later).
        ok &= n > 1000 or len(f.closed) == n
        s.stop()
    # The fd limit (1,024, 1,124 idle connections), and a limit below the connection cap.
    for limit, n in ((1024, 1124), (64, 100)):
        s = Serve(["--llm", "echo"], prefix=("prlimit", f"--nofile={limit}"))
        f = Flood(s.port, n)
        f.run(17, s.pid)
        emfile = sum("accept" in l.lower() for l in s.err)
        after = timed_get(s.url + "/.well-known/agent-card.json", 10)
        now(f"ulimit -n {limit}, {n} idle, watched 17 s: {f.summary()}; failed-accept log lines {emfile}; "
            f"a new client after: {after}")
        ok &= served(f) and f.cpu < 50 and after.startswith("served")
        s.stop()
    verdict(5, ok, "see the lines above")

def item6():
    item(6, "1,500 non-blocking sends in about a second, to a model that never answers",
         "1,013 model connections opened at once; fds exhausted")
    st = silent_model()
    s = Serve(openai_args(st["url"]))
    base = fds(s.pid)
    replies, lock = [], threading.Lock()

    def worker():
        c = Conn(s.port)
        for _ in range(375):
            r = c.rpc("SendMessage", msg("hi", False))
            with lock:
                replies.append(r)
    t0 = time.time()
    ts = [threading.Thread(target=worker) for _ in range(4)]
    [t.start() for t in ts]
    peak_fd, peak_model = 0, 0
    while any(t.is_alive() for t in ts):
        peak_fd = max(peak_fd, fds(s.pid)); peak_model = max(peak_model, st["n"]); time.sleep(0.05)
    took = time.time() - t0
    time.sleep(1)
    peak_fd = max(peak_fd, fds(s.pid)); peak_model = max(peak_model, st["n"])
    busy = [r["error"] for r in replies if "error" in r]
    states = {}
    for r in replies:
        if "error" not in r:
            states[state_of(r)] = states.get(state_of(r), 0) + 1
    codes = sorted({(e["code"], e["message"][:60]) for e in busy})
    now(f"1,500 sends in {took:.1f} s: accepted {states}, refused {len(busy)} {codes}; "
        f"model connections {peak_model}; server fds {base} -> {peak_fd} at most")
    verdict(6, peak_model <= 64 and peak_fd < 300 and len(busy) + sum(states.values()) == 1500 and len(busy) > 0)
    s.stop(); close_silent(st)

def item7():
    item(7, "1,000 tasks of 1 MB each on the memory store", "1.93 GiB resident (the 100k count cap allowed ~200 GB)")
    s = Serve(["--llm", "echo"])
    text = "x" * (1000 * 1000)
    done, lock = [0], threading.Lock()

    def worker():
        c = Conn(s.port)
        for _ in range(250):
            r = c.rpc("SendMessage", msg(text, True))
            with lock:
                done[0] += state_of(r) == "completed"
    t0 = time.time()
    ts = [threading.Thread(target=worker) for _ in range(4)]
    [t.start() for t in ts]; [t.join() for t in ts]
    rss, hwm = status_kib(s.pid, "VmRSS") / 1024, status_kib(s.pid, "VmHWM") / 1024
    first = rpc(s.url, "ListTasks", {"pageSize": 1})
    kept = first.get("result", {}).get("totalSize", first)
    now(f"{done[0]} completed in {time.time() - t0:.1f} s: RSS {rss:.0f} MiB (peak {hwm:.0f} MiB); tasks kept {kept} "
        f"(the store's cap is 64 MiB of tasks; the oldest finished are dropped)")
    verdict(7, done[0] == 1000 and rss < 400)
    s.stop()

def raw(port, data, shut=False):
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(data)
    if shut:
        c.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            out += d
            if b"\r\n\r\n" in out:
                break
    except OSError:
        pass
    c.close()
    return out.split(b"\r\n")[0].decode(errors="replace"), out

def item8():
    item(8, "over-limit and broken request bodies",
         "curl saw 413, but Python urllib got a broken pipe 9-10 times in 10 and Node 20 fetch EPIPE 9/10 (10 MiB) "
         "and 1/10 (1 MiB + 1)")
    s = Serve(["--llm", "echo"])
    ok = True
    for n in (1024 * 1024 + 1, 10 * 1024 * 1024):
        got = 0
        for _ in range(10):
            req = urllib.request.Request(s.url + "/", data=b"x" * n, headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=30)
            except urllib.error.HTTPError as e:
                got += e.code == 413
            except Exception:
                pass
        node = subprocess.run(["node", "-e", """
const [url, n] = [process.argv[1], Number(process.argv[2])]; let ok = 0;
(async () => { for (let i = 0; i < 10; i++) { try { const r = await fetch(url, {method: "POST", body: Buffer.alloc(n, 120)}); await r.text(); ok += r.status === 413; } catch (e) {} } console.log(ok); })();
""", s.url + "/", str(n)], capture_output=True, text=True, timeout=180).stdout.strip()
        now(f"{n:,} bytes: urllib read the 413 {got}/10, Node fetch {node}/10")
        ok &= got == 10 and node == "10"
    line, resp = raw(s.port, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://page\r\nContent-Length: 2000000\r\n\r\n")
    cors = b"access-control-allow-origin" in resp.lower()
    now(f"a declared 2 MB body: {line!r}, CORS header on it: {cors}")
    chunk, _ = raw(s.port, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
    short, _ = raw(s.port, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"a\":", shut=True)
    now(f"a malformed chunk size: {chunk!r}; a body shorter than its Content-Length: {short!r}")
    ok &= "413" in line and cors and " 400 " in chunk + " " and " 400 " in short + " "
    verdict(8, ok)
    s.stop()

def item9():
    item(9, "a CR/LF CORS origin; a config agent that never answers; SIGTERM",
         "a CR/LF --cors-origin was accepted, then every response was 500; serve --config with a silent card was "
         "unbound for 300 s; SIGTERM took up to 15 s (the README promises 10)")
    t0 = time.time()
    try:
        r = subprocess.run([BIN, "serve", "--addr", "127.0.0.1:0", "--llm", "echo", "--cors-origin", "http://a\r\nX: 1"],
                           capture_output=True, text=True, timeout=10)
        now(f"--cors-origin with CR/LF: exit {r.returncode} after {time.time() - t0:.2f} s: {r.stderr.strip()[:100]!r}")
        ok = r.returncode == 1
    except subprocess.TimeoutExpired:
        now("--cors-origin with CR/LF: accepted (still serving after 10 s)")
        ok = False
    st = silent_model()
    cfg = os.path.join(TMP, "c9.json")
    json.dump({"agents": {"s": {"card": st["url"] + "/.well-known/agent-card.json"}}}, open(cfg, "w"))
    s = Serve(["--llm", "echo", "--config", cfg], wait=20)
    now(f"--config naming a card that never answers: {'listening' if s.listening else 'NOT listening'} after {s.listen_s:.1f} s; "
        f"stderr: {[l.strip()[:70] for l in s.err[:2]]}")
    ok &= s.listening and s.listen_s < 10
    s.stop(); close_silent(st)
    st = silent_model()
    s = Serve(openai_args(st["url"]))
    blocked = {}

    def blocking():
        try:
            blocked["got"] = json.dumps(rpc(s.url, "SendMessage", msg("hi", True), timeout=60))[:80]
        except Exception as e:
            blocked["got"] = type(e).__name__
    th = threading.Thread(target=blocking, daemon=True)
    th.start()
    rpc(s.url, "SendMessage", msg("hi", False))
    idle = socket.create_connection(("127.0.0.1", s.port))
    sse = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": msg("s", True)}).encode()
    sse.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(1)
    t0 = time.time(); s.p.send_signal(signal.SIGTERM); s.p.wait(timeout=60)
    took = time.time() - t0
    th.join(5)
    now(f"SIGTERM with a blocking request, a running task, an open stream and an idle connection in flight "
        f"(the model never answers): exit {s.p.returncode} after {took:.1f} s; the blocking caller got "
        f"{blocked.get('got')}")
    ok &= took <= 10.5 and s.p.returncode == 0
    idle.close(); sse.close(); close_silent(st)
    verdict(9, ok)

def card_of(url, skills, **extra):
    return dict({"name": "desk", "url": url + "/", "skills": skills}, **extra)

def item10():
    item(10, "card amplification (toolnexus tools)",
         "a 16 MiB card of tiny skills: 6.5 GiB for 40 s, 431 MB printed (--timeout 5000 did not bound it); "
         "100k skills: 445 MiB")
    flood = b'{"name":"flood","url":"http://127.0.0.1:9/","skills":['
    flood += b'{"id":"s"},' * ((16 * 1024 * 1024 - len(flood) - 16) // 11) + b'{"id":"s"}]}'
    many = json.dumps(card_of("http://127.0.0.1:9", [{"id": f"s{i}", "description": "d"} for i in range(100_000)])).encode()
    half = json.dumps(card_of("http://127.0.0.1:9", [{"id": f"s{i}", "description": "d"} for i in range(50_000)])).encode()
    bodies = {"/flood": flood, "/many": many, "/half": half}
    p = Peer(lambda req: (200, [("Content-Type", "application/json")], bodies.get(req["path"], b"{}"), 0))
    ok = True
    for path, what, extra in (("/flood", f"16 MiB card, {flood.count(b'{') - 1:,} skills", []),
                              ("/flood", "16 MiB card, --timeout 5000", ["--timeout", "5000"]),
                              ("/many", f"100k skills ({len(many) / 1e6:.1f} MB)", []),
                              ("/half", "50k skills with the limits raised (--max-skills 50000 --max-card-bytes 20000000)",
                               ["--max-skills", "50000", "--max-card-bytes", "20000000"])):
        code, out, err, wall, rss = run_cli(["tools", p.url + path, "--no-cache"] + extra)
        now(f"{what}: exit {code} in {wall:.2f} s, peak RSS {rss:.0f} MiB, {len(out):,} bytes on stdout, "
            f"stderr {err.decode(errors='replace').strip()[:90]!r}")
        if extra[:1] != ["--max-skills"]:
            ok &= rss < 100 and wall < 5 and code == 1 and not out
    now("(the last line is a user's opt-in past the limits, for the record: making tool names unique is quadratic "
        "in the skill count, 0.3 s at 12.5k skills, 8-22 s at 50k, 38 s at 100k)")
    verdict(10, ok)
    p.close()

def item11():
    item(11, "a GetTask reply about another task", "accepted as this call's result (exit 0)")

    def script(req):
        if req["method"] == "GET":
            return js(200, {"name": "desk", "skills": [{"id": "work"}]})
        if req["rpc"] == "SendMessage":
            return result(req, {"id": "mine", "status": {"state": "working"}})
        return result(req, {"id": "theirs", "status": {"state": "completed"},
                            "artifacts": [{"parts": [{"kind": "text", "text": "not yours"}]}]})
    p = Peer(script)
    code, out, err, wall, _ = run_cli(["call", p.url + "/.well-known/agent-card.json", "work", "x", "--no-cache"])
    r = json.loads(out or b"{}")
    now(f"exit {code}, isError {r.get('isError')}, output {r.get('output', '')[:90]!r}")
    verdict(11, code == 2 and "theirs" in r.get("output", ""))
    p.close()

def item12():
    item(12, "a peer listing the long-poll extension that answers at once", "~700 GetTasks per second")

    def script(req):
        if req["method"] == "GET":
            return js(200, {"name": "desk", "skills": [{"id": "work"}],
                            "capabilities": {"extensions": [{"uri": "urn:toolnexus:a2a:get-task-long-poll:v1"}]}})
        return result(req, {"id": "t1", "status": {"state": "working"}}, [("Preference-Applied", "wait=10")])
    p = Peer(script)
    code, out, err, wall, _ = run_cli(["call", p.url + "/.well-known/agent-card.json", "work", "x", "--no-cache",
                                       "--timeout", "3000"])
    polls = p.calls("GetTask")
    gaps = [b["at"] - a["at"] for a, b in zip(polls, polls[1:])]
    now(f"a 3 s call: {len(polls)} GetTasks ({len(polls) / wall:.1f}/s), gaps {min(gaps or [0]) * 1000:.0f}-"
        f"{max(gaps or [0]) * 1000:.0f} ms; exit {code}")
    verdict(12, len(polls) / wall < 20)
    p.close()

def item13():
    item(13, "429/503 with and without Retry-After", "the call failed at once")

    def script(req):
        if req["method"] == "GET":
            return js(200, {"name": "desk", "skills": [{"id": "work"}]})
        if req["rpc"] == "SendMessage" and req["n"] == 0:
            return 429, [("Retry-After", "1"), ("Content-Type", "text/plain")], b"slow down", 0
        if req["rpc"] == "SendMessage" and req["n"] == 1:
            return 503, [("Content-Type", "text/plain")], b"busy", 0
        return result(req, {"id": "t1", "status": {"state": "completed"},
                            "artifacts": [{"parts": [{"kind": "text", "text": "done"}]}]})
    p = Peer(script)
    code, out, err, wall, _ = run_cli(["call", p.url + "/.well-known/agent-card.json", "work", "x", "--no-cache"])
    sends = p.calls("SendMessage")
    ids = {s["body"]["params"]["message"]["messageId"] for s in sends}
    gaps = [f"{(b['at'] - a['at']):.2f}" for a, b in zip(sends, sends[1:])]
    now(f"429 (Retry-After: 1), 503, then an answer: exit {code}, output {json.loads(out or b'{}').get('output')!r}, "
        f"{len(sends)} sends with {len(ids)} messageId, {gaps} s apart, {wall:.2f} s in all")
    ok = code == 0 and len(sends) == 3 and len(ids) == 1 and float(gaps[0]) >= 1.0
    p.close()
    p = Peer(lambda req: js(200, {"name": "desk", "skills": [{"id": "work"}]}) if req["method"] == "GET"
             else (503, [("Content-Type", "text/plain")], b"busy", 0))
    code, out, err, wall, _ = run_cli(["call", p.url + "/.well-known/agent-card.json", "work", "x", "--no-cache",
                                       "--timeout", "3000"])
    n = len(p.calls("SendMessage"))
    now(f"503 forever, --timeout 3000: {n} sends, exit {code} after {wall:.2f} s: "
        f"{json.loads(out or b'{}').get('output', '')[:80]!r}")
    ok &= code == 2 and 2 <= n < 30 and wall < 4.5
    verdict(13, ok)
    p.close()

def item14():
    item(14, "--timeout 3000 with a slow card and a slow call",
         "the timeout applied twice: card 2.5 s + call 3 s = 5.5 s while metadata.ms said 3001; no CancelTask")

    def script(req):
        if req["method"] == "GET":
            return js(200, {"name": "desk", "skills": [{"id": "work"}]})[:3] + (1.5,)
        if req["rpc"] == "SendMessage":
            return result(req, {"id": "t1", "status": {"state": "working"}})
        if req["rpc"] == "CancelTask":
            return result(req, {"id": "t1", "status": {"state": "canceled"}})
        return result(req, {"id": "t1", "status": {"state": "working"}})
    p = Peer(script)
    code, out, err, wall, _ = run_cli(["call", p.url + "/.well-known/agent-card.json", "work", "x", "--no-cache",
                                       "--timeout", "3000"])
    r = json.loads(out or b"{}")
    cancels = len(p.calls("CancelTask"))
    now(f"card 1.5 s, task never done: exit {code} after {wall:.2f} s wall, metadata.ms {r.get('metadata', {}).get('ms')}, "
        f"CancelTask sent {cancels}; {r.get('output')!r}")
    verdict(14, wall < 4.0 and cancels == 1 and code == 2)
    p.close()

def item15():
    item(15, "huge and hostile peer text",
         "a 10 MB error message was copied whole into the output; ANSI/OSC escapes were written raw "
         "(CLI and serve logs)")
    hostile = "\x1b]0;pwned\x07\x1b[2J\u009b31mred"

    def script(req):
        if req["method"] == "GET" and req["path"].startswith("/missing"):
            return 404, [("Content-Type", "text/plain")], hostile.encode(), 0
        if req["method"] == "GET":
            return js(200, {"name": "desk", "skills": [{"id": "work", "description": hostile}]})
        return rpc_error(req, -32000, hostile + "E" * (10 * 1024 * 1024))
    p = Peer(script)
    card = p.url + "/.well-known/agent-card.json"

    def controls(b):
        t = b.decode(errors="replace")
        return sum(1 for ch in t if (ord(ch) < 32 and ch != "\n") or 0x7f <= ord(ch) < 0xa0)
    ok = True
    for what, args in (("call, a 10 MB error", ["call", card, "work", "x", "--no-cache"]),
                       ("tools, escapes in a description", ["tools", card, "--no-cache"]),
                       ("tools, escapes in a 404 body", ["tools", p.url + "/missing", "--no-cache"])):
        code, out, err, wall, rss = run_cli(args)
        now(f"{what}: exit {code}, {len(out):,} + {len(err):,} bytes printed (stdout + stderr), "
            f"control characters reaching the terminal {controls(out) + controls(err)}")
        ok &= len(out) + len(err) < 8000 and controls(out) + controls(err) == 0
    cfg = os.path.join(TMP, "c15.json")
    json.dump({"agents": {"h": {"card": p.url + "/missing"}}}, open(cfg, "w"))
    s = Serve(["--llm", "echo", "--config", cfg])
    time.sleep(0.3)
    log = "".join(s.err).encode()
    now(f"serve --config naming that 404 card: {len(log)} bytes of log, control characters "
        f"{controls(log)}: {[l.strip()[:80] for l in s.err if 'missing' in l][:1]}")
    ok &= controls(log) == 0
    s.stop()
    verdict(15, ok)
    p.close()

def item16():
    item(16, "colliding tool names", "tools listed dup/dup and d.u.p/d_u_p under one name each; call took the first silently")
    p = Peer(lambda req: js(200, {"name": "desk", "skills": [{"id": "dup"}, {"id": "dup"}, {"id": "d.u.p"},
                                                             {"id": "d_u_p"}]}) if req["method"] == "GET"
             else result(req, {"id": "t1", "status": {"state": "completed"}}))
    card = p.url + "/.well-known/agent-card.json"
    code, out, err, _, _ = run_cli(["tools", card, "--no-cache"])
    names = [t["name"] for t in json.loads(out or b"[]")]
    now(f"tools: exit {code}, names {names}; stderr {err.decode().strip().splitlines()}")
    c2, _, e2, _, _ = run_cli(["call", card, "dup", "x", "--no-cache"])
    c3, _, _, _, _ = run_cli(["call", card, "desk_dup_2", "x", "--no-cache"])
    now(f"call dup: exit {c2}: {(e2.decode().strip().splitlines() or [''])[-1][:120]!r}; call desk_dup_2: exit {c3}")
    verdict(16, len(set(names)) == 4 and c2 == 1 and c3 == 0)
    p.close()

def item17():
    item(17, "credentials", "-H headers went to whatever host the card's url named; secrets in a card URL were printable")
    p = Peer(lambda req: js(200, {"name": "desk", "url": "http://collector.example.invalid/rpc",
                                  "skills": [{"id": "work"}]}) if req["method"] == "GET"
             else rpc_error(req, -32601, "no"))
    code, out, err, _, _ = run_cli(["call", p.url + "/.well-known/agent-card.json", "work", "x", "--no-cache",
                                    "-H", "Authorization: Bearer s3cret-token"])
    auth = [{k.lower(): v for k, v in r["headers"].items()}.get("authorization") for r in p.log]
    now(f"a card on 127.0.0.1 naming http://collector.example.invalid/rpc, -H Authorization: exit {code}, "
        f"{err.decode().strip()[:100]!r}; requests the peer saw: {len(p.log)} (the card, with the header: "
        f"{auth[0] is not None}); secret printed: {b's3cret' in out + err}")
    ok = code == 1 and len(p.log) == 1 and b"s3cret" not in out + err
    p.close()
    p = Peer(lambda req: (500, [("Content-Type", "text/plain")], b"down", 0))
    port = p.url.rsplit(":", 1)[1]
    url = f"http://alice:pa55word@127.0.0.1:{port}/card.json?token=s3cret"
    leaks = 0
    for args in (["tools", url], ["call", url, "work", "x"]):
        code, out, err, _, _ = run_cli(args + ["--no-cache"])
        leaks += sum(x in out + err for x in (b"alice", b"pa55word", b"s3cret"))
    now(f"a card URL with userinfo and a query, tools and call failing: secrets printed {leaks} times "
        f"(shown as {err.decode().strip()[:90]!r})")
    ok &= leaks == 0
    verdict(17, ok)
    p.close()

ALL = {1: item1, 2: item2, 3: item3, 4: item4, 5: item5, 6: item6, 7: item7, 8: item8, 9: item9, 10: item10,
       11: item11, 12: item12, 13: item13, 14: item14, 15: item15, 16: item16, 17: item17}

if __name__ == "__main__":
    t_all = time.time()
    for n in ITEMS:
        t0 = time.time()
        try:
            ALL[n]()
        except Exception as e:  # one broken item must not hide the others
            now(f"the measurement itself failed: {type(e).__name__}: {e}")
            failures.append(n)
        print(f"   ({time.time() - t0:.0f} s)", flush=True)
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"\n{len(ITEMS) - len(failures)}/{len(ITEMS)} items hold; not holding: {failures or 'none'}; "
          f"{time.time() - t_all:.0f} s in all", flush=True)
    sys.exit(1 if failures else 0)
