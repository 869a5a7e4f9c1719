"""keeltest - harness for keel's integration tests.

Every integration test is a standalone /usr/bin/python3 script that imports
this module. It gives them:

  - free_port()                random free TCP port on 127.0.0.1
  - start_keel(args, dir)      a `keel node` process, ready (answers PING)
  - start_redis(cluster_enabled)  a redis-server anchor, no persistence
  - run_keel(args)             run keel to completion (for bad-flag tests)
  - Conn                       raw RESP socket: send bytes, read whole replies
  - decode(raw)                raw reply bytes -> Python values
  - keyslot(key)               Redis Cluster's CRC16 slot, computed here
  - rss_kb(pid)                resident set size from /proc
  - Suite                      a tiny case runner: one line per case, then
                               "N passed, M failed"; exit status 1 on failure

Invariants the harness keeps, so a failing or hung test never leaks:
  - everything lives under one tempfile.mkdtemp() directory, removed at exit;
  - every process it starts is killed at exit (atexit, SIGTERM/SIGINT and the
    suite's watchdog alarm all funnel into the same cleanup);
  - every wait loop is bounded both in iterations and in wall time.

Environment (set by CTest):
  KEEL_BIN    path of the keel binary (default: $KEEL_SRC/build/keel)
  KEEL_SRC    repository root
  KEEL_BUILD  CMake build directory (where tests/integration/*.c land)
"""

import atexit
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

# ---------------------------------------------------------------------------
# Paths and global state

_HERE = os.path.dirname(os.path.abspath(__file__))
KEEL_SRC = os.environ.get("KEEL_SRC") or os.path.dirname(os.path.dirname(_HERE))
KEEL_BUILD = os.environ.get("KEEL_BUILD") or os.path.join(KEEL_SRC, "build")
KEEL_BIN = os.environ.get("KEEL_BIN") or os.path.join(KEEL_BUILD, "keel")
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
REDIS_BENCHMARK = shutil.which("redis-benchmark") or "/usr/bin/redis-benchmark"

_tmp_root = None
_procs = []          # every Server handle started, for cleanup and log dumps
_ports_given = set()  # ports handed out by free_port in this process


def tmp_root():
    """The per-process temp directory; created on first use, removed at exit."""
    global _tmp_root
    if _tmp_root is None:
        _tmp_root = tempfile.mkdtemp(prefix="keeltest-")
    return _tmp_root


def mkdtemp(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=tmp_root())


def cleanup():
    """Kill every process we started and remove the temp dir. Idempotent."""
    global _tmp_root
    for s in list(_procs):
        try:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait(timeout=5)
        except Exception:
            pass
        try:
            if s._logf:
                s._logf.close()
        except Exception:
            pass
    if _tmp_root is not None and os.environ.get("KEEL_KEEP_TMP") != "1":
        shutil.rmtree(_tmp_root, ignore_errors=True)
        _tmp_root = None


def _on_signal(signum, frame):
    # Turn SIGTERM/SIGINT (ctest timeout, ^C) into SystemExit so that
    # try/finally blocks and atexit run.
    raise SystemExit(128 + signum)


atexit.register(cleanup)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def raise_nofile(want=8192):
    """Raise RLIMIT_NOFILE (soft) toward `want`, bounded by the hard limit.
    Children started afterwards inherit it. Returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


# ---------------------------------------------------------------------------
# Ports


def _can_bind(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(bus=False):
    """A free port on 127.0.0.1 not handed out before by this process.
    bus=True also requires port+10000 to be free and < 65536 (redis-server's
    cluster bus port)."""
    rng = random.Random(os.getpid() ^ int(time.time() * 1e6))
    for _ in range(500):
        port = rng.randint(20000, 55000 if bus else 60000)
        if port in _ports_given:
            continue
        if not _can_bind(port):
            continue
        if bus and not _can_bind(port + 10000):
            continue
        _ports_given.add(port)
        if bus:
            _ports_given.add(port + 10000)
        return port
    raise RuntimeError("free_port: no free port found in 500 tries")


def port_accepts(port, timeout=0.2):
    """True if something accepts a TCP connection on 127.0.0.1:port now."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.close()
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# RESP: encoding, raw reply framing and decoding


class Incomplete(Exception):
    pass


class RespError(str):
    """A decoded '-ERR ...' reply (the text without '-' and CRLF)."""

    def __repr__(self):
        return "RespError(%s)" % str.__repr__(self)


class Status(str):
    """A decoded '+OK' simple string."""

    def __repr__(self):
        return "Status(%s)" % str.__repr__(self)


def _b(x):
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    return str(x).encode()


def encode(*args):
    """RESP array of bulk strings, as clients send commands."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = _b(a)
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _line(buf, pos):
    i = buf.find(b"\r\n", pos)
    if i < 0:
        raise Incomplete()
    return buf[pos:i], i + 2


_AGG = {ord("*"), ord("~"), ord(">")}
_MAPLIKE = {ord("%"), ord("|")}


def reply_end(buf, pos=0, depth=0):
    """Index just past the complete RESP2/RESP3 reply starting at buf[pos].
    Raises Incomplete if more bytes are needed, ValueError if malformed."""
    if depth > 64:
        raise ValueError("reply nested too deep")
    if pos >= len(buf):
        raise Incomplete()
    t = buf[pos]
    line, nxt = _line(buf, pos + 1)
    if t in (ord("+"), ord("-"), ord(":"), ord("_"), ord(","), ord("#"), ord("(")):
        return nxt
    if t in (ord("$"), ord("!"), ord("=")):
        n = int(line)
        if n < 0:
            return nxt
        if len(buf) < nxt + n + 2:
            raise Incomplete()
        return nxt + n + 2
    if t in _AGG or t in _MAPLIKE:
        n = int(line)
        if n < 0:
            return nxt
        if t in _MAPLIKE:
            n *= 2
        p = nxt
        for _ in range(n):
            p = reply_end(buf, p, depth + 1)
        if t == ord("|"):  # attribute: the real reply follows it
            p = reply_end(buf, p, depth + 1)
        return p
    raise ValueError("bad RESP type byte %r at %d in %r" % (chr(t), pos, buf[pos:pos + 40]))


def _decode(buf, pos):
    t = buf[pos]
    line, nxt = _line(buf, pos + 1)
    if t == ord("+"):
        return Status(line.decode("utf-8", "replace")), nxt
    if t == ord("-"):
        return RespError(line.decode("utf-8", "replace")), nxt
    if t == ord(":"):
        return int(line), nxt
    if t == ord("("):
        return int(line), nxt
    if t == ord("_"):
        return None, nxt
    if t == ord(","):
        return float(line), nxt
    if t == ord("#"):
        return line == b"t", nxt
    if t in (ord("$"), ord("!"), ord("=")):
        n = int(line)
        if n < 0:
            return None, nxt
        data = bytes(buf[nxt:nxt + n])
        if t == ord("="):
            data = data[4:]  # "txt:" prefix of verbatim strings
        if t == ord("!"):
            return RespError(data.decode("utf-8", "replace")), nxt + n + 2
        return data, nxt + n + 2
    if t in _AGG:
        n = int(line)
        if n < 0:
            return None, nxt
        out, p = [], nxt
        for _ in range(n):
            v, p = _decode(buf, p)
            out.append(v)
        return out, p
    if t in _MAPLIKE:
        n = int(line)
        d, p = {}, nxt
        for _ in range(n):
            k, p = _decode(buf, p)
            v, p = _decode(buf, p)
            if isinstance(k, list):
                k = tuple(k)
            d[k] = v
        if t == ord("|"):
            return _decode(buf, p)
        return d, p
    raise ValueError("bad RESP type byte %r" % chr(t))


def decode(raw):
    """Decode one complete raw reply into Python values:
    +x -> Status, -x -> RespError, :n -> int, $ -> bytes/None, * -> list,
    % -> dict, _ -> None, , -> float, # -> bool."""
    v, end = _decode(raw, 0)
    if end != len(raw):
        raise ValueError("trailing bytes after reply: %r" % raw[end:end + 40])
    return v


def split_replies(buf):
    """Split a buffer of back-to-back complete replies into raw replies."""
    out, p = [], 0
    while p < len(buf):
        e = reply_end(buf, p)
        out.append(bytes(buf[p:e]))
        p = e
    return out


class Conn:
    """A raw RESP client socket. Reads are bounded by a deadline."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.port = port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False

    def send(self, data):
        self.sock.sendall(_b(data))

    def _fill(self, deadline):
        """Read more bytes into buf. False on timeout; sets eof on EOF."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_reply(self, timeout=None):
        """Raw bytes of exactly one complete reply. Raises TimeoutError or
        EOFError (with the partial bytes in the message)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        for _ in range(1 << 20):
            try:
                end = reply_end(self.buf, 0)
                raw = bytes(self.buf[:end])
                del self.buf[:end]
                return raw
            except Incomplete:
                pass
            if self.eof:
                raise EOFError("EOF after %r" % bytes(self.buf[:200]))
            if not self._fill(deadline) and not self.eof:
                raise TimeoutError("no complete reply after %r" % bytes(self.buf[:200]))
        raise TimeoutError("read_reply: too many reads")

    def read_replies(self, n, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        return [self.read_reply(timeout=max(0.001, deadline - time.monotonic())) for _ in range(n)]

    def cmd(self, *args, timeout=None):
        """Send one command, return its raw reply bytes."""
        self.send(encode(*args))
        return self.read_reply(timeout)

    def call(self, *args, timeout=None):
        """Send one command, return its decoded reply."""
        return decode(self.cmd(*args, timeout=timeout))

    def read_until_eof(self, timeout=None):
        """Read until the peer closes. Returns (bytes read, got_eof)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        for _ in range(1 << 20):
            if self.eof:
                break
            if not self._fill(deadline) and not self.eof:
                break
        data = bytes(self.buf)
        self.buf.clear()
        return data, self.eof

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# ---------------------------------------------------------------------------
# Slots (independent reimplementation, used to compute expectations)


def crc16(data):
    """CRC16-CCITT (XModem), as in Redis Cluster's crc16.c."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def keyslot(key):
    key = _b(key)
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) % 16384


def key_in_slot_range(lo, hi, prefix="k", start=0, limit=2000000):
    """First key `prefix<i>` (i >= start) whose slot is in [lo, hi]."""
    for i in range(start, start + limit):
        k = "%s%d" % (prefix, i)
        if lo <= keyslot(k) <= hi:
            return k
    raise RuntimeError("no key found in slots %d-%d" % (lo, hi))


# ---------------------------------------------------------------------------
# Processes


def rss_kb(pid):
    """Resident set size of pid in KiB, from /proc/<pid>/status."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


class Server:
    """A started server process: proc, port, dir, log (stderr file)."""

    def __init__(self, kind, proc, port, dir, log, logf, argv):
        self.kind = kind
        self.proc = proc
        self.port = port
        self.dir = dir
        self.log = log
        self._logf = logf
        self.argv = argv

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def conn(self, timeout=5.0):
        return Conn(self.port, timeout=timeout)

    def stop(self, timeout=10.0):
        """SIGTERM, wait up to timeout, then SIGKILL. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode

    def kill9(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        return self.proc.returncode

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def __repr__(self):
        return "<%s pid=%d port=%d>" % (self.kind, self.proc.pid, self.port)


def _wait_ready(srv, timeout, password=None):
    """Until srv answers PING with a complete reply (any reply: with
    --requirepass it is -NOAUTH), or it exits, or timeout."""
    deadline = time.monotonic() + timeout
    last = None
    for _ in range(10000):
        if srv.proc.poll() is not None:
            raise RuntimeError("%s exited with %s before it was ready; argv=%s\n--- log ---\n%s"
                               % (srv.kind, srv.proc.returncode, srv.argv, srv.log_tail(60)))
        if time.monotonic() > deadline:
            break
        try:
            with Conn(srv.port, timeout=1.0) as c:
                if password is not None:
                    c.cmd("AUTH", password)
                c.send(encode("PING"))
                c.read_reply(timeout=1.0)
                return
        except (OSError, EOFError, TimeoutError, ValueError) as e:
            last = e
        time.sleep(0.05)
    raise RuntimeError("%s on port %d not ready after %.0fs (last: %r); argv=%s\n--- log ---\n%s"
                       % (srv.kind, srv.port, timeout, last, srv.argv, srv.log_tail(60)))


def _spawn(kind, argv, port, dir, log, env=None):
    logf = open(log, "ab")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                            cwd=dir, close_fds=True,
                            env=dict(os.environ, **env) if env else None)
    srv = Server(kind, proc, port, dir, log, logf, argv)
    _procs.append(srv)
    return srv


def keel_available():
    return os.path.isfile(KEEL_BIN) and os.access(KEEL_BIN, os.X_OK)


def start_keel(args=("--own", "all"), dir=None, port=None, ready_timeout=10.0,
               password=None):
    """Start `keel node --port P --dir D <args>` and wait until it answers
    PING (up to ready_timeout). dir=None makes a fresh one; pass a previous
    handle's .dir to restart on the same data. Its stderr goes to a file in
    the temp dir, printed if startup fails."""
    if not keel_available():
        raise RuntimeError("keel binary not found or not executable: %s" % KEEL_BIN)
    port = port or free_port()
    dir = dir or mkdtemp("keel-data-")
    log = os.path.join(tmp_root(), "keel-%d-%d.log" % (port, len(_procs)))
    argv = [KEEL_BIN, "node", "--port", str(port), "--dir", dir] + [str(a) for a in args]
    srv = _spawn("keel", argv, port, dir, log)
    try:
        _wait_ready(srv, ready_timeout, password)
    except Exception:
        srv.kill9()
        raise
    return srv


def start_redis(cluster_enabled=False, password=None, extra=(), ready_timeout=10.0):
    """Start redis-server on a random loopback port, without persistence.
    cluster_enabled: cluster mode with every slot assigned to this node;
    returns once CLUSTER INFO says cluster_state:ok."""
    port = free_port(bus=cluster_enabled)
    dir = mkdtemp("redis-")
    log = os.path.join(dir, "redis.log")
    argv = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", dir,
            "--daemonize", "no", "--protected-mode", "no", "--logfile", ""]
    if cluster_enabled:
        # announce-ip: a lone cluster node otherwise reports its ip as ""
        argv += ["--cluster-enabled", "yes", "--cluster-announce-ip", "127.0.0.1",
                 "--cluster-config-file", os.path.join(dir, "nodes.conf")]
    if password is not None:
        argv += ["--requirepass", password]
    argv += list(extra)
    srv = _spawn("redis", argv, port, dir, log)
    try:
        _wait_ready(srv, ready_timeout, password)
        if cluster_enabled:
            with srv.conn() as c:
                if password is not None:
                    c.cmd("AUTH", password)
                r = c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
                if r != "OK":
                    raise RuntimeError("CLUSTER ADDSLOTSRANGE: %r" % r)
                deadline = time.monotonic() + 10
                for _ in range(1000):
                    info = c.call("CLUSTER", "INFO")
                    if b"cluster_state:ok" in info:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError("redis cluster_state never ok: %r" % info)
                    time.sleep(0.05)
    except Exception:
        srv.kill9()
        raise
    return srv


def run_keel(args, timeout=10.0):
    """Run keel with args to completion. Returns CompletedProcess (text)."""
    return subprocess.run([KEEL_BIN] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, text=True, errors="replace")


def write_map(path, nodes, owners, partitions=1024, version=1):
    """Write a keel --map JSON file.
    nodes: [(id, port)], owners: [(first, last, node_id)] (partition indexes)."""
    import json
    doc = {"version": version, "partitions": partitions,
           "nodes": [{"id": i, "addr": "127.0.0.1:%d" % p} for i, p in nodes],
           "owners": [{"first": f, "last": l, "node": n, "epoch": 1} for f, l, n in owners]}
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def start_keel_cluster(owners, partitions=1024, ids=("n1", "n2"), extra=()):
    """Start len(ids) keel nodes sharing one --map. Returns (nodes dict id->
    Server, map path). Ports are chosen first so the map can name them."""
    ports = {i: free_port() for i in ids}
    d = mkdtemp("map-")
    path = write_map(os.path.join(d, "map.json"), [(i, ports[i]) for i in ids], owners,
                     partitions)
    nodes = {}
    for i in ids:
        nodes[i] = start_keel(["--map", path, "--id", i] + list(extra), port=ports[i])
    return nodes, path


# ---------------------------------------------------------------------------
# Assertions and the case runner


class Failure(AssertionError):
    pass


def check(cond, msg="check failed"):
    if not cond:
        raise Failure(msg)


def eq(got, want, msg=""):
    if got != want:
        raise Failure("%s%sgot  %r\n      want %r" % (msg, ": " if msg else "", got, want))


def wait_for(pred, timeout=5.0, interval=0.05, msg="condition"):
    """Poll pred() until truthy or timeout; returns its value or raises."""
    deadline = time.monotonic() + timeout
    last = None
    for _ in range(int(timeout / interval) + 2):
        last = pred()
        if last:
            return last
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise Failure("timed out after %.1fs waiting for %s (last=%r)" % (timeout, msg, last))


class Fixture:
    """Lazily built shared state: built once; if building failed, every
    case using it fails fast with the same error instead of retrying."""

    def __init__(self, fn):
        self.fn = fn
        self.done = False
        self.value = None
        self.error = None

    def __call__(self):
        if not self.done:
            self.done = True
            try:
                self.value = self.fn()
            except BaseException as e:  # noqa: B902 - recorded and re-raised
                self.error = e
                raise
        if self.error is not None:
            raise Failure("fixture %s failed earlier: %s" % (self.fn.__name__, self.error))
        return self.value


def fixture(fn):
    return Fixture(fn)


class Suite:
    """Registers cases with @suite.case("one line saying what it checks"),
    runs them in order, prints one line per case and a final
    "N passed, M failed". A watchdog alarm bounds the whole suite."""

    def __init__(self, name, budget_s=240):
        self.name = name
        self.cases = []
        self.budget_s = budget_s

    def case(self, doc):
        def deco(fn):
            self.cases.append((fn.__name__, doc, fn))
            return fn
        return deco

    def run(self):
        only = os.environ.get("KEEL_CASE")  # run a subset: KEEL_CASE=name1,name2
        selected = [c for c in self.cases if not only or c[0] in only.split(",")]

        def watchdog(signum, frame):
            raise TimeoutError("suite %s exceeded its %ds budget" % (self.name, self.budget_s))
        signal.signal(signal.SIGALRM, watchdog)
        signal.alarm(self.budget_s)
        passed = failed = 0
        t_suite = time.monotonic()
        print("# %s: %d cases (keel=%s)" % (self.name, len(selected), KEEL_BIN), flush=True)
        try:
            for name, doc, fn in selected:
                t0 = time.monotonic()
                try:
                    fn()
                    passed += 1
                    print("ok   %-34s %s (%.2fs)" % (name, doc, time.monotonic() - t0), flush=True)
                except Exception as e:
                    failed += 1
                    print("FAIL %-34s %s (%.2fs)" % (name, doc, time.monotonic() - t0), flush=True)
                    msg = str(e) if isinstance(e, Failure) else traceback.format_exc()
                    for line in msg.rstrip().splitlines():
                        print("     | " + line, flush=True)
                    if isinstance(e, TimeoutError) and "budget" in str(e):
                        break
        finally:
            signal.alarm(0)
            if failed:
                for s in _procs:
                    if s.kind == "keel":
                        print("# --- log tail of %r (%s) ---" % (s, " ".join(s.argv[1:])))
                        for line in s.log_tail(15).splitlines():
                            print("#   " + line)
            skipped = len(self.cases) - len(selected)
            print("# %s took %.1fs" % (self.name, time.monotonic() - t_suite))
            cleanup()
        print("%d passed, %d failed" % (passed, failed) + (", %d skipped" % skipped if skipped else ""),
              flush=True)
        sys.exit(1 if failed else 0)


# ---- Coordinator helpers -----------------------------------------------------

def keel_cli(*args, check_rc=True, timeout=20):
    """Run `keel ARGS...`; returns the CompletedProcess (text). Raises on a
    non-zero exit when check_rc."""
    r = subprocess.run([KEEL_BIN] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout)
    if check_rc and r.returncode != 0:
        raise AssertionError("keel %s failed (%d): %s" % (args, r.returncode, r.stderr))
    return r


def start_coord(d, port=None, extra=(), rebalance=False, env=None):
    """Start `keel coord --dir D --port P EXTRA...` on a cluster made with
    --init, and wait until it answers PING. Unless rebalance is true, the
    rebalance loop is turned off (rebalance_interval_s 0), so that only the
    moves a test asks for happen; tests of the loop pass rebalance=True or
    set the interval themselves. env: extra environment variables."""
    port = port or free_port()
    log = os.path.join(tmp_root(), "coord-%d-%d.log" % (port, len(_procs)))
    srv = _spawn("coord", [KEEL_BIN, "coord", "--dir", d, "--port", str(port)] +
                 [str(a) for a in extra], port, d, log, env)
    _wait_ready(srv, 10)
    if not rebalance:
        pw = [str(a) for a in extra]
        auth = ["--password", pw[pw.index("--requirepass") + 1]] if "--requirepass" in pw else []
        keel_cli("set", "rebalance_interval_s", "0", "--coord", "127.0.0.1:%d" % port, *auth)
    return srv


def start_cluster_node(coord_port, secret, node_id, port=None, dir=None, extra=()):
    """Start `keel node --coord ...` and wait until it serves."""
    return start_keel(["--coord", "127.0.0.1:%d" % coord_port, "--secret-file", secret,
                       "--id", node_id, "--fsync", "always"] + list(extra), dir=dir, port=port,
                      ready_timeout=15)


# ---- Peer authentication (core/peerauth), for tests that act as a peer ------

def peer_hexmac(secret, label, a, b, n1, n2):
    """HMAC-SHA256 proof of core/peerauth.h, as 64 hex characters."""
    import hashlib
    import hmac
    msg = (b"keel-auth-v1|" + label + b"|" + bytes([len(a)]) + a + bytes([len(b)]) + b +
           bytes.fromhex(n1) + bytes.fromhex(n2))
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def peer_auth(conn, secret, my_id):
    """Runs the client side of KEEL.AUTH on conn with secret (raw bytes) as
    my_id. Returns (server id, decoded reply to PROOF)."""
    import secrets as _secrets
    nonce_c = _secrets.token_hex(32)
    my = my_id.encode() if isinstance(my_id, str) else my_id
    r = conn.call("KEEL.AUTH", "HELLO", my, nonce_c)
    if not isinstance(r, list) or len(r) != 3:
        raise AssertionError("KEEL.AUTH HELLO: %r" % (r,))
    sid, nonce_s = r[0], r[1].decode()
    proof = peer_hexmac(secret, b"client", my, sid, nonce_s, nonce_c)
    return sid.decode(), conn.call("KEEL.AUTH", "PROOF", proof)


# ---- The coordinator key (core/coordkey), for tests that play a coordinator --

def coord_binding(id_c, id_s, nonce_c_hex, nonce_s_hex):
    """peerauth_binding: lp(id_c) || lp(id_s) || nonce_c || nonce_s."""
    id_c = id_c.encode() if isinstance(id_c, str) else id_c
    id_s = id_s.encode() if isinstance(id_s, str) else id_s
    return (bytes([len(id_c)]) + id_c + bytes([len(id_s)]) + id_s + bytes.fromhex(nonce_c_hex) +
            bytes.fromhex(nonce_s_hex))


def coord_key_new():
    """A fresh Ed25519 private key (python3-cryptography)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    return Ed25519PrivateKey.generate()


def coord_key_pub_hex(key):
    from cryptography.hazmat.primitives import serialization
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw).hex()


def coord_sign(key, label, binding):
    """coordkey_sign: Ed25519 over "keel-coordkey-v1|" label "|" binding, hex."""
    return key.sign(b"keel-coordkey-v1|" + label.encode() + b"|" + binding).hex()


# ---- Prometheus conventions ----------------------------------------------------

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def promtool_check(text, what="/metrics"):
    """Runs `promtool check metrics` (Debian's prometheus package) on an
    exposition page; fails on any problem or warning it prints (missing
    HELP, non-base units, counters without _total...). Every test that
    scrapes a /metrics page passes it through here."""
    if not os.access(PROMTOOL, os.X_OK):
        raise Failure("promtool not found at %s (make deps installs the prometheus package)"
                      % PROMTOOL)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or out:
        raise Failure("promtool check metrics on %s (exit %d):\n%s" % (what, r.returncode, out))
    return text


def scrape_metrics(port, what=None, host="127.0.0.1"):
    """GET http://host:port/metrics, checked by promtool; returns the text."""
    import urllib.request
    with urllib.request.urlopen("http://%s:%d/metrics" % (host, port), timeout=5) as r:
        text = r.read().decode()
    return promtool_check(text, what or "%s:%d/metrics" % (host, port))
