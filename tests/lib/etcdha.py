"""etcdha.py - a rig for the coordinator high-availability tests and the
failover benchmark (issue 12): etcd members, coordinators with leader
election, nodes with the list of every coordinator, a writer that knows which
writes were acknowledged, and readers of the shared audit log
(`--audit-log`, src/core/audit.h).

Every coordinator and node of a Rig appends to one audit file, so its line
order is the order of every map-store write and every accepted directive.

Used by tests/integration/test_etcd_phases, test_etcd_sigstop,
test_etcd_netsplit, test_etcd_rebalance_churn and bench/coord_failover.
"""
import calendar
import collections
import json
import os
import random
import re
import shutil
import signal
import threading
import time
import urllib.request

from keeltest import (KEEL_BIN, Conn, RespError, Failure, _spawn, _wait_ready, check, decode,
                      encode, free_port, keel_cli, keyslot, mkdtemp, tmp_root, wait_for)

ETCD = os.environ.get("KEEL_ETCD") or shutil.which("etcd") or "/usr/bin/etcd"


def etcd_available():
    return os.access(ETCD, os.X_OK)


def log_ms(line):
    """The wall-clock ms of a keel log line (ts=...Z)."""
    m = re.search(r"ts=(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)Z", line)
    y, mo, d, h, mi, s, ms = (int(x) for x in m.groups())
    return calendar.timegm((y, mo, d, h, mi, s)) * 1000 + ms


def lines(srv, pattern):
    return [x for x in srv.log_text().splitlines() if re.search(pattern, x)]


class Etcd:
    """n etcd members on loopback (one cluster). wrap(i, argv) may prefix a
    member's command line (e.g. `ip netns exec NS`); hosts[i] is the
    address member i listens on (default 127.0.0.1)."""

    def __init__(self, n=1, hosts=None, wrap=None, listen_all=False):
        self.n, self.listen_all = n, listen_all
        self.hosts = hosts or ["127.0.0.1"] * n
        self.dir = mkdtemp("etcd-")
        self.cports = [free_port() for _ in range(n)]
        self.pports = [free_port() for _ in range(n)]
        self.wrap = wrap
        self.procs = [None] * n
        for i in range(n):
            self.start(i, new=True)
        self.wait_healthy()

    def curl(self, i):
        return "http://%s:%d" % (self.hosts[i], self.cports[i])

    def urls(self):
        return ",".join(self.curl(i) for i in range(self.n))

    def start(self, i, new=False):
        purl = "http://%s:%d" % (self.hosts[i], self.pports[i])
        cluster = ",".join("e%d=http://%s:%d" % (k, self.hosts[k], self.pports[k])
                           for k in range(self.n))
        listen = "http://0.0.0.0:%d" % self.cports[i] if self.listen_all else self.curl(i)
        argv = [ETCD, "--name", "e%d" % i, "--data-dir", os.path.join(self.dir, "e%d" % i),
                "--listen-client-urls", listen, "--advertise-client-urls", self.curl(i),
                "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", "keel-%d" % os.getpid(), "--log-level", "warn"]
        if self.wrap:
            argv = self.wrap(i, argv)
        self.procs[i] = _spawn("etcd", argv, self.cports[i], self.dir,
                               os.path.join(self.dir, "e%d.log" % i))

    def healthy(self, i):
        try:
            with urllib.request.urlopen(self.curl(i) + "/health", timeout=1) as r:
                return b"true" in r.read()
        except OSError:
            return False

    def wait_healthy(self, timeout=30):
        wait_for(lambda: all(self.healthy(i) for i in range(self.n)), timeout, 0.1,
                 msg="etcd healthy")


class Audit:
    """The shared audit log: parsed lines, in file (= append) order."""

    def __init__(self, path):
        self.path = path

    def read(self):
        out = []
        try:
            with open(self.path) as f:
                for i, line in enumerate(f):
                    d = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                    d["line"] = i
                    d["ts_ms"] = int(d["ts_ms"])
                    d["term"] = int(d.get("term", 0))
                    out.append(d)
        except FileNotFoundError:
            pass
        return out

    def first_bump_after(self, ts_ms, other_than=None):
        """The first successful bump_term (a leader's first write) at or
        after ts_ms by a coordinator other than other_than, or None."""
        for d in self.read():
            if (d["kind"] == "map_write" and d["op"] == "bump_term" and d["rc"] == "0" and
                    d["ts_ms"] >= ts_ms and d["who"] != other_than):
                return d
        return None

    def term_of(self, who, before_line=None):
        """The last term `who` made (its successful bump_term) before a line."""
        t = None
        for d in self.read():
            if before_line is not None and d["line"] >= before_line:
                break
            if d["kind"] == "map_write" and d["op"] == "bump_term" and d["rc"] == "0" and \
                    d["who"] == who:
                t = d["term"]
        return t

    def after_takeover(self, new):
        """Problems after the takeover line `new` (a bump_term dict): a
        successful map write by another coordinator, or a directive accepted
        with a lower term than the new leader's."""
        probs = []
        for d in self.read():
            if d["line"] <= new["line"]:
                continue
            if d["kind"] == "map_write" and d["who"] != new["who"] and d["rc"] == "0" and \
                    d["term"] < new["term"]:
                probs.append("map write by %s (term %d) after %s's takeover (term %d): line %d"
                             % (d["who"], d["term"], new["who"], new["term"], d["line"]))
            if d["kind"] == "directive_accepted" and d["term"] < new["term"]:
                probs.append("%s accepted a directive of term %d after %s's takeover (term %d):"
                             " line %d" % (d["who"], d["term"], new["who"], new["term"],
                                           d["line"]))
        return probs


class Rig:
    """One etcd cluster, P partitions, coordinators c1.. (each on its own
    port, all in election with TTL ttl), nodes with --coord naming every
    coordinator port (ports chosen up front), one shared audit log."""

    def __init__(self, ncoords=3, P=16, ttl=2, etcd=None, settings=(), prefix=None,
                 coord_hosts=None):
        self.P, self.ttl = P, ttl
        self.per = 16384 // P
        self.etcd = etcd or Etcd(1)
        self.prefix = prefix or "/keel/rig-%d-%d/" % (os.getpid(), random.randrange(1 << 30))
        self.base = mkdtemp("keel-rig-")
        keel_cli("coord", "--init", "--dir", self.base, "--partitions", P, "--replicas", 1, "--etcd",
                 self.etcd.urls(), "--etcd-prefix", self.prefix)
        self.secret = os.path.join(self.base, "cluster.secret")
        self.audit = Audit(os.path.join(self.base, "audit.log"))
        self.cids = ["c%d" % (i + 1) for i in range(ncoords)]
        hosts = coord_hosts or {}
        self.chost = {c: hosts.get(c, "127.0.0.1") for c in self.cids}
        self.cport = {c: free_port() for c in self.cids}
        self.coords, self.nodes, self.node_env = {}, {}, {}
        self.settings = list(settings)
        self.coord_wrap = None  # (cid, argv) -> argv, e.g. to run it in a namespace
        self.coord_etcd = {}    # cid -> the etcd URLs it uses (default: etcd.urls())

    # -- addresses --
    def caddr(self, cid):
        return "%s:%d" % (self.chost[cid], self.cport[cid])

    def coord_list(self):
        return ",".join(self.caddr(c) for c in self.cids)

    def at(self):
        return ["--coord", self.coord_list()]

    # -- coordinators --
    def start_coord(self, cid, env=None, extra=()):
        d = os.path.join(tmp_root(), "coord-dir-%s-%d" % (cid, id(self)))
        if not os.path.exists(d):
            shutil.copytree(self.base, d)
        n = sum(1 for k in os.listdir(tmp_root()) if k.startswith("coord-%s-" % cid))
        log = os.path.join(tmp_root(), "coord-%s-%d.log" % (cid, n))
        argv = [KEEL_BIN, "coord", "--dir", d, "--port", str(self.cport[cid]), "--bind",
                self.chost[cid], "--etcd", self.coord_etcd.get(cid, self.etcd.urls()),
                "--etcd-prefix", self.prefix,
                "--id", cid, "--audit-log", self.audit.path]
        if self.ttl:  # None: the default lease TTL
            argv += ["--lease-ttl-s", str(self.ttl)]
        argv += [str(a) for a in extra]
        if self.coord_wrap:
            argv = self.coord_wrap(cid, argv)
        srv = _spawn("coord", argv, self.cport[cid], d, log, env)
        self.coords[cid] = srv
        return srv

    def leader(self):
        """The id of the coordinator that answers PING with PONG, or None."""
        for cid, srv in self.coords.items():
            if not srv.alive():
                continue
            try:
                with Conn(self.cport[cid], host=self.chost[cid], timeout=1) as c:
                    if c.call("PING") == "PONG":
                        return cid
            except (OSError, EOFError, TimeoutError, ValueError):
                pass
        return None

    def wait_leader(self, timeout=20, other_than=None):
        return wait_for(lambda: (lambda l: l if l and l != other_than else None)(self.leader()),
                        timeout, 0.05, msg="a leader%s" % (" other than " + other_than
                                                           if other_than else ""))

    def boot(self, nodes=("n1", "n2", "n3")):
        """c1 leads, the other coordinators stand by, the nodes join and
        every partition is placed and served by its owner; settings applied."""
        self.start_coord(self.cids[0])
        self.wait_leader()
        for k, v in [("rebalance_interval_s", "0"), ("cleanup_after_s", "1"),
                     ("quarantine", "0"), ("bootstrap_wait_ms", "1000")] + self.settings:
            keel_cli("set", k, v, *self.at())
        for cid in self.cids[1:]:
            self.start_coord(cid)
        for nid in nodes:
            self.start_node(nid)
        wait_for(lambda: all(p["owner"] for p in self.parts()) and
                 len({p["owner"] for p in self.parts()}) == len(nodes), 20, msg="placement")
        for cid in self.cids[1:]:
            wait_for(lambda: lines(self.coords[cid], r"event=standby_listen"), 15,
                     msg="%s standing by" % cid)
        self.converge()  # every node has the placement before anyone writes

    # -- nodes --
    def start_node(self, nid, env=None):
        prev = self.nodes.get(nid)
        port = prev.port if prev else free_port()
        d = prev.dir if prev else mkdtemp("keel-%s-" % nid)
        log = os.path.join(tmp_root(), "node-%s-%d.log" % (nid, len(os.listdir(tmp_root()))))
        argv = [KEEL_BIN, "node", "--port", str(port), "--dir", d, "--coord", self.coord_list(),
                "--secret-file", self.secret, "--id", nid, "--fsync", "always", "--audit-log",
                self.audit.path]
        srv = _spawn("keel", argv, port, d, log, env)
        _wait_ready(srv, 15)
        self.nodes[nid] = srv
        return srv

    def restart_node(self, nid, env=None):
        srv = self.nodes[nid]
        srv.stop()
        n = self.start_node(nid, env)
        wait_for(lambda: lines(n, r"event=coord_registered"), 15, msg="%s registered" % nid)
        return n

    # -- views, through the CLI and the coordinator list --
    def parts(self):
        return json.loads(keel_cli("partitions", *self.at(), "--json").stdout)

    def owners(self):
        return {p["id"]: p["owner"] for p in self.parts()}

    def moves(self):
        return json.loads(keel_cli("moves", *self.at(), "--json", "--all").stdout)

    def move(self, p, to):
        return json.loads(keel_cli("move", p, to, *self.at(), "--json").stdout)["id"]

    def move_end(self, mid, timeout=40):
        def ended():
            for m in self.moves():
                if m["id"] == mid and m["state"] in ("DONE", "ABORTED"):
                    return m
            return None
        return wait_for(ended, timeout, 0.2, msg="move %d to end" % mid)

    def part_of(self, key):
        return keyslot(key) // self.per

    def key_in(self, p, prefix="own"):
        i = 0
        while True:
            k = "%s:%d" % (prefix, i)
            if self.part_of(k) == p:
                return k
            i += 1

    def ownership_problems(self):
        """Each partition served by exactly one node, the map's owner; every
        other node answers -MOVED to it."""
        owners = self.owners()
        port_of = {srv.port: nid for nid, srv in self.nodes.items()}
        keys = [self.key_in(p) for p in range(self.P)]
        replies, probs = {}, []
        for nid, srv in self.nodes.items():
            try:
                with Conn(srv.port, timeout=5) as c:
                    c.send(b"".join(encode("GET", k) for k in keys))
                    replies[nid] = [decode(r) for r in c.read_replies(len(keys), timeout=5)]
            except (OSError, EOFError, TimeoutError) as e:
                probs.append("%s unreachable: %r" % (nid, e))
        if probs:
            return probs
        for p in range(self.P):
            serving = []
            for nid in self.nodes:
                r = replies[nid][p]
                if isinstance(r, RespError):
                    if r.startswith("MOVED "):
                        to = port_of.get(int(r.split()[2].rsplit(":", 1)[1]))
                        if to != owners[p]:
                            probs.append("partition %d: %s redirects to %s, owner %s"
                                         % (p, nid, to, owners[p]))
                    else:
                        probs.append("partition %d: %s answers %r" % (p, nid, r))
                else:
                    serving.append(nid)
            if serving != [owners[p]]:
                probs.append("partition %d: served by %s, owner %s" % (p, serving, owners[p]))
        return probs

    def converge(self, timeout=15):
        last = []

        def ok():
            last[:] = self.ownership_problems()
            return not last
        try:
            wait_for(ok, timeout, 0.1, msg="one owner per partition")
        except Failure:
            raise Failure("ownership did not converge:\n  " + "\n  ".join(last[:12]))

    def kill_leader(self):
        """kill -9 of the leader; returns (its id, wall ms of the kill)."""
        cid = self.wait_leader()
        t = time.time() * 1000
        self.coords[cid].kill9()
        return cid, t

    def stop(self):
        for s in list(self.nodes.values()) + list(self.coords.values()):
            if s.alive():
                s.kill9()


class Unacked(Exception):
    """Sent, fate unknown (the connection died or timed out)."""


class Router:
    """Routes keys by the map's owners, follows -MOVED, retries -TRYAGAIN and
    refused connections. One per thread."""

    def __init__(self, rig, timeout=8.0):
        self.rig, self.timeout = rig, timeout
        self.route, self.conns = {}, {}
        self.owners = rig.owners()

    def _conn(self, port):
        c = self.conns.get(port)
        if c is None:
            c = self.conns[port] = Conn(port, timeout=self.timeout)
        return c

    def drop(self, port):
        c = self.conns.pop(port, None)
        if c:
            c.close()

    def close(self):
        for port in list(self.conns):
            self.drop(port)

    def call(self, key, *args, within=10.0):
        p = self.rig.part_of(key)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            port = self.route.get(p) or self.rig.nodes[self.owners[p]].port
            try:
                c = self._conn(port)
            except OSError:
                self.route.pop(p, None)
                time.sleep(0.05)
                continue
            try:
                r = c.call(*args)
            except (TimeoutError, OSError, EOFError):
                self.drop(port)
                raise Unacked()
            if isinstance(r, RespError):
                if r.startswith("MOVED "):
                    self.route[p] = int(r.split()[2].rsplit(":", 1)[1])
                    continue
                if r.startswith("TRYAGAIN") or r.startswith("CLUSTERDOWN"):
                    time.sleep(0.02)
                    continue
                raise Failure("unexpected reply %r to %r on port %d" % (r, args[:2], port))
            return r
        return None  # never executed


class Writer(threading.Thread):
    """SETs wr:<i> to '<tag>|<seq>'; acked[key] = last acknowledged seq.
    Unacknowledged writes may or may not have landed: a later read must show
    the acknowledged seq or a later one, never an earlier one."""

    def __init__(self, rig, nkeys=200, tag="w", rate=None):
        super().__init__(daemon=True)
        self.rig, self.tag, self.rate = rig, tag, rate
        self.keys = ["%s:%d" % (tag, i) for i in range(nkeys)]
        self.acked, self.seq = {}, 0
        self.stats = collections.Counter()
        self.stop_ev = threading.Event()
        self.error = None

    def run(self):
        r = Router(self.rig)
        rng = random.Random(self.tag)
        try:
            while not self.stop_ev.is_set():
                key = rng.choice(self.keys)
                self.seq += 1
                try:
                    rep = r.call(key, "SET", key, "%s|%d" % (self.tag, self.seq))
                except Unacked:
                    self.stats["unacked"] += 1
                    time.sleep(0.01)
                    continue
                if rep is None:
                    self.stats["not-done"] += 1
                    continue
                if rep != "OK":
                    raise Failure("SET %s got %r" % (key, rep))
                self.acked[key] = self.seq
                self.stats["acked"] += 1
                if self.rate:
                    time.sleep(1.0 / self.rate)
        except BaseException as e:  # noqa: B902 - reported by the main thread
            self.error = e
        finally:
            r.close()

    def finish(self):
        self.stop_ev.set()
        self.join(30)
        if self.error:
            raise Failure("writer failed: %r" % (self.error,))

    def lost(self):
        """Acknowledged writes that do not read back (value older than acked)."""
        r = Router(self.rig)
        out = []
        try:
            for key, s in self.acked.items():
                v = r.call(key, "GET", key)
                got = int(v.split(b"|")[1]) if isinstance(v, bytes) else -1
                if got < s:
                    out.append("%s: acked %d, reads %r" % (key, s, v))
        finally:
            r.close()
        return out
