"""A KRaft node's storage, formatted before its first start, with the real tool once and its output after that.

`kafka-storage format` is a JVM of its own: 0.5 s on an idle machine, about 0.9 s of CPU beside the Spark driver's
start on two cores, in every run, which the driver's start-up waits for. What it writes for a node of the
harness's clusters (a static quorum, one log directory) is two files: `bootstrap.checkpoint`, the metadata
version and feature levels of this Kafka build (the same records for every node and every cluster, a snapshot's
header, FeatureLevelRecords and footer, stamped with the time they were written), and `meta.properties` (version 1, the cluster id, the node id and the directory's own random
id). So the tool runs once per Kafka build and broker settings, its `bootstrap.checkpoint` is kept in the cache,
and later nodes get a copy of it beside a `meta.properties` written here: the tool's output for them but for the
directory id, which is random either way, and the date comment Java's Properties put first.

Settings that move the log or metadata directories (`log.dirs`, `log.dir`, `metadata.log.dir`) always get the tool.
"""
from __future__ import annotations

import base64
import hashlib
import os
import shutil
from pathlib import Path

from harness.files import atomic
from harness.files.paths import cache_dir

BOOTSTRAP = "bootstrap.checkpoint"
META = "meta.properties"
OWN_DIRS = ("log.dirs", "log.dir", "metadata.log.dir")  # where the tool would write, if a scenario moves them


def template_dir(classpath: str, settings: dict[str, str]) -> Path | None:
    """Where this Kafka build's formatted storage is kept for these broker settings (the scenario's own), or None
    when the settings move the directories (the tool then writes where they say, every time)."""
    if any(k in settings for k in OWN_DIRS):
        return None
    jars = sorted(os.path.basename(p) for p in classpath.split(os.pathsep) if p)
    digest = hashlib.sha256(repr((jars, sorted(settings.items()))).encode()).hexdigest()[:16]
    return cache_dir() / "kafka-format" / digest


def directory_id() -> str:
    """A log directory's id as Kafka makes one (16 random bytes, URL-safe base64 without padding, never starting
    with '-'), never one of the reserved ids (zero but for the last byte: unassigned, lost, migrating)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and any(raw[:15]):
            return text


def meta_properties(cluster_id: str, node_id: int, dir_id: str) -> str:
    return f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={dir_id}\n"


def is_kept(template: Path) -> bool:
    """Whether the tool's output is kept in `template` (else the next node's start runs the tool)."""
    kept = template / BOOTSTRAP
    return kept.is_file() and kept.stat().st_size > 0


def from_template(template: Path, data_dir: Path, cluster_id: str, node_id: int) -> bool:
    """`data_dir` formatted from the kept output; False when there is none yet."""
    if not is_kept(template):
        return False
    shutil.copyfile(template / BOOTSTRAP, data_dir / BOOTSTRAP)
    (data_dir / META).write_text(meta_properties(cluster_id, node_id, directory_id()), encoding="utf-8")
    return True


def keep(data_dir: Path, template: Path) -> None:
    """The tool's `bootstrap.checkpoint` from `data_dir` kept as the template, whole or not at all."""
    atomic.write_bytes(template / BOOTSTRAP, (data_dir / BOOTSTRAP).read_bytes())
