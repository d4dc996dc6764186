"""`harness kafka up|down|status`: an embedded broker that outlives the command, for manual work.

`up` starts this module as a detached process that owns the broker JVM(s) under its own Supervisor and writes
`state.json` (bootstrap address, its pid); `down` sends it SIGTERM, and it stops the broker before exiting.

`up --security-protocol SASL_SSL --sasl-mechanism SCRAM-SHA-512 --user U --password-env VAR` gives the broker a
client listener as a scenario's `sasl` does (embedded.py): U is its one (super) user, with the password in the
environment variable VAR. The password never reaches a file or a command line: the detached process inherits VAR,
and `state.json` and what `up`/`status` print name the variable (`${VAR}`), so the settings can be pasted as they
are wherever VAR is set.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from harness.files import atomic
import harness.backends.kafka.security as sec
from harness.secrets import REF
from harness.backends.kafka.embedded import SASL_MECHANISMS, EmbeddedKafka
from harness.errors import InputError
from harness.files.paths import runs_dir
from harness.supervisor import Supervisor


def home() -> Path:
    return runs_dir() / "standalone-kafka"


def _state() -> dict | None:
    try:
        state = json.loads((home() / "state.json").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(state["pid"], 0)
    except OSError:
        return None
    return state


PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")  # what the embedded broker's client listener speaks


def security_request(protocol: str = "PLAINTEXT", mechanism: str | None = None, user: str | None = None,
                     password_env: str | None = None, environ=None) -> dict[str, str]:
    """The client settings `kafka up`'s options ask for (librdkafka names, the password as `${VAR}`), or an
    InputError naming the option and what is allowed, before anything starts."""
    environ = os.environ if environ is None else environ
    protocol = protocol.upper()
    if protocol not in PROTOCOLS:
        raise InputError(f"--security-protocol {protocol}: allowed {', '.join(PROTOCOLS)}")
    given = {"--sasl-mechanism": mechanism, "--user": user, "--password-env": password_env}
    if protocol == "PLAINTEXT":
        extra = [name for name, value in given.items() if value is not None]
        if extra:
            raise InputError(f"{extra[0]} needs --security-protocol SASL_PLAINTEXT or SASL_SSL (it is PLAINTEXT)")
        return {}
    missing = [name for name, value in given.items() if not value]
    if missing:
        raise InputError(f"--security-protocol {protocol} needs {', '.join(missing)} (e.g. --sasl-mechanism "
                         "SCRAM-SHA-512 --user admin --password-env KAFKA_PASSWORD)")
    assert mechanism and user and password_env
    mechanism = mechanism.upper()
    if mechanism not in SASL_MECHANISMS:
        raise InputError(f"--sasl-mechanism {mechanism}: allowed {', '.join(SASL_MECHANISMS)}")
    if any(c in user for c in ' ";=,\\'):
        raise InputError(f"--user {user!r}: not a user name (no spaces, quotes, backslashes, ';', '=' or ',')")
    if not REF.fullmatch("${" + password_env + "}"):
        raise InputError(f"--password-env {password_env!r}: the name of an environment variable (letters, digits, "
                         "'_'), not the password itself")
    if not environ.get(password_env):
        raise InputError(f"--password-env {password_env}: the environment variable {password_env} is not set "
                         "(or empty); export the password there")
    return {"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": "${" + password_env + "}"}


def _describe(request: dict[str, str]) -> str:
    if not request:
        return "PLAINTEXT"
    return f"{request['security.protocol']} {request['sasl.mechanism']} as {request['sasl.username']}"


def client_lines(state: dict) -> list[str]:
    """What to paste: the librdkafka settings, then Spark Kafka source options; the password as the environment
    variable it is read from, never its value."""
    client = dict(state.get("client") or {})
    lines = [f"bootstrap.servers={state['bootstrap']}"] + [f"{k}={v}" for k, v in client.items()]
    if client:
        var = REF.fullmatch(client["sasl.password"])
        lines.append(f"# sasl.password is the value of ${var.group(1) if var else '...'} (never written out)")
        lines.append("# Spark's Kafka source (Java client names; put the password where the reference is):")
        lines += [f"kafka.bootstrap.servers={state['bootstrap']}"]
        lines += [f"{k}={v}" for k, v in sec.spark_options(client, environ={}).items()]
    return lines


def up(nodes: int = 1, timeout: float = 120.0, security: dict[str, str] | None = None) -> dict:
    """The running broker (started now unless one is up with the same security; one with other settings is an
    InputError: two brokers would share the standalone directory)."""
    security = dict(security or {})
    state = _state()
    if state:
        if state.get("request", {}) != security:
            raise InputError(f"a standalone broker is already running with {_describe(state.get('request', {}))}, "
                             f"not {_describe(security)}: stop it first (harness kafka down)")
        return state
    home().mkdir(parents=True, exist_ok=True)
    (home() / "state.json").unlink(missing_ok=True)
    with open(home() / "standalone.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.backends.kafka.standalone", str(nodes),
                                 json.dumps(security)],
                                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state()
        if state:
            return state
        if proc.poll() is not None:
            raise RuntimeError(f"the standalone broker exited ({proc.returncode}); see {home() / 'standalone.log'}")
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise TimeoutError(f"the standalone broker did not come up in {timeout:.0f}s; see {home() / 'standalone.log'}")


def down(timeout: float = 60.0) -> bool:
    state = _state()
    if not state:
        return False
    os.kill(state["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(state["pid"], 0)
        except OSError:
            break
        time.sleep(0.2)
    else:
        os.killpg(state["pid"], signal.SIGKILL)
    (home() / "state.json").unlink(missing_ok=True)
    return True


def status() -> dict | None:
    return _state()


def _serve(nodes: int, request: dict[str, str]) -> int:
    """SIGTERM/SIGINT arrive as KeyboardInterrupt (Supervisor), which stops the broker on the way out."""
    try:
        with Supervisor(f"standalone-{uuid.uuid4().hex}") as sup:
            if request:
                user = request["sasl.username"]
                kafka = EmbeddedKafka(nodes=nodes, sasl=request["sasl.mechanism"],
                                      users={user: request["sasl.password"]}, super_users=[user],
                                      tls=request["security.protocol"] == "SASL_SSL")
                kafka.set_client(request)
            else:
                kafka = EmbeddedKafka(nodes=nodes)
            kafka.start(home(), sup)
            atomic.write_json(home() / "state.json", {"pid": os.getpid(), "bootstrap": kafka.bootstrap,
                                                     "nodes": nodes, "started_at": time.time(),
                                                     "logs": str(home() / "services"), "request": request,
                                                     "client": kafka.client})
            while all(n.child and n.child.alive() for n in kafka.nodes):
                time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        (home() / "state.json").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1]), json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}))
