"""Splits each result-lag sample of the latency bench into hops.

Used by lag_hops.sh: reads a `perf script` dump (CLOCK_MONOTONIC) of
sched_waking / sched_switch / sched_process_exit over the whole machine, the
bench's `TOOLNEXUS_BENCH_SAMPLES` lines, and the offset from that clock to
the wall clock. For every sample (the peer's settled timestamp S, the
moment the caller had the result D) it finds the peer's last wake-up of the
receiver before D (the send of the terminal event) and prints:

  peer  S -> that wake-up: the SDK's own work between stamping the status
        and writing it (for the JS SDK, which stamps whole milliseconds,
        up to 1 ms more: the stamp is truncated)
  wake  the wake-up -> the receiver running (CPU or VM scheduling)
  ours  running -> the result (library), or -> the process's exit (CLI)
  seen  the CLI's exit -> its parent seeing it (0 for the library)

  python3 lag_hops.py TRACE SAMPLES OFFSET_S
"""

import bisect
import re
import statistics
import sys

trace, samples, offset_ms = sys.argv[1], sys.argv[2], float(sys.argv[3]) * 1e3
PEERS = ("node", "python")
LIBRARY = ("tokio-r", "latency-")  # the bench's worker threads and main thread
CLI = ("toolnexus",)

wakes, switches, exits = [], [], []
line_re = re.compile(r"\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)")
for line in open(trace, errors="replace"):
    m = line_re.match(line)
    if not m:
        continue
    comm, cpu, t, event, args = m[1], int(m[3]), float(m[4]) * 1e3 + offset_ms, m[5], m[6]
    if event == "sched:sched_waking":
        target = re.search(r"comm=(.*?) pid=(\d+).*target_cpu=(\d+)", args)
        wakes.append((t, comm, target[1], int(target[2]), int(target[3])))
    elif event == "sched:sched_switch":
        nxt = re.search(r"next_comm=(.*?) next_pid=(\d+)", args)
        switches.append((t, cpu, nxt[1], int(nxt[2])))
    elif event == "sched:sched_process_exit":
        exits.append((t, int(re.search(r"pid=(\d+)", args)[1])))
wake_t = [w[0] for w in wakes]
switch_t = [s[0] for s in switches]
exit_t = [e[0] for e in exits]


def hops(settled, done, receivers):
    """(peer, wake, ours, seen, target cpu was idle) of one sample, or None."""
    lo, hi = bisect.bisect_left(wake_t, settled - 1), bisect.bisect_right(wake_t, done)
    sends = [w for w in wakes[lo:hi] if w[1].startswith(PEERS) and w[2].startswith(receivers)]
    if not sends:
        return None
    sent = sends[-1]
    i = bisect.bisect_left(switch_t, sent[0])
    running = next((s for s in switches[i:] if s[3] == sent[3]), None)
    if running is None:
        return None
    before = [s for s in switches[max(0, i - 2000):i] if s[1] == sent[4]]
    idle = bool(before) and before[-1][2].startswith("swapper")
    ours_end, seen = done, 0.0
    if receivers == CLI:
        j = bisect.bisect_left(exit_t, sent[0])
        exited = next((e for e in exits[j:] if e[1] == sent[3]), None)
        if exited is not None:
            ours_end, seen = exited[0], done - exited[0]
    return sent[0] - settled, running[0] - sent[0], ours_end - running[0], seen, idle


rows = {}
for line in open(samples, errors="replace"):
    if not line.startswith("sample "):
        continue
    p = line.split()
    i = p.index("library")
    server, task = " ".join(p[1 : i - 1]), p[i - 1]
    lib = (float(p[i + 1]), float(p[i + 2]))
    cli = (float(p[i + 4]), float(p[i + 5]))
    for who, (s, d), receivers in (("library", lib, LIBRARY), ("call", cli, CLI)):
        h = hops(s, d, receivers)
        rows.setdefault((server, task, who), []).append((d - s, h))

print(f"{'server':>17} {'task ms':>7} {'caller':>8} | {'lag':>6} = {'peer':>6} + {'wake':>6} + {'ours':>6} + {'seen':>6} ms  (medians of the samples; wake-ups on an idle CPU)")
for (server, task, who), rs in rows.items():
    found = [h for _, h in rs if h]
    med = lambda k: statistics.median(h[k] for h in found) if found else float("nan")
    idle = sum(1 for h in found if h[4])
    lags = " ".join(f"{lag:.1f}" for lag, _ in rs)
    print(f"{server:>17} {task:>7} {who:>8} | {statistics.median(l for l, _ in rs):6.2f} = {med(0):6.2f} + {med(1):6.2f} + {med(2):6.2f} + {med(3):6.2f}     {idle}/{len(found)} idle  lags: {lags}")
print("samples over 4 ms, hop by hop:")
for (server, task, who), rs in rows.items():
    for lag, h in rs:
        if lag > 4 and h:
            print(f"{server:>17} {task:>7} {who:>8} | {lag:6.2f} = {h[0]:6.2f} + {h[1]:6.2f} + {h[2]:6.2f} + {h[3]:6.2f}     {'idle' if h[4] else 'busy'} CPU")
