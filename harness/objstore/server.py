"""The S3 endpoint a checkpoint on the object store is written to: moto's S3 server (the real S3 REST protocol,
which Hadoop's S3A connector speaks to it unchanged), run in a process of its own with three additions a run needs.

- `/_harness/throttle` (POST, JSON {"share": 0..1}): that share of S3 requests is answered 503 SlowDown, S3's own
  throttling answer, which S3A retries (`fs.s3a.retry.throttle.*`). The TCP proxy in front of this server
  (harness.netproxy) adds latency, resets and bandwidth caps; throttling is an HTTP answer, so it is given here.
- `/_harness/export` (POST, JSON {"dir": path}): every object of the bucket written under `dir` as a file, with
  the object's own modification time (to the microsecond: S3's listings give whole seconds, and the file sink's
  commit times are its log files' times), directory markers (keys ending in "/") as directories: the run directory
  keeps the checkpoint and the sink, so `harness check` re-judges a copy of it.
- every S3 request is written to requests.jsonl (time, method, key, status, ms): what the checkpoint cost the
  store, per batch.

Not imported by the harness: started by harness.objstore as `python -m harness.objstore.server` with moto on its
PYTHONPATH (moto is installed into the cache, not the project's environment: harness.objstore.ensure_moto).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import threading
import time
from pathlib import Path

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b'<Message>Please reduce your request rate.</Message></Error>')


class Store:
    """The wrapped moto application and what the harness asks of it."""

    def __init__(self, app, bucket: str, out_dir: Path, seed: int):
        self.app, self.bucket, self.out_dir = app, bucket, out_dir
        self.share = 0.0
        self.random = random.Random(seed)
        self.counts = {"requests": 0, "throttled": 0, "errors": 0}
        self.lock = threading.Lock()
        self.log = open(out_dir / "requests.jsonl", "a", encoding="utf-8", buffering=1)

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_harness/"):
            return self._control(path, environ, start_response)
        t0 = time.time()
        with self.lock:
            throttled = self.share > 0 and self.random.random() < self.share
            self.counts["requests"] += 1
            self.counts["throttled"] += throttled
        status = ["503"]
        if throttled:
            start_response("503 Slow Down", [("Content-Type", "application/xml"),
                                             ("Content-Length", str(len(SLOW_DOWN)))])
            body = [SLOW_DOWN]
        else:
            def recording_start(status_line, headers, exc_info=None):
                status[0] = status_line.split(" ", 1)[0]
                return start_response(status_line, headers, exc_info)
            body = self.app(environ, recording_start)
        self._record(environ, path, status[0], t0, throttled)
        return body

    def _record(self, environ, path: str, status: str, t0: float, throttled: bool) -> None:
        row = {"t": round(t0, 4), "method": environ.get("REQUEST_METHOD"), "key": path,
               "query": environ.get("QUERY_STRING", "")[:200], "status": int(status) if status.isdigit() else status,
               "ms": round((time.time() - t0) * 1000, 2)}
        if throttled:
            row["throttled"] = True
        with self.lock:
            if status.isdigit() and int(status) >= 500 and not throttled:
                self.counts["errors"] += 1
            self.log.write(json.dumps(row) + "\n")

    def _control(self, path: str, environ, start_response):
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            request = json.loads(environ["wsgi.input"].read(size) or b"{}")
            if path == "/_harness/throttle":
                share = float(request["share"])
                if not 0 <= share <= 1:
                    raise ValueError(f"share {share} outside 0..1")
                with self.lock:
                    self.share = share
                reply = {"share": share}
            elif path == "/_harness/export":
                reply = {"objects": self.export(Path(request["dir"]))}
            elif path != "/_harness/stats":
                raise ValueError(f"unknown {path}; known: /_harness/throttle, /_harness/export, /_harness/stats")
            else:
                reply = {}
            with self.lock:
                reply = {"ok": True, **reply, **self.counts, "share": self.share}
            code = "200 OK"
        except Exception as exc:  # noqa: BLE001 - the caller gets the reason
            reply, code = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, "400 Bad Request"
        data = json.dumps(reply).encode()
        start_response(code, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def export(self, dest: Path) -> int:
        """Every object of the bucket as a file under `dest`, its mtime the object's; the count written."""
        from moto.s3.models import s3_backends

        partition, account = s3_backends.bucket_accounts[self.bucket]
        bucket = s3_backends[account][partition].buckets[self.bucket]
        n = 0
        for name, key in bucket.keys.items():
            target = dest / name
            if name.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(key.value)
            stamp = key.last_modified.replace(tzinfo=__import__("datetime").timezone.utc).timestamp()
            os.utime(target, (stamp, stamp))
            n += 1
        return n


def main(argv: list[str] | None = None) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from moto.s3.models import s3_backends
    from werkzeug.serving import make_server

    parser = argparse.ArgumentParser(prog="python -m harness.objstore.server", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path, help="where ready.json and requests.jsonl go")
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    s3_backends[DEFAULT_ACCOUNT_ID]["aws"].create_bucket(args.bucket, "us-east-1")
    store = Store(DomainDispatcherApplication(create_backend_app), args.bucket, args.dir, args.seed)
    server = make_server("127.0.0.1", args.port, store, threaded=True, request_handler=MotoRequestHandler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    tmp = args.dir / "ready.json.tmp"
    tmp.write_text(json.dumps({"pid": os.getpid(), "endpoint": f"http://127.0.0.1:{args.port}",
                               "bucket": args.bucket}))
    os.replace(tmp, args.dir / "ready.json")
    server.serve_forever()
    (args.dir / "stats.json").write_text(json.dumps(store.counts))


if __name__ == "__main__":
    main()
