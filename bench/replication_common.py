"""replication_common - what bench/replication's two sides share: the SET
benchmark (redis-benchmark --cluster, its CSV), the writers, and the kill
loop's bookkeeping (recovery per kill, lost writes attributed to kills).

Contract:
  - set_benchmark(port, n, clients, keyspace, value_bytes): runs
    `redis-benchmark --cluster -h 127.0.0.1 -p PORT -t set -n N -c C -r R
    -d D -q --csv` and returns {"rps", "p50_ms", "p99_ms", "max_ms", ...}
    from its CSV row (redis-benchmark 7.0 prints the latency percentiles).
  - Load(smap, background, rate, value_bytes): background writers over all
    slots plus one probe writer whose slots are set per kill (probe.target);
    start/pause/resume/finish; all_acks().
  - start_sweep(smap, slots, t_kill) / end_sweep(sw, timeout): after a kill,
    one write into each of `slots` in turn, each retried until acknowledged;
    the time from the kill to the last ack (an upper bound of "every one of
    them writable again").
  - attribute(lost, kills): lost acks -> the kill each was lost at (the first
    kill after its ack), as counts per kill.
"""
import csv
import io
import os
import shutil
import subprocess
import sys
import statistics
import time

import replication_client as rc

REDIS_BENCHMARK = shutil.which("redis-benchmark") or "/usr/bin/redis-benchmark"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def set_benchmark(port, n, clients, keyspace, value_bytes, timeout=900):
    argv = [REDIS_BENCHMARK, "--cluster", "-h", "127.0.0.1", "-p", str(port), "-t", "set",
            "-n", str(n), "-c", str(clients), "-r", str(keyspace), "-d", str(value_bytes),
            "-q", "--csv"]
    t0 = time.monotonic()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError("redis-benchmark failed (%d): %s %s"
                           % (p.returncode, p.stdout[-400:], p.stderr[-400:]))
    rows = list(csv.reader(io.StringIO(p.stdout)))
    head = next((r for r in rows if r and r[0] == "test"), None)
    row = next((r for r in rows if r and r[0] == "SET"), None)
    if row is None:
        raise RuntimeError("redis-benchmark: no SET row in %r" % p.stdout[-400:])
    out = {"command": " ".join(argv[:1] + ["--cluster"] + argv[2:5] + ["PORT"] + argv[6:])}
    names = head or ["test", "rps", "avg_latency_ms", "min_latency_ms", "p50_latency_ms",
                     "p95_latency_ms", "p99_latency_ms", "max_latency_ms"]
    for k, v in zip(names[1:], row[1:]):
        try:
            out[k.replace("_latency", "")] = float(v)
        except ValueError:
            pass
    # redis-benchmark --cluster measures its run in steps of 250 ms (its rps
    # is n / k*0.25 s): the process's wall time (with its start and CLUSTER
    # SLOTS) is the finer figure for short runs (docs/benchmarks.md).
    out["wall_s"] = round(wall, 3)
    out["wall_rps"] = round(n / wall, 1) if wall > 0 else None
    if "rps" not in out or "p99_ms" not in out:
        raise RuntimeError("redis-benchmark CSV without rps/p99: %r" % p.stdout[-400:])
    return out


class Probe:
    """The probe's target slots, set before each kill."""

    def __init__(self):
        self.slots = []

    def __call__(self):
        return self.slots


class Load:
    def __init__(self, smap, background=2, rate=150, probe_rate=200, value_bytes=32):
        self.target = Probe()
        self.probe = rc.Writer("p", smap, rate=probe_rate, slots_fn=self.target,
                               value_bytes=value_bytes)
        self.bg = [rc.Writer("b%d" % i, smap, rate=rate, value_bytes=value_bytes)
                   for i in range(background)]
        self.all = [self.probe] + self.bg

    def start(self):
        for w in self.all:
            w.start()

    def pause(self):
        for w in self.all:
            w.pause()

    def resume(self):
        for w in self.all:
            w.resume()

    def finish(self):
        for w in self.all:
            w.finish()

    def all_acks(self):
        out = []
        for w in self.all:
            out.extend(w.acks)
        return out

    def stats(self):
        errors = {}
        for w in self.all:
            for k, v in w.errors.items():
                errors[k] = errors.get(k, 0) + v
        lat = []
        for w in self.bg:
            lat.extend(w.latencies)
        return {"attempts": sum(w.attempts for w in self.all),
                "acknowledged": sum(len(w.acks) for w in self.all),
                "not_acknowledged_by_kind": errors,
                "background_p99_ms": rc.pct(lat, 0.99) and round(rc.pct(lat, 0.99) * 1000, 2)}


class Sweeper(rc.Writer):
    """After a kill: one SET into each slot of `slots` in turn, each retried
    until acknowledged (a write sent after t0), then the next. `done_s` is
    the time from t0 to the last one's ack: an upper bound of the time until
    every one of them accepted writes (they are written one after another)."""

    def __init__(self, smap, slots, t0):
        super().__init__("s", smap, rate=0, slots_fn=self._cur)
        self.sweep, self.idx, self.t0, self.done_s = list(slots), 0, t0, None

    def _cur(self):
        return [self.sweep[min(self.idx, len(self.sweep) - 1)]]

    def run(self):
        while not self.stop_ev.is_set() and self.idx < len(self.sweep):
            n = len(self.acks)
            self.attempt()
            if len(self.acks) > n and self.acks[-1][2] == self.sweep[self.idx]:
                self.idx += 1
        if self.idx >= len(self.sweep):
            self.done_s = self.acks[-1][4] - self.t0


def start_sweep(smap, slots, t_kill):
    sw = Sweeper(smap, slots, t_kill)
    sw.start()
    return sw


def end_sweep(sw, timeout):
    """Waits for the sweep (up to timeout), stops it; its done_s or None."""
    sw.join(timeout)
    sw.finish()
    return sw.done_s


def wait_probe_ack(load, t_kill, slots, timeout):
    """Seconds from t_kill to the first ack of a probe write sent after it."""
    deadline = time.monotonic() + timeout
    sl = set(slots)
    while time.monotonic() < deadline:
        a = rc.first_ack_after(load.probe.acks[-2000:], t_kill, sl)
        if a is not None:
            return a[4] - t_kill
        time.sleep(0.02)
    return None


def attribute(lost, kill_times):
    """Counts of lost acks per kill: an ack is lost at the first kill after it."""
    per = [0] * len(kill_times)
    after = 0
    for a in lost:
        j = next((i for i, t in enumerate(kill_times) if t >= a[4]), None)
        if j is None:
            after += 1
        else:
            per[j] += 1
    return per, after


def summary_ms(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    s = sorted(xs)
    return {"n": len(s), "min": round(s[0], 1), "median": round(statistics.median(s), 1),
            "p99": round(rc.pct(s, 0.99), 1), "max": round(s[-1], 1)}


def proc_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
