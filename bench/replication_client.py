"""replication_client - the cluster client bench/replication drives both
systems with (Redis Cluster and Keel see the very same code).

Contract:
  - SlotMap(ports): slot -> port of the node that serves it, learnt from
    CLUSTER SLOTS of any live seed and from -MOVED; refresh() is rate
    limited (one CLUSTER SLOTS per REFRESH_S at most, shared by threads).
  - Writer(thread): unpipelined SETs, every attempt of a NEW unique key with
    a unique value, to the slots `slots_fn()` returns (all slots by default),
    paced at `rate` per second (0: as fast as replies come). An attempt is
    acknowledged only by +OK; every other outcome (error reply, timeout,
    reset) is not, and its key is never checked; after one it sleeps
    `retry_sleep` (RETRY_SLEEP_S, 10 ms, unless told) before the next.
    After an error it re-reads CLUSTER SLOTS (rate limited), except after
    -TRYAGAIN, which it retries at the same node without re-reading (as
    redis-py, which never re-reads for it), and re-reads only after
    TRYAGAIN_REFRESH_AFTER in a row.
    Acks are recorded as
    (key, value, slot, t_send, t_ack) with time.monotonic() times.
    pause()/resume() quiesce it (no attempt outstanding while paused).
  - verify(smap, acks): GETs every acknowledged key from the node serving its
    slot now (following -MOVED) and returns the acks whose key is missing or
    holds another value: the acknowledged writes lost.
  - first_ack_after(acks, t, slots): the first ack of a write SENT after t
    into one of `slots`.
Nothing here knows which system it talks to.
"""
import binascii
import random
import socket
import threading
import time

SLOTS = 16384
REFRESH_S = 0.05
OP_TIMEOUT_S = 1.0
RETRY_SLEEP_S = 0.01
# redis-py's RedisClusterRequestTTL is 16 and it sleeps after half of it.
TRYAGAIN_REFRESH_AFTER = 8


def slot_of(key):
    """CRC16-XMODEM (binascii.crc_hqx, seed 0: Redis Cluster's CRC) of the
    key or its {tag}, mod 16384."""
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return binascii.crc_hqx(key, 0) % SLOTS


_TAGS = None


def slot_tags():
    """tag[slot]: a short string whose slot is `slot` (a key "{tag}..." lands
    there)."""
    global _TAGS
    if _TAGS is None:
        tags = [None] * SLOTS
        left, i = SLOTS, 0
        while left:
            t = b"%x" % i
            s = binascii.crc_hqx(t, 0) % SLOTS
            if tags[s] is None:
                tags[s] = t
                left -= 1
            i += 1
        _TAGS = tags
    return _TAGS


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespErr(bytes):
    pass


def read_reply(f):
    line = f.readline()
    if not line or not line.endswith(b"\r\n"):
        raise ConnectionError("EOF")
    t = line[:1]
    if t == b"+":
        return line[1:-2]
    if t == b"-":
        return RespErr(line[1:-2])
    if t == b":":
        return int(line[1:-2])
    if t == b"$":
        n = int(line[1:-2])
        if n < 0:
            return None
        d = f.read(n + 2)
        if len(d) != n + 2:
            raise ConnectionError("short read")
        return d[:-2]
    if t == b"*":
        n = int(line[1:-2])
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise ConnectionError("bad reply %r" % line[:40])


class Raw:
    """One RESP connection with a per-operation timeout."""

    def __init__(self, port, timeout=OP_TIMEOUT_S):
        self.port = port
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb", buffering=1 << 16)

    def call(self, *args):
        self.s.sendall(enc(*args))
        return read_reply(self.f)

    def pipeline(self, cmds, window=1000):
        out = []
        for a in range(0, len(cmds), window):
            chunk = cmds[a:a + window]
            self.s.sendall(b"".join(chunk))
            out.extend(read_reply(self.f) for _ in chunk)
        return out

    def close(self):
        try:
            self.f.close()
            self.s.close()
        except OSError:
            pass


def call(port, *args, timeout=5.0):
    c = Raw(port, timeout=timeout)
    try:
        return c.call(*args)
    finally:
        c.close()


def parse_moved(err):
    """b'MOVED 3999 127.0.0.1:6381' -> (3999, 6381), else None."""
    f = err.split()
    if len(f) == 3 and f[0] in (b"MOVED", b"ASK"):
        try:
            return int(f[1]), int(f[2].rsplit(b":", 1)[1])
        except ValueError:
            return None
    return None


class SlotMap:
    def __init__(self, ports):
        self.ports = list(ports)
        self.owner = [None] * SLOTS
        self.lock = threading.Lock()
        self.last = 0.0
        self.refresh(force=True)

    def set_ports(self, ports):
        with self.lock:
            self.ports = list(ports)

    def refresh(self, force=False):
        with self.lock:
            now = time.monotonic()
            if not force and now - self.last < REFRESH_S:
                return False
            self.last = now
            ports = list(self.ports)
        random.shuffle(ports)
        for p in ports:
            try:
                r = call(p, b"CLUSTER", b"SLOTS", timeout=1.0)
            except (OSError, ConnectionError, ValueError):
                continue
            if not isinstance(r, list) or not r:
                continue
            owner = [None] * SLOTS
            for ent in r:
                port = ent[2][1]
                for sl in range(ent[0], ent[1] + 1):
                    owner[sl] = port
            with self.lock:
                self.owner = owner
            return True
        return False

    def port_of(self, slot):
        return self.owner[slot]

    def moved(self, slot, port):
        self.owner[slot] = port


class Writer(threading.Thread):
    def __init__(self, name, smap, rate=0, slots_fn=None, value_bytes=32,
                 retry_sleep=RETRY_SLEEP_S):
        super().__init__(daemon=True, name=name)
        self.retry_sleep = retry_sleep
        self.wname = name.encode()
        self.smap = smap
        self.rate = rate
        self.slots_fn = slots_fn
        self.pad = b"x" * max(0, value_bytes - 24)
        self.acks = []
        self.errors = {}
        self.attempts = 0
        self.latencies = []
        self.conns = {}
        self.stop_ev = threading.Event()
        self.run_ev = threading.Event()
        self.run_ev.set()
        self.idle_ev = threading.Event()
        self.seq = 0
        self.tryagains = 0
        self.tags = slot_tags()

    def pause(self, timeout=10.0):
        self.run_ev.clear()
        self.idle_ev.wait(timeout)

    def resume(self):
        self.run_ev.set()

    def finish(self):
        self.stop_ev.set()
        self.run_ev.set()
        self.join(timeout=10)
        for c in self.conns.values():
            c.close()

    def _err(self, kind):
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def _conn(self, port):
        c = self.conns.get(port)
        if c is None:
            c = Raw(port)
            self.conns[port] = c
        return c

    def _drop(self, port):
        c = self.conns.pop(port, None)
        if c is not None:
            c.close()

    def _pick_slot(self):
        slots = self.slots_fn() if self.slots_fn else None
        if slots:
            return slots[self.seq % len(slots)]
        return random.randrange(SLOTS)

    def run(self):
        interval = 1.0 / self.rate if self.rate else 0.0
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            if not self.run_ev.is_set():
                self.idle_ev.set()
                self.run_ev.wait()
                self.idle_ev.clear()
                nxt = time.monotonic()
                continue
            if interval:
                now = time.monotonic()
                if now < nxt:
                    time.sleep(nxt - now)
                nxt = max(nxt + interval, time.monotonic() - 1.0)
            self.attempt()
        self.idle_ev.set()

    def attempt(self):
        """One SET of a fresh key; follows -MOVED at once (a new key in the
        SAME slot, at the node the redirect named: a cluster client retries
        the command it sent there), sleeps self.retry_sleep after anything
        else."""
        slot = None
        for _ in range(16):
            self.seq += 1
            if slot is None:
                slot = self._pick_slot()
            key = b"{%s}:%s:%d" % (self.tags[slot], self.wname, self.seq)
            value = b"v:%s:%d:%s" % (self.wname, self.seq, self.pad)
            port = self.smap.port_of(slot)
            if port is None:
                self._err("no_owner")
                self.smap.refresh()
                time.sleep(self.retry_sleep)
                return
            self.attempts += 1
            t0 = time.monotonic()
            try:
                r = self._conn(port).call(b"SET", key, value)
            except (OSError, ConnectionError, ValueError) as e:
                self._err("conn:" + type(e).__name__)
                self._drop(port)
                self.smap.refresh()
                time.sleep(self.retry_sleep)
                return
            t1 = time.monotonic()
            if r == b"OK":
                self.tryagains = 0
                self.acks.append((key, value, slot, t0, t1))
                self.latencies.append(t1 - t0)
                return
            if isinstance(r, RespErr):
                mv = parse_moved(r)
                if mv:
                    self.tryagains = 0
                    self._err("MOVED")
                    self.smap.moved(mv[0], mv[1])
                    continue
                kind = r.split(b" ", 1)[0].decode("ascii", "replace")
                self._err(kind)
                if kind == "TRYAGAIN":
                    # The node serves the slot and asks for a retry: retry
                    # it without re-reading CLUSTER SLOTS (at 1,024
                    # partitions that reply is ~100 KB and takes this Python
                    # client 13-26 ms to parse, longer than the server's
                    # whole transfer pause); re-read it only after
                    # TRYAGAIN_REFRESH_AFTER in a row. redis-py never
                    # re-reads the slots for a TRYAGAIN: it retries at once
                    # and sleeps 50 ms after half of its 16 attempts. This
                    # client sleeps retry_sleep before every retry, so it
                    # sees at most that much more of a pause than redis-py.
                    self.tryagains += 1
                    if self.tryagains >= TRYAGAIN_REFRESH_AFTER:
                        self.tryagains = 0
                        self.smap.refresh()
                    time.sleep(self.retry_sleep)
                    return
            else:
                self._err("unexpected")
            self.tryagains = 0
            self.smap.refresh()
            time.sleep(self.retry_sleep)
            return


def verify(smap, acks, batch=1000):
    """The acks whose key does not hold its acknowledged value now."""
    smap.refresh(force=True)
    pending = list(acks)
    lost = []
    for _ in range(20):
        if not pending:
            break
        by_port = {}
        for a in pending:
            by_port.setdefault(smap.port_of(a[2]), []).append(a)
        pending = []
        for port, group in by_port.items():
            if port is None:
                pending.extend(group)
                continue
            try:
                c = Raw(port, timeout=30)
                try:
                    replies = c.pipeline([enc(b"GET", a[0]) for a in group], window=batch)
                finally:
                    c.close()
            except (OSError, ConnectionError):
                pending.extend(group)
                continue
            for a, r in zip(group, replies):
                if isinstance(r, RespErr):
                    mv = parse_moved(r)
                    if mv:
                        smap.moved(mv[0], mv[1])
                    pending.append(a)
                elif r != a[1]:
                    lost.append(a)
        if pending:
            time.sleep(0.2)
            smap.refresh(force=True)
    if pending:
        raise RuntimeError("verify: %d keys could not be read" % len(pending))
    return lost


def first_ack_after(acks, t, slots=None):
    """The earliest ack (by t_ack) of a write sent after t, in `slots`."""
    best = None
    for a in acks:
        if a[3] > t and (slots is None or a[2] in slots):
            if best is None or a[4] < best[4]:
                best = a
    return best


def pct(vals, q):
    """Nearest-rank percentile (q in 0..1) of vals, or None."""
    if not vals:
        return None
    s = sorted(vals)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 1)) - 1))
    return s[k]
