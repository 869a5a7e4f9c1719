"""replication_redis - the Redis Cluster anchor of bench/replication.

Contract: run(args, node_timeout_ms, kills) starts 6 redis-server processes
in cluster mode (no persistence: --save "" --appendonly no; the given
--cluster-node-timeout), makes 3 masters + 3 replicas with
`redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`, and
returns a dict with:
  - set_benchmark: unpipelined SET throughput and latency percentiles
    (redis-benchmark --cluster, replicas attached), when args.throughput;
  - kills: `kills` times, kill -9 of the master of slot group i % 3 (the
    three ranges create made) under the writers of replication_common.Load;
    per kill the time from the kill to the first write acknowledged on that
    master's slots (the probe writes only there) and to the last of a sweep
    of one write into every 16th of its slots, then the killed node is
    started again on its port and nodes.conf (it rejoins as a replica of the
    promoted one) and the next kill waits until it is in sync;
  - writes_lost: every acknowledged key read back at the end (writers
    paused), the ones not holding their value, attributed to kills.
Every process it starts is killed by keeltest's cleanup.
"""
import os
import subprocess
import time

import keeltest as kt
import replication_client as rc
import replication_common as cm

log = cm.log


def start_node(node_timeout_ms, port=None, d=None):
    port = port or kt.free_port(bus=True)
    d = d or kt.mkdtemp("redis-")
    argv = [kt.REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", d, "--daemonize", "no",
            "--protected-mode", "no", "--logfile", "",
            "--cluster-enabled", "yes", "--cluster-announce-ip", "127.0.0.1",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-config-file", os.path.join(d, "nodes.conf")]
    srv = kt._spawn("redis", argv, port, d, os.path.join(d, "redis.log"))
    kt._wait_ready(srv, 10)
    return srv


def redis_cli(*a, timeout=120):
    return subprocess.run([kt.REDIS_CLI] + [str(x) for x in a], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def nodes_view(port):
    """CLUSTER NODES of one node: [{id, port, flags, master, slots}]."""
    txt = rc.call(port, b"CLUSTER", b"NODES", timeout=2.0).decode()
    out = []
    for line in txt.splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        slots = []
        for tok in f[8:]:
            if tok.startswith("["):
                continue
            a, _, b = tok.partition("-")
            slots.extend(range(int(a), int(b or a) + 1))
        # A node still in handshake, or forgotten, may show no address
        # ("noaddr" or ":0"): port None, which healthy() counts as not ready.
        addr = f[1].split("@")[0]
        port = int(addr.rsplit(":", 1)[1]) if ":" in addr and addr.rsplit(":", 1)[1] else None
        out.append({"id": f[0], "port": port,
                    "flags": f[2].split(","), "master": f[3], "link": f[7], "slots": slots})
    return out


def info(port, section):
    txt = rc.call(port, b"INFO", section.encode(), timeout=2.0).decode()
    return dict(line.split(":", 1) for line in txt.splitlines() if ":" in line)


def healthy(ports):
    """Every node sees 6 connected nodes, cluster_state ok, 3 masters with
    slots, each with one replica that is online and not syncing."""
    try:
        for p in ports:
            v = nodes_view(p)
            if len(v) != 6 or any("fail" in n["flags"] or "fail?" in n["flags"] or
                                  n["port"] is None or n["link"] != "connected" for n in v):
                return False
            if "cluster_state:ok" not in rc.call(p, b"CLUSTER", b"INFO").decode():
                return False
        masters = [n for n in nodes_view(ports[0]) if "master" in n["flags"] and n["slots"]]
        if len(masters) != 3:
            return False
        for m in masters:
            im = info(m["port"], "replication")
            if im.get("connected_slaves") != "1" or "state=online" not in im.get("slave0", ""):
                return False
        for n in nodes_view(ports[0]):
            if "slave" in n["flags"]:
                ir = info(n["port"], "replication")
                if ir.get("master_link_status") != "up" or ir.get("master_sync_in_progress") != "0":
                    return False
        return True
    except (OSError, ConnectionError, ValueError):
        return False


class Cluster:
    def __init__(self, node_timeout_ms):
        self.timeout_ms = node_timeout_ms
        self.srvs = [start_node(node_timeout_ms) for _ in range(6)]
        self.ports = [s.port for s in self.srvs]
        r = redis_cli("--cluster", "create", *["127.0.0.1:%d" % p for p in self.ports],
                      "--cluster-replicas", "1", "--cluster-yes")
        if r.returncode != 0:
            raise RuntimeError("redis-cli --cluster create: %s %s" % (r.stdout[-800:], r.stderr))
        self.create_cmd = ("redis-cli --cluster create <6 x 127.0.0.1:PORT> "
                           "--cluster-replicas 1 --cluster-yes")
        kt.wait_for(lambda: healthy(self.ports), 60, 0.2, msg="redis cluster healthy")
        view = nodes_view(self.ports[0])
        # the three slot groups as create made them (a failover moves a group whole)
        self.groups = sorted((n["slots"] for n in view if n["slots"]), key=lambda s: s[0])

    def master_of(self, group):
        first = group[0]
        for p in self.ports:
            try:
                for n in nodes_view(p):
                    if "master" in n["flags"] and first in n["slots"]:
                        return n["port"]
            except (OSError, ConnectionError):
                continue
        return None

    def srv(self, port):
        return next(s for s in self.srvs if s.port == port)

    def restart(self, port):
        """The killed node again, on its own port and nodes.conf. The port
        lies in the ephemeral range, so a client connection may hold it as
        its local port for a moment (redis then exits with "Address already
        in use", seen once on 2026-12-03): tried again for up to 5 s."""
        old = self.srv(port)
        for attempt in range(20):
            try:
                new = start_node(self.timeout_ms, port=port, d=old.dir)
                break
            except RuntimeError as e:
                # its output (not in e) names the cause
                if "before it was ready" not in str(e) or attempt == 19:
                    raise
                cm.log("[redis] restart on port %d failed (in use?), again" % port)
                time.sleep(0.25)
        self.srvs[self.srvs.index(old)] = new
        return new

    def stop(self):
        for s in self.srvs:
            s.kill9()


def run(args, node_timeout_ms, kills):
    log("[redis %d ms] 6 redis-server, 3 masters + 3 replicas ..." % node_timeout_ms)
    c = Cluster(node_timeout_ms)
    out = {"cluster_node_timeout_ms": node_timeout_ms,
           "setup": {"create": c.create_cmd,
                     "server_flags": "--cluster-enabled yes --cluster-node-timeout %d "
                                     "--save '' --appendonly no" % node_timeout_ms}}
    try:
        if args.throughput:
            rounds = []
            for i in range(args.rounds):
                b = cm.set_benchmark(c.ports[0], args.n, args.clients, args.keyspace,
                                     args.value_bytes)
                log("[redis %d ms] SET round %d: %s" % (node_timeout_ms, i + 1, b))
                rounds.append(b)
            out["set_benchmark"] = rounds
        if kills:
            out.update(kill_loop(args, c, kills))
    finally:
        c.stop()
    return out


def kill_loop(args, c, kills):
    smap = rc.SlotMap(c.ports)
    load = cm.Load(smap, background=args.writers, rate=args.rate, probe_rate=args.probe_rate)
    load.start()
    per_kill, kill_times, sweep_acks = [], [], []
    limit = max(60.0, 6 * c.timeout_ms / 1000.0)
    try:
        for i in range(kills):
            kt.wait_for(lambda: healthy(c.ports), 120, 0.2, msg="healthy before kill %d" % i)
            group = c.groups[i % 3]
            victim = c.master_of(group)
            load.target.slots = group
            time.sleep(args.pre_kill_s)
            t_kill = time.monotonic()
            c.srv(victim).kill9()
            kill_times.append(t_kill)
            sw = cm.start_sweep(smap, group[::16], t_kill)
            rec = cm.wait_probe_ack(load, t_kill, group, limit)
            done = cm.end_sweep(sw, limit)
            sweep_acks.extend(sw.acks)
            run = {"kill": i + 1, "victim_port": victim,
                   "writes_accepted_ms": rec and round(rec * 1000, 1),
                   "sweep_all_writable_ms": done and round(done * 1000, 1),
                   "sweep_slots": len(sw.sweep)}
            if rec is None:
                run["error"] = "no write accepted on the victim's slots within %.0f s" % limit
            new_master = c.master_of(group)
            run["new_master_port"] = new_master
            log("[redis %d ms] kill %d/%d: %s" % (c.timeout_ms, i + 1, kills, run))
            per_kill.append(run)
            time.sleep(args.post_kill_s)
            c.restart(victim)
        kt.wait_for(lambda: healthy(c.ports), 120, 0.2, msg="healthy after the last kill")
        time.sleep(1.0)
        load.pause()
        acks = load.all_acks() + sweep_acks
        lost = rc.verify(smap, acks)
    finally:
        load.finish()
    per, after = cm.attribute(lost, kill_times)
    for run, n in zip(per_kill, per):
        run["acknowledged_writes_lost"] = n
    rec = [r["writes_accepted_ms"] for r in per_kill]
    return {"kills": per_kill,
            "writes_accepted_ms": cm.summary_ms(rec),
            "sweep_all_writable_ms": cm.summary_ms([r["sweep_all_writable_ms"]
                                                    for r in per_kill]),
            "writer": load.stats(),
            "acknowledged_checked": len(acks),
            "acknowledged_writes_lost": len(lost),
            "lost_after_last_kill": after,
            "lost_examples": [a[0].decode() for a in lost[:5]]}
