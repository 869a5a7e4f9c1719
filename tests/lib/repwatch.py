"""repwatch.py - helpers for the RF > 1 fault tests (issue 11 tests 5 and 6:
test_replication_crash, test_replication_nodeloss).

  MapWatch   a thread polling the coordinator over one persistent connection
             (STATUS JSON, PARTITIONS JSON, STATUS JSON again) as fast as it
             answers; a PARTITIONS snapshot framed by the same map version
             is recorded as that version's exact contents. It redials when
             the coordinator dies. Its history is what the redundancy and
             epoch checks read; audit_versions() gives the map versions the
             coordinator's --audit-log says were written, so each test can
             say how many of them it saw.
  Writer     a redis-py RedisCluster thread SETting unique values (a key is
             written once), some of them into chosen partitions; acked holds
             each acknowledged key and its value, errors what reached the
             application.
  lost()     the acknowledged keys that do not read back with their value.
  serving()  per partition, the nodes that serve a plain GET of one of its
             keys (not -MOVED, not -TRYAGAIN): at most one may.

No assertions here: the tests decide what must hold.
"""
import json
import threading
import time

from keeltest import Conn, RespError, key_in_slot_range


def pkey(partitions, p, prefix):
    """A key whose slot lies in partition p (16384 / partitions slots each)."""
    per = 16384 // partitions
    return key_in_slot_range(p * per, (p + 1) * per - 1, prefix=prefix)


def leaders_serve(ports_of, parts, partitions):
    """1 once the leader of every partition (parts(): keel partitions --json)
    accepts a SET; ports_of maps node ids to client ports."""
    for p in parts():
        port = ports_of.get(p["leader"])
        if port is None:
            return 0
        try:
            with Conn(port, timeout=2) as c:
                if c.call("SET", pkey(partitions, p["id"], "ready"), "1") != "OK":
                    return 0
        except (OSError, EOFError, TimeoutError):
            return 0
    return 1


def _text(r):
    return r.decode() if isinstance(r, bytes) else r


class MapWatch(threading.Thread):
    def __init__(self, port, interval=0.002):
        super().__init__(daemon=True)
        self.port, self.interval = port, interval
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.exact = {}      # map version -> {pid: state}, framed snapshots
        self.history = []    # (t, version or None, {pid: state}) on every change seen
        self.polls = 0
        self.redials = 0

    @staticmethod
    def state(p):
        return (tuple(p["replicas"]), tuple(p["isr"]), p["epoch"], p["leader_epoch"],
                p["partition_epoch"])

    def run(self):
        c = None
        last = None
        while not self.halt.is_set():
            try:
                if c is None:
                    c = Conn(self.port, timeout=2)
                v1 = json.loads(_text(c.call("STATUS", "JSON")))["map_version"]
                ps = json.loads(_text(c.call("PARTITIONS", "JSON")))
                v2 = json.loads(_text(c.call("STATUS", "JSON")))["map_version"]
            except (OSError, EOFError, TimeoutError, ValueError, TypeError, KeyError):
                if c is not None:
                    c.close()
                    c = None
                    self.redials += 1
                time.sleep(0.05)
                continue
            snap = {p["id"]: self.state(p) for p in ps}
            with self.lock:
                self.polls += 1
                if v1 == v2:
                    self.exact[v1] = snap
                if snap != last:
                    self.history.append((time.time(), v1 if v1 == v2 else None, snap))
                    last = snap
            time.sleep(self.interval)
        if c is not None:
            c.close()

    def stop(self):
        self.halt.set()
        self.join(5)

    def states(self, pid=None):
        """Every distinct state seen of pid (or of every partition), in order."""
        with self.lock:
            out = []
            for _, _, snap in self.history:
                for k, s in snap.items():
                    if pid is None or k == pid:
                        out.append((k, s))
            return out


def audit_versions(path):
    """Map versions of successful map writes on the audit log."""
    vs = set()
    try:
        with open(path) as f:
            for line in f:
                kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
                if kv.get("kind") == "map_write" and kv.get("rc") == "0":
                    vs.add(int(kv["version"]))
    except OSError:
        pass
    return vs


def check_history(watch, rf, min_insync):
    """Problems in the watched history: a partition listed with fewer than rf
    replicas or an ISR below min_insync, or an epoch going down."""
    bad, prev = [], {}
    with watch.lock:
        hist = list(watch.history)
    for t, v, snap in hist:
        for pid, (reps, isr, ep, le, pe) in snap.items():
            if not reps:
                continue
            if len(reps) < rf or len(isr) < min_insync:
                bad.append("version %s partition %d: replicas %r isr %r" % (v, pid, reps, isr))
            if pid in prev:
                pep, ple, ppe = prev[pid]
                if ep < pep or le < ple or pe < ppe:
                    bad.append("version %s partition %d: epochs went down %r -> %r" %
                               (v, pid, prev[pid], (ep, le, pe)))
            prev[pid] = (ep, le, pe)
    return bad


class Writer(threading.Thread):
    """Unique values: key w:<i> (or {tag}:<i> for a chosen partition's tag)."""

    def __init__(self, port, tags=(), every=2, name="w"):
        super().__init__(daemon=True)
        self.port, self.tags, self.every, self.name = port, list(tags), every, name
        self.halt = threading.Event()
        self.acked, self.errors = {}, []
        self.ready = threading.Event()

    def client(self):
        from redis.cluster import RedisCluster
        t = time.time() + 15
        while True:
            try:
                return RedisCluster(host="127.0.0.1", port=self.port, socket_timeout=5,
                                    cluster_error_retry_attempts=10)
            except Exception:
                if time.time() > t:
                    raise
                time.sleep(0.2)

    def run(self):
        rc = self.client()
        self.ready.set()
        i = 0
        while not self.halt.is_set():
            i += 1
            if self.tags and i % self.every == 0:
                k = "{%s}:%s%d" % (self.tags[i % len(self.tags)], self.name, i)
            else:
                k = "%s:%d" % (self.name, i)
            v = "v%d" % i
            try:
                if rc.set(k, v):
                    self.acked[k] = v
            except Exception as e:  # noqa: B902 - reaches the application
                self.errors.append(repr(e)[:160])
                time.sleep(0.05)
        rc.close()

    def stop(self):
        self.halt.set()
        self.join(30)


def lost(port, acked):
    from redis.cluster import RedisCluster
    rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=10,
                      cluster_error_retry_attempts=10)
    out = []
    keys = list(acked)
    for i in range(0, len(keys), 200):
        chunk = keys[i:i + 200]
        for k in chunk:
            got = rc.get(k)
            if (got or b"").decode() != acked[k]:
                out.append((k, acked[k], got))
    rc.close()
    return out


def serving(ports, partitions):
    """{pid: [port, ...]} of the nodes serving a plain GET in each partition."""
    out = {}
    conns = {}
    try:
        for port in ports:
            try:
                conns[port] = Conn(port, timeout=3)
            except OSError:
                pass
        for p in range(partitions):
            k = pkey(partitions, p, "probe")
            out[p] = []
            for port, c in conns.items():
                try:
                    r = c.call("GET", k)
                except (OSError, EOFError, TimeoutError):
                    continue
                if not isinstance(r, RespError):
                    out[p].append(port)
    finally:
        for c in conns.values():
            c.close()
    return out
