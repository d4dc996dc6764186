"""Every process the harness starts goes through here, so a run never leaves an orphan behind.

Three layers, because any one alone leaks in some case:
- each child gets its own process group (its JVMs and workers join it), and stopping kills the whole group;
- each child asks the kernel for SIGKILL when the harness dies (PR_SET_PDEATHSIG), which covers `kill -9` and
  crashes where no Python cleanup runs. The kernel's "parent" there is the *thread* that forked: a child started
  from a thread that ends (the nemesis, once its schedule is done) would be killed with it. So a child asked for
  from any thread but the main one is forked by the supervisor's own spawner thread, which lives as long as the
  process;
- `atexit` and the SIGINT/SIGTERM handlers installed by `Supervisor.__enter__` stop everything on the way out.
Every child also carries HARNESS_RUN_ID in its environment so tests (and users) can find strays.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, IO, Sequence

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """The one thread children are forked from when asked for outside the main thread: it never ends before the
    process does, so PR_SET_PDEATHSIG fires when the harness dies and not when the asking thread does."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-spawner")
        return _SPAWNER


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log_path: Path | None
    stop_signal: int = signal.SIGTERM
    _log: IO | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


class Supervisor:
    """Starts children, remembers them, and stops them all (also on Ctrl-C, SIGTERM or interpreter exit)."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.children: list[Child] = []
        self._lock = threading.Lock()
        self._old_handlers: dict[int, object] = {}
        atexit.register(self.stop_all)

    def spawn(self, name: str, argv: Sequence[str], *, log_path: Path | None = None, env: dict | None = None,
              cwd: str | os.PathLike | None = None, stop_signal: int = signal.SIGTERM,
              stdout_pipe: bool = False) -> Child:
        full_env = dict(os.environ if env is None else env)
        full_env["HARNESS_RUN_ID"] = self.run_id
        log = None
        if stdout_pipe:
            stdout, stderr = subprocess.PIPE, (open(log_path, "ab") if log_path else subprocess.DEVNULL)
            log = stderr if log_path else None
        elif log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "ab")
            stdout = stderr = log
        else:
            stdout = stderr = subprocess.DEVNULL
        def popen() -> subprocess.Popen:
            return subprocess.Popen(list(argv), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, env=full_env,
                                    cwd=cwd, start_new_session=True, preexec_fn=_die_with_parent)

        proc = popen() if threading.current_thread() is threading.main_thread() else _spawner().submit(popen).result()
        child = Child(name, proc, log_path, stop_signal, log)
        with self._lock:
            self.children.append(child)
        return child

    def stop(self, child: Child, timeout: float = 15.0) -> int | None:
        """Polite signal to the child's whole group, then SIGKILL to the group after `timeout`."""
        if child.alive():
            _signal_group(child.pid, child.stop_signal)
            try:
                child.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        # The leader may be gone while its group (JVMs, executors) lingers: always sweep the group.
        _signal_group(child.pid, signal.SIGKILL)
        try:
            child.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if child._log is not None:
            child._log.close()
            child._log = None
        with self._lock:
            if child in self.children:
                self.children.remove(child)
        return child.proc.returncode

    def stop_all(self, timeout: float = 15.0) -> None:
        with self._lock:
            children = list(reversed(self.children))
        for child in children:
            self.stop(child, timeout)

    # Signals: the first Ctrl-C raises KeyboardInterrupt in the main thread (the runner then stops children and
    # writes what it has); SIGTERM and SIGHUP (a closed terminal, a CI job cancelled) are turned into the same
    # path, as StoppedBySignal naming the signal.
    def __enter__(self) -> "Supervisor":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._old_handlers[sig] = signal.signal(sig, _raise_interrupt)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop_all()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
            self._old_handlers.clear()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StoppedBySignal(KeyboardInterrupt):
    """The run stopped from outside by a signal (SIGTERM, SIGHUP): Ctrl-C's path, with the signal's name."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


def _raise_interrupt(signum, frame):
    raise StoppedBySignal(signum)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def processes_with_env(name: str, value: str) -> list[int]:
    """PIDs of live processes whose environment has name=value (HARNESS_RUN_ID, or a test's own marker)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition", *,
               gone: Callable[[], Exception | None] | None = None, error: type[Exception] = TimeoutError,
               timeout_message: Callable[[], str] | None = None):
    """The predicate's first true value, polled every `interval`. `gone` returns the exception to raise at once
    when waiting longer is pointless (the process that would make it true exited), else None. Past `timeout`:
    `error(timeout_message())`, by default a TimeoutError naming what was waited for."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        problem = gone() if gone is not None else None
        if problem is not None:
            raise problem
        if time.monotonic() > deadline:
            raise error(timeout_message() if timeout_message else f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def log_lines(path: Path) -> list[str]:
    """A child's log as lines (none when it never wrote one): what start-up errors quote."""
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []


def log_tail(path: Path, n: int = 20) -> str:
    return "\n".join(log_lines(path)[-n:])
