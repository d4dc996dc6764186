"""Which input a killed driver's successor reads, and writes, again: the duplicate ranges an at-least-once sink
allows after a driver kill (harness.effects.DupRange), read from the checkpoint as the dead driver left it.

Spark's micro-batch loop writes a batch's offsets to the offset log (offsets/N, its write-ahead log) before it runs
the batch, and the batch's commit (commits/N) after its sink has the rows. A restarted query re-runs every batch
logged and not committed, with the same offsets; a sink that does not skip a batch it already has (Kafka's) writes
its rows again. Layout as Spark writes it: offsets/N is 'v1', the batch metadata JSON, then one JSON line per
source ({topic: {partition: offset}}: where the batch ends); the Kafka source's starting offsets are in
sources/0/0 (a NUL byte, 'v1', the JSON line).
"""
from __future__ import annotations

import json
from pathlib import Path

from harness.effects import DupRange
from harness.spark import checkpoint as ckpt


def initial_offsets(checkpoint: Path, stream: str) -> dict[str, int]:
    """Where the query's Kafka source started (`sources/0/0`: a NUL byte, 'v1', then the JSON line), {} if unknown."""
    try:
        text = (checkpoint / "sources" / "0" / "0").read_bytes().decode("utf-8", "replace")
        parts = json.loads(text.strip().splitlines()[-1]).get(stream, {})
        return {str(p): int(o) for p, o in parts.items()}
    except (OSError, ValueError, IndexError, AttributeError):
        return {}


def dup_ranges(checkpoint: Path, stream: str, read_up_to: dict[int, int] | None = None) -> list[DupRange]:
    """The input ranges a killed driver's successor reads again, from the checkpoint as the dead driver left it.

    Spark re-runs every batch whose offsets are in the offset log (offsets/N) and whose commit (commits/N) is not:
    with the same offsets, so its rows are written again. Each partition's range starts where the last committed
    batch ended (offsets/C of the last commit C; before any commit, where the source started, else 0) and ends
    where the last planned batch ends. With asynchronous progress tracking a batch may run, and write, before its
    offsets are logged: `read_up_to` (the input's end offsets at the kill: nothing after them can have been read)
    then bounds the range instead, when it reaches further. No range where the logs agree and no bound is given."""
    committed = ckpt.committed(checkpoint).get(stream)
    start = committed if committed is not None else initial_offsets(checkpoint, stream)
    ends = {int(p): int(o) for p, o in ckpt.planned(checkpoint).get(stream, {}).items()}
    for p, o in (read_up_to or {}).items():
        ends[int(p)] = max(ends.get(int(p), 0), int(o))
    out = []
    for p in sorted(ends):
        lo = int(start.get(str(p), 0))
        if ends[p] > lo:
            out.append(DupRange(p, lo, ends[p]))
    return out
