"""One owner per partition among an executor's Python workers: a task whose partition's receiver lives in another
worker is served by that worker instead of opening a receiver of its own.

Why: PySpark runs an executor's tasks in a pool of Python worker processes and gives each task whichever worker is
idle, so from one batch to the next a partition's task lands on another worker about half the time (measured in
`harness bench eh-source`: 26 of 80 small-batch tasks, 4 partitions on local[2]). The receiver cached in the other
worker was then of no use: the task opened a new one (~0.45 s, the SDK's handshake), and exclusive receivers take
the partition from each other, so the other worker's went stale in turn; most of a small batch's time went there.
The connector's executor is one JVM whose task threads share one receiver cache; this gives an executor's Python
workers the same. The worker that opened a partition's receiver owns the partition: it listens on a Unix socket in
the abstract namespace named after the user, the executor (the workers' common parent: PySpark's daemon, or the
executor JVM without it) and the receiver key. The name is the registry: binding it is claiming it, and the
kernel frees it when the worker exits. A task first asks the owner, which reads the range with its receiver
(receivers._read, unchanged: the same checks, losses and errors) and sends the Arrow batches, its task statistics
and any error back; with no owner, the task reads itself and claims the partition.

Both ends check the other's credentials (SO_PEERCRED: same user, same parent process) before unpickling anything,
so no other local user or executor can feed or query a worker. Linux only (abstract sockets, /proc); elsewhere,
and outside a Spark task, every task reads itself as before.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pickle
import socket
import struct
import sys
import threading
from dataclasses import asdict
from typing import Callable, Iterator

LOG = logging.getLogger("harness.backends.eventhubs.spark_source")

_HEADER = struct.Struct("!Q")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_owned: dict[tuple, socket.socket] = {}  # receiver key -> the listening socket of a partition this worker owns
_owned_lock = threading.Lock()
_reading: dict[tuple, threading.Lock] = {}  # receiver key -> held while a read of that partition runs here

# (options, range, stats) -> Arrow record batches of the range, read here (receivers._read)
Serve = Callable[[object, object, object], Iterator]


def enabled() -> bool:
    """Only in a Spark task on Linux: outside Spark (tests, read_partition) each call reads itself."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        from pyspark import TaskContext

        return TaskContext.get() is not None
    except Exception:  # noqa: BLE001 - no pyspark: not in a task
        return False


def address(key: tuple) -> bytes:
    """The abstract socket name of a partition's owner in this executor."""
    digest = hashlib.sha1(repr(key).encode("utf-8")).hexdigest()[:24]
    return f"\0harness-eventhubs/{os.getuid()}/{os.getppid()}/{digest}".encode("utf-8")


def reading(key: tuple) -> threading.Lock:
    """Held by every read of the partition in this worker, its own tasks' and those it serves: one reader per
    receiver, even when a task that was stopped mid-range is still being served while the next one asks (the
    next one waits until the first read ends: its next batch cannot be sent, or eventhubs.operationTimeout)."""
    with _owned_lock:
        return _reading.setdefault(key, threading.Lock())


def owns(key: tuple) -> bool:
    with _owned_lock:
        return key in _owned


def parent_of(pid: int) -> int | None:
    """The parent pid of a process (from /proc), or None when it cannot be seen."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def trusted(sock: socket.socket) -> bool:
    """The peer runs as this user and is a sibling (same parent: the same executor's Python worker)."""
    try:
        pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    except OSError:
        return False
    return uid == os.getuid() and parent_of(pid) == os.getppid()


def _send(sock: socket.socket, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket):
    """The next message, or raises EOFError when the peer went away."""
    header = _recv_exact(sock, _HEADER.size)
    data = None if header is None else _recv_exact(sock, _HEADER.unpack(header)[0])
    if data is None:
        raise EOFError("the peer closed the connection")
    return pickle.loads(data)


# ---------------------------------------------------------------------------------------------- the owner
def claim(key: tuple, serve: Serve) -> bool:
    """Own the partition (its receiver was just opened here) unless another worker already does."""
    with _owned_lock:
        if key in _owned:
            return True
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(address(key))
            sock.listen(8)
        except OSError:  # another worker owns it
            sock.close()
            return False
        _owned[key] = sock
    threading.Thread(target=_accept, args=(sock, key, serve), daemon=True,
                     name=f"eventhubs-owner-{key[1]}-{key[3]}").start()
    return True


def release_all() -> None:
    """Stop owning (worker exit, close_all): the names are free for the next worker that opens a receiver."""
    with _owned_lock:
        sockets = list(_owned.values())
        _owned.clear()
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


def _accept(listener: socket.socket, key: tuple, serve: Serve) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # released
            return
        if not trusted(conn):
            LOG.warning("refused a connection to a partition owner from a process of another user or executor")
            conn.close()
            continue
        threading.Thread(target=_serve_one, args=(conn, key, serve), daemon=True,
                         name="eventhubs-owner-task").start()


def _serve_one(conn: socket.socket, key: tuple, serve: Serve) -> None:
    """One task's range: ("batch", arrow)... then ("done", stats) or ("error", exception)."""
    with conn, reading(key):
        try:
            options, rng, stats = _recv(conn)
        except (EOFError, OSError, pickle.UnpicklingError):
            return
        pieces = serve(options, rng, stats)
        try:
            for piece in pieces:
                try:
                    _send(conn, ("batch", piece))
                except OSError:  # the task stopped reading (Spark needed no more rows) or went away
                    pieces.close()  # the receiver stands where the last piece sent ends; the next task re-checks
                    return
            message = ("done", asdict(stats))
        except BaseException as exc:  # noqa: BLE001 - the task raises it, as if it had read itself
            message = ("error", _picklable(exc))
        try:
            _send(conn, message)
        except OSError:
            pass


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------- a task
class OwnerGone(RuntimeError):
    """The owner went away before the range was done (its worker was stopped); `delivered`: batches received."""

    def __init__(self, message: str, delivered: int) -> None:
        super().__init__(message)
        self.delivered = delivered


def connect(key: tuple) -> socket.socket | None:
    """A connection to the partition's owner in this executor, or None when no worker owns it (or it is not a
    sibling of ours)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address(key))
    except OSError:
        sock.close()
        return None
    if not trusted(sock):
        sock.close()
        return None
    return sock


def fetch(sock: socket.socket, options, rng, stats) -> Iterator:
    """The range's Arrow batches as the owner reads them; `stats` (receivers.TaskStats) gets the owner's
    statistics, `served_by` its pid. Raises OwnerGone when the owner goes away before it is done."""
    owner_pid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))[0]
    delivered = 0
    with sock:
        try:
            _send(sock, (options, rng, stats))
        except OSError:
            raise OwnerGone(f"partition {rng.partition}: the Python worker {owner_pid} owning it went away", 0) \
                from None
        while True:
            try:
                kind, value = _recv(sock)
            except (EOFError, OSError):
                raise OwnerGone(f"partition {rng.partition}: the Python worker {owner_pid} reading sequence "
                                f"numbers {rng.start}..{rng.end - 1} for this task went away after {delivered} "
                                "batches", delivered) from None
            if kind == "batch":
                delivered += 1
                yield value
            elif kind == "done":
                for name, v in value.items():
                    setattr(stats, name, v)
                stats.served_by = owner_pid
                return
            else:
                raise value
