"""The checkpoint (and the file sink) on an object store: `spark.checkpoint_store = "s3"`.

Why S3 and not Azure Blob Storage: Hadoop's real connector has to speak to the store unchanged, and only S3 has both
a real-protocol server this machine can run and a connector for PySpark 4.3's Hadoop 3.5.0. Azurite (npm) serves
the Blob API, which only WASB spoke, and WASB is gone from hadoop-azure 3.5; ABFS needs the Data Lake Gen2 (DFS)
endpoint, which Azurite does not serve. moto's S3 server (PyPI) speaks the S3 REST protocol S3A uses (path-style
requests, multipart uploads, ListObjectsV2, conditional PUTs), in a Python process of its own.

A run with the checkpoint on the store starts, before the query's driver (its conf names the endpoint):
- moto (harness.objstore.server, through the Supervisor, on a free loopback port), with the bucket made;
- a TCP proxy in front of it (harness.netproxy, its own instance: services/objstore-proxy/), which is the endpoint
  Spark is given, so a `checkpoint_storage` fault's latency, resets and bandwidth cap apply to every checkpoint
  and sink request (its throttling is the server's own 503 SlowDown answer);
- Hadoop's S3A connector on the driver's classpath (harness/jvm/hadoop-aws/pom.xml, resolved into the cache the
  first time a scenario needs it), with fake credentials and path-style access.
At the end, once the query has stopped and while the store still runs, the bucket is copied into the run directory
(`checkpoint/`, `sink/`, with the objects' own times), so the measuring step and `harness check` read a local
copy exactly as they read a local checkpoint: the run directory stays self-contained.

moto is installed on first need into the cache (`<cache>/moto-<version>`, pip --target), not into the project's
environment: its server pulls Flask and some thirty packages the harness itself never imports.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from harness.files.paths import cache_dir

MOTO = "moto[server]==5.2.5"
BUCKET = "harness"
CHECKPOINT_KEY, SINK_KEY = "checkpoint", "sink"  # the prefixes in the bucket; the run directory's names too
HADOOP_AWS = "hadoop-aws"  # the artifact set (harness.jvm.artifacts)
STORES = ("local", "s3")
# what S3A is told: the proxy's endpoint, plain HTTP, path-style (no DNS per bucket), fake static credentials (moto
# accepts any), a region so the SDK does not look one up, and no credential chain walking the environment
CREDENTIALS_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


def moto_dir() -> Path:
    return cache_dir() / ("moto-" + MOTO.split("==")[1])


def ensure_moto(console=None) -> Path:
    """moto's server installed into the cache once (pip --target, from PyPI or the user's pip index); its path."""
    from harness.jvm.artifacts import SetupError, locked

    target = moto_dir()
    done = target / ".complete"
    if done.exists():
        return target
    with locked("moto"):
        if done.exists():
            return target
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        argv = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", str(tmp),
                MOTO]
        what = f"installing {MOTO} (the S3 server the checkpoint is written to) into {target}"
        with console.step(what) if console is not None else contextlib.nullcontext():
            proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"pip could not install {MOTO} into {tmp} (exit {proc.returncode}): "
                             f"{(proc.stderr or proc.stdout)[-2000:]}")
        (tmp / ".complete").write_text("ok\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    return target


def ensure_jars(console=None) -> None:
    """Hadoop's S3A connector and the AWS SDK modules it loads, resolved into the cache once (Maven), said."""
    from harness.jvm.artifacts import resolve, resolved

    if resolved(HADOOP_AWS):
        return
    if console is None:
        resolve(HADOOP_AWS)
        return
    with console.step("fetching Hadoop's S3A connector (hadoop-aws 3.5.0) and the AWS SDK modules it loads"):
        resolve(HADOOP_AWS)


def setup(console=None) -> None:
    """Everything a checkpoint on the store needs, fetched once (`harness setup`, or lazily by the first run)."""
    ensure_moto(console)
    ensure_jars(console)


def uri(key: str) -> str:
    return f"s3a://{BUCKET}/{key}"


def spark_conf(endpoint: str) -> dict[str, str]:
    """The Hadoop settings (through spark.hadoop.*) that point S3A at the proxy in front of the store."""
    conf = {"fs.s3a.endpoint": endpoint, "fs.s3a.endpoint.region": "us-east-1", "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.access.key": "moto-fake-access-key",
            "fs.s3a.secret.key": "moto-fake-secret-key", "fs.s3a.aws.credentials.provider": CREDENTIALS_PROVIDER}
    return {f"spark.hadoop.{k}": v for k, v in conf.items()}


def start(ctx) -> dict:
    """The store and its proxy, once per run, before the driver starts (its conf names the endpoint); returns
    what `ctx.objstore` keeps: the endpoint Spark uses (the proxy), the store's own, the proxy's control port."""
    from harness.loopback import free_port
    from harness.netproxy import start_proxy
    from harness.supervisor import wait_until

    if getattr(ctx, "objstore", None):
        return ctx.objstore
    setup(ctx.console)
    out = ctx.run_dir / "services" / "objstore"
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(moto_dir())] + [p for p in [env.get("PYTHONPATH")] if p])
    argv = [sys.executable, "-m", "harness.objstore.server", "--dir", str(out), "--port", str(port),
            "--bucket", BUCKET, "--seed", str(ctx.scenario.seed)]
    with ctx.console.step("starting the S3 store (moto) and the proxy in front of it"):
        child = ctx.supervisor.spawn("objstore", argv, log_path=out / "server.log", env=env)
        wait_until((out / "ready.json").exists, 60.0, 0.1, gone=lambda: None if child.alive() else RuntimeError(
            f"the S3 store exited at start-up (see {out / 'server.log'})"),
                   timeout_message=lambda: "the S3 store did not start within 60 s")
        direct = json.loads((out / "ready.json").read_text())["endpoint"]
        proxy = start_proxy(ctx.supervisor, ctx.run_dir / "services" / "objstore-proxy", [f"127.0.0.1:{port}"])
    ctx.objstore = info = {"endpoint": f"http://{proxy.listen[0]}", "direct": direct, "control": proxy.control,
                           "bucket": BUCKET, "pid": child.pid, "proxy_pid": proxy.child.pid}
    ctx.timeline.add("objstore_ready", **info)
    return info


def call(direct: str, what: str, request: dict, timeout: float = 120.0) -> dict:
    """One request to the store's own control endpoints (harness.objstore.server), straight, not through the
    proxy; raises with the store's reason when it refuses."""
    req = urllib.request.Request(f"{direct}/_harness/{what}", data=json.dumps(request).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            reply = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        reply = json.loads(exc.read() or b"{}")
    if not reply.get("ok"):
        raise RuntimeError(f"the S3 store: {reply.get('error')}")
    return reply


def export(ctx) -> dict:
    """The bucket copied into the run directory (checkpoint/, sink/ beside the rest), the objects' times kept;
    what was copied is on the timeline. Only once nothing writes to it any more (the query stopped)."""
    info = ctx.objstore
    reply = call(info["direct"], "export", {"dir": str(ctx.run_dir)})
    ctx.timeline.add("objstore_exported", objects=reply["objects"], requests=reply["requests"],
                     throttled=reply["throttled"])
    return reply
