"""A team's own Maven repository (issue 32): the jars come through the mirror named in $HARNESS_MAVEN_MIRROR,
signed in with credentials Maven reads from the environment (never written to a file), and once the cache is
filled nothing is fetched again, the mirror gone or not.

The mirror is a local HTTP server laid out as Maven Central, serving the files this machine's `harness setup`
left in ~/.m2/repository (so no network is needed and nothing else can answer: Maven's own local repository is a
new, empty directory), requiring HTTP Basic sign-in and logging what it was asked for.
"""
from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.jvm.artifacts import SPARK_KAFKA, classpath_dir

pytestmark = pytest.mark.integration

REPOSITORY = Path.home() / ".m2" / "repository"
USER, PASSWORD = "ci-bot", "mirror-password-not-to-be-written"
RESOLVE = "from harness.jvm.artifacts import resolve; print('\\n'.join(sorted(p.name for p in resolve({name!r}))))"


class _Mirror(BaseHTTPRequestHandler):
    served: list[str] = []
    refused = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            type(self).refused += 1
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
            self.end_headers()
            return
        path = REPOSITORY / self.path.split("?")[0].lstrip("/")
        if path.name == "maven-metadata.xml" and not path.exists():
            path = path.with_name("maven-metadata-central.xml")  # how a local repository keeps Central's
        if not path.is_file() or REPOSITORY not in path.resolve().parents:
            self.send_response(404)
            self.end_headers()
            return
        data = path.read_bytes()
        type(self).served.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self):  # noqa: N802
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def _resolve(env: dict, name: str = SPARK_KAFKA) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RESOLVE.format(name=name)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_jars_come_through_the_mirror_signed_in_from_the_environment_then_need_no_network(tmp_path):
    expected = sorted(p.name for p in classpath_dir(SPARK_KAFKA).glob("*.jar"))  # what setup fetched from Central
    assert expected, "`harness setup` has not filled the cache"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cache = tmp_path / "cache"
    env = dict(os.environ, HARNESS_CACHE=str(cache), HARNESS_MAVEN_MIRROR=f"http://127.0.0.1:{server.server_port}/",
               HARNESS_MAVEN_USERNAME=USER, HARNESS_MAVEN_PASSWORD=PASSWORD,
               MAVEN_OPTS=f"-Dmaven.repo.local={tmp_path / 'm2'}")
    try:
        done = _resolve(env)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr[-3000:]
    got = [line for line in done.stdout.splitlines() if line.endswith(".jar")]
    assert sorted(got) == [n for n in expected if n in got] and set(got) <= set(expected) and got
    assert any(p.endswith(".jar") for p in _Mirror.served), _Mirror.served[:5]
    for path in cache.rglob("*"):  # the credentials stayed in the environment
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
    # the mirror is gone: the classpath is read from the cache, nothing fetched
    served = len(_Mirror.served)
    again = _resolve(env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [line for line in again.stdout.splitlines() if line.endswith(".jar")] == got
    assert len(_Mirror.served) == served


def test_a_mirror_that_cannot_work_is_refused_in_words(tmp_path):
    for environ, says in (({"HARNESS_MAVEN_MIRROR": "ftp://repo"}, "a repository URL, http(s)://host/path"),
                          ({"HARNESS_MAVEN_MIRROR": "https://u:p@repo.example/maven"}, "no credentials in the URL"),
                          ({"HARNESS_MAVEN_MIRROR": "https://repo.example/maven", "HARNESS_MAVEN_USERNAME": "u"},
                           "HARNESS_MAVEN_PASSWORD is not set")):
        env = dict(os.environ, HARNESS_CACHE=str(tmp_path / "empty"), **environ)
        done = subprocess.run([sys.executable, "-m", "harness", "setup"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
        assert says in done.stderr and "Traceback" not in done.stderr and "u:p@" not in done.stderr
