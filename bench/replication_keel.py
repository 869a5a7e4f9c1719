"""replication_keel - the Keel side of bench/replication, through the
README's commands only (`keel coord --init --replicas RF --min-insync N`,
`keel coord`, `keel node --coord`, `keel partitions --json`, `keel status
--json`, `keel promote P NODE`, `keel set`).

Contract: run(args) returns a dict with one entry per figure of issue 11's
table; a figure whose piece the keel binary lacks is {"skipped": "reason"}
(the reason quotes what keel answered), never a number:
  - throughput: redis-benchmark --cluster SET against 3 nodes at RF 1 and at
    RF 3 min_insync 2, both clusters up, alternating which goes first per
    round; ratios RF3/RF1 of rps (target >= 0.6) and p99 (target <= 2);
  - kill: on the RF 3 cluster, --keel-kills times kill -9 of the leader of a
    partition (the node leading the most partitions, ties in turn) under replication_common.Load:
    time to the first write acknowledged on that partition (target <= 5000
    ms) and to the last of a sweep of one write into every partition the
    victim led, the node restarted on its data and the next kill only once every
    ISR is full again; every acknowledged key read back at the end (target 0
    lost);
  - rebalance: 4 nodes at RF 3 loaded with --rebalance-keys keys, a fifth
    joins with the loop on (max_moves_per_round 0, rebalance_interval_s 2):
    moved bytes / floor (<= 1.1) and final max/mean bytes per node (<= 1.10),
    node bytes = the bytes of every replica it holds;
  - transfer: --transfers times `keel promote P F` to an in-sync follower
    under an unpaced probe writer on P: the longest gap between two acks of
    the probe around each promote; p99 (target <= 20 ms). The probe sleeps
    --transfer-retry-ms (1) after a -TRYAGAIN (follows -MOVED at once), so
    the figure is the servers' unavailability plus at most that sleep.
Only settings a scenario needs are changed, and the JSON lists them.
"""
import json
import os
import statistics
import time

import keeltest as kt
import replication_client as rc
import replication_common as cm

log = cm.log
# A move has moved its data once COMMITTED (DONE follows after cleanup_after_s);
# every other state but ABORTED is still under way, whatever its name.
FINISHED = ("COMMITTED", "DONE")
ENDED = FINISHED + ("ABORTED",)


class Cluster:
    def __init__(self, rf, nnodes, partitions, fsync, min_insync=None):
        self.rf = rf
        self.fsync = fsync
        self.dir = kt.mkdtemp("coord-rf%d-" % rf)
        init = ["coord", "--init", "--dir", self.dir, "--partitions", partitions,
                "--replicas", rf]
        if min_insync:
            init += ["--min-insync", min_insync]
        r = kt.keel_cli(*init, check_rc=False)
        self.init_cmd = "keel " + " ".join(str(x) for x in init[:2] + init[4:])
        if r.returncode != 0:
            raise Unsupported("`%s` refused: %s" % (self.init_cmd, (r.stderr or r.stdout).strip()))
        self.co = kt.start_coord(self.dir)
        self.caddr = "127.0.0.1:%d" % self.co.port
        self.secret = os.path.join(self.dir, "cluster.secret")
        self.settings = {"rebalance_interval_s": "0 (keeltest.start_coord)"}
        self.set("bootstrap_wait_ms", 5000)
        self.nodes = {}
        # all at once, so that the bootstrap placement sees every one of them
        for i in range(1, nnodes + 1):
            self.add_node("n%d" % i, wait=False)
        for n in self.nodes.values():
            kt._wait_ready(n, 30)
        self.first_ids = sorted(self.nodes)

    def add_node(self, nid, port=None, d=None, wait=True):
        port = port or kt.free_port()
        d = d or kt.mkdtemp("keel-%s-" % nid)
        argv = [kt.KEEL_BIN, "node", "--port", str(port), "--dir", d, "--coord", self.caddr,
                "--secret-file", self.secret, "--id", nid, "--fsync", self.fsync]
        argv += os.environ.get("KEEL_NODE_ARGS", "").split()  # e.g. "--block-cache-mb 1024"
        n = kt._spawn("keel", argv, port, d,
                      os.path.join(kt.tmp_root(), "keel-%s-%d.log" % (nid, port)))
        self.nodes[nid] = n
        if wait:
            kt._wait_ready(n, 30)
        return n

    def restart(self, nid):
        old = self.nodes[nid]
        return self.add_node(nid, port=old.port, d=old.dir)

    def cli(self, *a, check_rc=True, timeout=60):
        return kt.keel_cli(*(list(a) + ["--coord", self.caddr]), timeout=timeout,
                           check_rc=check_rc)

    def set(self, name, value):
        self.cli("set", name, str(value))
        self.settings[name] = str(value)

    def partitions(self):
        return json.loads(self.cli("partitions", "--json").stdout)

    def status(self):
        return json.loads(self.cli("status", "--json").stdout)

    def moves(self):
        return json.loads(self.cli("moves", "--json", "--all").stdout)

    def ports(self):
        return [n.port for n in self.nodes.values() if n.alive()]

    def full(self, parts=None):
        """Every partition has rf replicas, all in the ISR, and every node UP."""
        try:
            parts = parts or self.partitions()
            st = self.status()
        except (AssertionError, ValueError, OSError):
            return False
        if any(n["liveness"] != "UP" for n in st["nodes"] if n["id"] in self.nodes):
            return False
        held = set(r for p in parts for r in p["replicas"])
        if any(nid not in held for nid in self.first_ids):
            return False
        return all(len(p["replicas"]) == self.rf and (self.rf == 1 or len(p["isr"]) == self.rf)
                   for p in parts)

    def writable(self):
        """A SET lands in every partition (through CLUSTER SLOTS and -MOVED)."""
        smap = rc.SlotMap(self.ports())
        tags = rc.slot_tags()
        per = 16384 // len(self.partitions())
        for s in range(0, 16384, per):
            ok = False
            for _ in range(4):
                port = smap.port_of(s)
                if port is None:
                    self.last_write_error = "slot %d: no owner in CLUSTER SLOTS" % s
                    return False
                try:
                    r = rc.call(port, b"SET", b"{%s}:probe" % tags[s], b"1", timeout=2.0)
                except (OSError, ConnectionError) as e:
                    self.last_write_error = "slot %d on port %d: %s %s" % (
                        s, port, type(e).__name__, e)
                    return False
                if r == b"OK":
                    ok = True
                    break
                mv = rc.parse_moved(r) if isinstance(r, rc.RespErr) else None
                if not mv:
                    self.last_write_error = "slot %d on port %d: %r" % (s, port, r)
                    return False
                smap.moved(*mv)
            if not ok:
                return False
        return True

    def ready(self, timeout=90):
        kt.wait_for(lambda: self.full(), timeout, 0.5,
                    msg="RF %d: every partition with %d replicas in the ISR" % (self.rf, self.rf))
        self.last_write_error = None
        try:
            kt.wait_for(self.writable, 30, 0.5, msg="RF %d cluster accepting writes" % self.rf)
        except kt.Failure:
            raise Unsupported("RF %d cluster never accepted a write in every partition: "
                              "last error %r" % (self.rf, self.last_write_error))

    def stop(self):
        for n in self.nodes.values():
            n.kill9()
        self.co.kill9()


class Unsupported(Exception):
    """A piece the keel binary does not have yet: the figure is skipped."""


def skipped(e):
    return {"skipped": str(e)}


# ---- throughput ---------------------------------------------------------------


def throughput(args, c1, c3):
    rounds = []
    for i in range(args.rounds):
        order = [("rf1", c1), ("rf3", c3)] if i % 2 == 0 else [("rf3", c3), ("rf1", c1)]
        r = {}
        for name, c in order:
            if c is None:
                continue
            r[name] = cm.set_benchmark(c.ports()[0], args.n, args.clients, args.keyspace,
                                       args.value_bytes)
            log("[keel] SET round %d %s: %s" % (i + 1, name, r[name]))
        rounds.append(r)
    out = {"rounds": rounds, "command": rounds[0][next(iter(rounds[0]))]["command"]}
    rps1 = statistics.median(x["rf1"]["rps"] for x in rounds)
    p1 = statistics.median(x["rf1"]["p99_ms"] for x in rounds)
    out.update({"rf1_rps": rps1, "rf1_p99_ms": p1})
    if c3 is None:
        return out
    rps3 = statistics.median(x["rf3"]["rps"] for x in rounds)
    p3 = statistics.median(x["rf3"]["p99_ms"] for x in rounds)
    out.update({"rf1_rps": rps1, "rf3_rps": rps3, "rf1_p99_ms": p1, "rf3_p99_ms": p3,
                "rps_ratio_rf3_over_rf1": round(rps3 / rps1, 3),
                "p99_ratio_rf3_over_rf1": round(p3 / p1, 3) if p1 else None,
                "round_rps_ratios": [round(x["rf3"]["rps"] / x["rf1"]["rps"], 3)
                                     for x in rounds],
                "targets": {"rps_ratio_min": 0.6, "rps_pass": rps3 / rps1 >= 0.6,
                            "p99_ratio_max": 2.0, "p99_pass": bool(p1) and p3 / p1 <= 2.0}})
    return out


# ---- kill -9 of a leader -----------------------------------------------------


def slots_of(p, nparts):
    per = 16384 // nparts
    return list(range(p * per, (p + 1) * per))


def kill_loop(args, c):
    """See the module's contract. A step that does not happen in time (an ISR
    never full again, no write accepted) ends the loop: the kills done so far
    are reported with the error, and what was acknowledged is still checked."""
    smap = rc.SlotMap(c.ports())
    load = cm.Load(smap, background=args.writers, rate=args.rate, probe_rate=args.probe_rate)
    load.start()
    per_kill, kill_times, sweep_acks = [], [], []
    ids = sorted(c.nodes)
    error = None
    try:
        for i in range(args.keel_kills):
            try:
                kt.wait_for(lambda: c.full(), 120, 0.5,
                            msg="every ISR full before kill %d" % (i + 1))
            except kt.Failure as e:
                error = str(e)
                break
            parts = c.partitions()
            # the node that leads the most partitions (ties: in turn), so
            # that leadership does not pile up on the survivors
            count = {n: sum(1 for p in parts if p["replicas"] and p["replicas"][0] == n)
                     for n in ids}
            victim = min(ids, key=lambda n: (-count[n], (ids.index(n) - i) % len(ids)))
            led = [p for p in parts if p["replicas"] and p["replicas"][0] == victim]
            if not led:
                error = "%s leads no partition before kill %d" % (victim, i + 1)
                break
            p = led[(i // len(ids)) % len(led)]
            slots = slots_of(p["id"], len(parts))
            load.target.slots = slots
            time.sleep(args.pre_kill_s)
            t_kill = time.monotonic()
            c.nodes[victim].kill9()
            kill_times.append(t_kill)
            sw = cm.start_sweep(smap, [slots_of(x["id"], len(parts))[0] for x in led], t_kill)
            rec = cm.wait_probe_ack(load, t_kill, slots, 120)
            done = cm.end_sweep(sw, 120)
            sweep_acks.extend(sw.acks)
            run = {"kill": i + 1, "victim": victim, "partition": p["id"],
                   "leader_epoch_before": p["leader_epoch"],
                   "writes_accepted_ms": rec and round(rec * 1000, 1),
                   "sweep_all_writable_ms": done and round(done * 1000, 1),
                   "sweep_partitions": len(led)}
            try:
                after = next(x for x in c.partitions() if x["id"] == p["id"])
                run["new_leader"] = after["replicas"][0] if after["replicas"] else None
                run["leader_epoch_after"] = after["leader_epoch"]
            except (AssertionError, ValueError, StopIteration):
                pass
            log("[keel] kill %d/%d: %s" % (i + 1, args.keel_kills, run))
            per_kill.append(run)
            time.sleep(args.post_kill_s)
            c.restart(victim)
            smap.set_ports(c.ports())
            if rec is None:
                error = "no write accepted on partition %d within 120 s of kill %d" % (
                    p["id"], i + 1)
                break
        try:
            kt.wait_for(lambda: c.full(), 120, 0.5, msg="every ISR full after the last kill")
        except kt.Failure as e:
            error = error or str(e)
        time.sleep(1.0)
        load.pause()
        acks = load.all_acks() + sweep_acks
        try:
            lost = rc.verify(smap, acks)
        except RuntimeError as e:
            lost, error = None, (error or "") + "; " + str(e)
    finally:
        load.finish()
    out = {"kills": per_kill, "kills_asked": args.keel_kills, "writer": load.stats(),
           "acknowledged_checked": len(acks)}
    if error:
        out["error"] = error
    rec = cm.summary_ms([r["writes_accepted_ms"] for r in per_kill])
    out["writes_accepted_ms"] = rec
    out["sweep_all_writable_ms"] = cm.summary_ms([r["sweep_all_writable_ms"] for r in per_kill])
    if lost is not None:
        per, after = cm.attribute(lost, kill_times)
        for run, n in zip(per_kill, per):
            run["acknowledged_writes_lost"] = n
        out.update({"acknowledged_writes_lost": len(lost), "lost_after_last_kill": after,
                    "lost_examples": [a[0].decode() for a in lost[:5]]})
    out["targets"] = {
        "writes_accepted_ms_max": 5000,
        "writes_accepted_pass": bool(rec) and rec["max"] <= 5000 and
        len(per_kill) == args.keel_kills and None not in [r["writes_accepted_ms"]
                                                         for r in per_kill],
        "lost_max": 0,
        "lost_pass": lost is not None and not lost and len(per_kill) == args.keel_kills}
    return out


# ---- leadership transfer -----------------------------------------------------


def transfer(args, c):
    smap = rc.SlotMap(c.ports())
    target = cm.Probe()
    retry_s = args.transfer_retry_ms / 1000.0
    probe = rc.Writer("t", smap, rate=0, slots_fn=target, retry_sleep=retry_s)
    probe.start()
    runs = []
    error = None
    try:
        parts = c.partitions()
        for i in range(args.transfers):
            try:
                transfer_one(args, c, parts, i, target, probe, runs)
            except kt.Failure as e:
                error = str(e)
                break
    finally:
        probe.finish()
    wins = [(r["window"][0], r["window"][1]) for r in runs]
    base = [b[4] - a[4] for a, b in zip(probe.acks, probe.acks[1:])
            if not any(lo <= b[4] and a[4] <= hi for lo, hi in wins)]
    pauses = [r["pause_ms"] for r in runs]
    s = cm.summary_ms(pauses)
    late_max = max([r["gap_after_window_ms"] for r in runs] or [None])
    for r in runs:
        r.pop("window")
    out = {"runs": runs, "transfers_asked": args.transfers, "pause_ms": s,
           "probe_gap_outside_transfers_ms": {
               "p50": base and round(rc.pct(base, 0.5) * 1000, 2),
               "p99": base and round(rc.pct(base, 0.99) * 1000, 2)},
           "gap_after_window_ms_max": late_max,
           "probe_errors": probe.errors,
           "probe_retry_sleep_ms": args.transfer_retry_ms,
           "definition": "the longest gap between two acknowledged probe SETs on the partition, "
                         "from 0.2 s before `keel promote` until 0.3 s after it returned (the "
                         "transfer committed; later if no probe SET was acknowledged by then); "
                         "that the map shows the new leader is checked after the window",
           "targets": {"pause_p99_ms_max": 20,
                       "pass": bool(s) and None not in pauses and s["p99"] <= 20 and
                       len(runs) == args.transfers}}
    if error:
        out["error"] = error
    return out


def transfer_one(args, c, parts, i, target, probe, runs):
    """One `keel promote` under the probe; appends its run to runs."""
    kt.wait_for(lambda: c.full(), 60, 0.2, msg="ISR full before transfer %d" % (i + 1))
    p = parts[(i * 37) % len(parts)]
    cur = next(x for x in c.partitions() if x["id"] == p["id"])
    to = cur["replicas"][(i % (len(cur["replicas"]) - 1)) + 1]
    target.slots = slots_of(p["id"], len(parts))
    time.sleep(0.3)
    t0 = time.monotonic()
    r = c.cli("promote", p["id"], to, check_rc=False)
    t1 = time.monotonic()
    if r.returncode != 0:
        msg = "`keel promote %d %s` failed: %s" % (p["id"], to, (r.stderr or r.stdout).strip())
        raise (Unsupported if not runs else kt.Failure)(msg)
    # `keel promote` returns once the transfer is committed. The check that
    # the map shows the new leader runs after the window, not inside it: a
    # `keel partitions --json` (a process, the coordinator's reply and its
    # parse here) in the pause's tail takes CPU from the nodes installing
    # the map on this 2-core machine, and this thread's GIL from the probe.
    t2 = time.monotonic()
    time.sleep(0.3)
    kt.wait_for(lambda: any(a[4] > t2 for a in probe.acks[-50:]), 30, 0.01,
                msg="a probe write acknowledged after transfer %d" % (i + 1))
    t3 = time.monotonic()
    kt.wait_for(lambda: next(x for x in c.partitions()
                             if x["id"] == p["id"])["replicas"][0] == to, 30, 0.05,
                msg="partition %d led by %s" % (p["id"], to))
    seen = time.monotonic()
    # A pause after the window (none is expected: the transfer was committed
    # 0.3 s before it ended) is reported, not hidden: the longest gap ending
    # between the window's end and 0.3 s after the check.
    time.sleep(0.3)
    late = [a[4] for a in probe.acks if t3 - 1.0 <= a[4] <= seen + 0.3]
    late_gap = max([b - a for a, b in zip(late, late[1:]) if b > t3] or [0.0])
    ts = [a[4] for a in probe.acks if t0 - 0.2 <= a[4] <= t3]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    run = {"transfer": i + 1, "partition": p["id"], "from": cur["replicas"][0], "to": to,
           "promote_cmd_ms": round((t1 - t0) * 1000, 1),
           "leader_seen_ms": round((seen - t0) * 1000, 1),
           "pause_ms": round(max(gaps) * 1000, 2) if gaps else None,
           "gap_after_window_ms": round(late_gap * 1000, 2),
           "acks_in_window": len(ts)}
    log("[keel] transfer %d/%d: %s" % (i + 1, args.transfers, run))
    run["window"] = (t0 - 0.2, t3)
    runs.append(run)


# ---- rebalance after a fifth node joins -----------------------------------------


def load_keys(c, nkeys, value_bytes=100):
    smap = rc.SlotMap(c.ports())
    val = b"v" * value_bytes
    by_port = {}
    for i in range(nkeys):
        k = b"key:%012d" % i
        by_port.setdefault(smap.port_of(rc.slot_of(k)), []).append(k)
    for port, keys in by_port.items():
        conn = rc.Raw(port, timeout=60)
        try:
            rs = conn.pipeline([rc.enc(b"SET", k, val) for k in keys])
        finally:
            conn.close()
        bad = [r for r in rs if r != b"OK"]
        if bad:
            raise RuntimeError("loading keys: %d errors, first %r" % (len(bad), bad[0]))


def node_bytes(parts, ids):
    out = {n: 0 for n in ids}
    for p in parts:
        for r in p["replicas"]:
            out[r] = out.get(r, 0) + p["bytes"]
    return out


def rebalance(args, c):
    log("[keel] rebalance: loading %d keys at RF %d ..." % (args.rebalance_keys, c.rf))
    load_keys(c, args.rebalance_keys)
    # partition bytes reach the coordinator with heartbeats
    kt.wait_for(lambda: sum(p["bytes"] for p in c.partitions()) > 0, 30, 0.5,
                msg="partition bytes reported")
    # the planner weighs each partition's load (a 5 s EWMA of its ops/s): let
    # the loading burst fade, or the join is planned on it
    try:
        kt.wait_for(lambda: sum(n.get("ops", 0) for n in c.status()["nodes"]) < 1.0, 90, 1.0,
                    msg="the loading burst's ops faded")
    except kt.Failure as e:
        log("[keel] rebalance: %s (joining anyway)" % e)
    time.sleep(2)
    before = c.partitions()
    size = {p["id"]: p["bytes"] for p in before}
    c.set("max_moves_per_round", 0)
    first = max([m["id"] for m in c.moves()] or [0])
    t0 = time.monotonic()
    c.add_node("n5")
    ids = sorted(c.nodes)
    start = node_bytes(before, ids)
    mean = sum(start.values()) / len(ids)
    floor = sum(max(0.0, v - mean) for v in start.values())
    kt.wait_for(lambda: any(n["id"] == "n5" and n["liveness"] == "UP"
                            for n in c.status()["nodes"]), 30, 0.1, msg="n5 UP")
    c.set("rebalance_interval_s", 2)
    quiet_since = None
    t_last = None
    deadline = t0 + 900
    while time.monotonic() < deadline:
        mv = [m for m in c.moves() if m["id"] > first]
        active = [m for m in mv if m["state"] not in ENDED]
        if int(time.monotonic() - t0) % 15 == 0:
            log("[keel] rebalance: %d moves, %d active, %.0f s" % (len(mv), len(active),
                                                                   time.monotonic() - t0))
        if active:
            quiet_since, t_last = None, time.monotonic()
        elif mv:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= 6:  # three planner rounds with nothing new
                break
        time.sleep(0.5)
    else:
        mv = [m for m in c.moves() if m["id"] > first]
        steps = {}
        for m in mv:
            k = "%s/%s" % (m["state"], m.get("step") or m.get("phase") or "")
            steps[k] = steps.get(k, 0) + 1
        return {"error": "not balanced after 900 s", "moves": len(mv), "moves_by_step": steps}
    mv = [m for m in c.moves() if m["id"] > first]
    done = [m for m in mv if m["state"] in FINISHED]
    after = c.partitions()
    final = node_bytes([dict(p, bytes=size[p["id"]]) for p in after], ids)
    # Bytes copied: the pre-join bytes of every replica the join added. Counted
    # from the partitions' replica sets, not from `keel moves --json --all`:
    # the coordinator keeps only the last 64 finished replica moves
    # (coord_repmove.c KEEP_FINISHED) and a join at 1,024 partitions makes
    # hundreds.
    was = {p["id"]: set(p["replicas"]) for p in before}
    added = [(p["id"], r) for p in after for r in p["replicas"] if r not in was.get(p["id"], ())]
    moved = sum(size[pid] for pid, _ in added)
    fmean = sum(final.values()) / len(ids)
    ratio_moved = moved / floor if floor else None
    mm = max(final.values()) / fmean if fmean else None
    return {"replicas": c.rf, "keys": args.rebalance_keys, "value_bytes": 100,
            "replicas_added": len(added),
            "moves_listed": len(mv),
            "moves_listed_done": len(done),
            "states": sorted(set(m["state"] for m in mv)),
            "time_to_balanced_s": round((t_last or time.monotonic()) - t0, 1),
            "bytes_per_node_start": start, "bytes_per_node_final": final,
            "floor_bytes": floor, "moved_bytes": moved,
            "moved_over_floor": ratio_moved and round(ratio_moved, 3),
            "final_max_over_mean": mm and round(mm, 3),
            "definition": "node bytes = sum of the pre-join bytes (keel partitions --json) of "
                          "every partition it holds a replica of; moved = the pre-join bytes "
                          "of every replica the join added (replica sets before and after); "
                          "moves_listed = the moves `keel moves --json --all` still lists "
                          "(the last 64 finished replica moves); floor = sum over the 5 nodes of "
                          "max(0, bytes - mean) at the join",
            "targets": {"moved_over_floor_max": 1.1, "final_max_over_mean_max": 1.10,
                        "pass": ratio_moved is not None and ratio_moved <= 1.1 and
                        mm is not None and mm <= 1.10}}


# ---- the side as a whole ---------------------------------------------------------


def run(args):
    parts = set(args.keel_parts.split(","))
    out = {"keel_bin": kt.KEEL_BIN, "fsync": args.keel_fsync, "partitions": args.partitions}
    c1 = c3 = None
    rf3_error = None
    try:
        if "throughput" in parts:
            log("[keel] RF 1: coordinator and %d nodes ..." % args.keel_nodes)
            c1 = Cluster(1, args.keel_nodes, args.partitions, args.keel_fsync)
            c1.ready()
        if parts & {"throughput", "kill", "transfer"}:
            log("[keel] RF 3 min_insync 2: coordinator and %d nodes ..." % args.keel_nodes)
            try:
                c3 = Cluster(3, args.keel_nodes, args.partitions, args.keel_fsync, min_insync=2)
                c3.ready()
                out["setup_rf3"] = {"init": c3.init_cmd, "nodes": args.keel_nodes}
            except (Unsupported, kt.Failure) as e:
                rf3_error = "RF 3: %s" % e
                if c3 is not None:
                    c3.stop()
                c3 = None
        if "throughput" in parts:
            t = throughput(args, c1, c3)
            if c3 is None:
                t["rf3"] = skipped(rf3_error)
            out["throughput"] = t
        if c1 is not None:
            c1.stop()
            c1 = None
        if "transfer" in parts:
            if c3 is None:
                out["transfer"] = skipped(rf3_error)
            else:
                try:
                    out["transfer"] = transfer(args, c3)
                except Unsupported as e:
                    out["transfer"] = skipped(str(e))
                except Exception as e:  # noqa: B902 - reported, the other parts still run
                    out["transfer"] = {"error": "%s: %s" % (type(e).__name__, e)}
        if "kill" in parts:
            if c3 is None:
                out["kill"] = skipped(rf3_error)
            else:
                try:
                    out["kill"] = kill_loop(args, c3)
                    out["kill"]["settings"] = dict(c3.settings)
                except Exception as e:  # noqa: B902 - reported, the other parts still run
                    out["kill"] = {"error": "%s: %s" % (type(e).__name__, e)}
        if c3 is not None:
            c3.stop()
            c3 = None
        if "rebalance" in parts:
            try:
                rf = args.rebalance_rf
                c = Cluster(rf, 4, args.partitions, args.keel_fsync,
                            min_insync=2 if rf >= 3 else None)
                c.ready()
                try:
                    out["rebalance"] = rebalance(args, c)
                    out["rebalance"]["settings"] = dict(c.settings)
                finally:
                    c.stop()
            except (Unsupported, kt.Failure) as e:
                out["rebalance"] = skipped("RF %d: %s" % (rf, e))
    finally:
        for c in (c1, c3):
            if c is not None:
                c.stop()
    return out
