"""Consumer lag over time: what the broker held minus what the query had committed, sampled once a second.

Spark's own progress cannot show it (without a rate limit every batch reads up to the latest offset it saw, so
`latestOffset - endOffset` is 0 even when the query is far behind): the runner samples the broker's end offsets
and each batch's commit is known from its progress record (start timestamp + triggerExecution).
"""
from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path


class LagSampler(threading.Thread):
    """Writes {"t", "end": {partition: offset}} lines every `interval` s until stopped."""

    def __init__(self, path: Path, end_offsets, interval: float = 1.0):
        super().__init__(name="lag-sampler", daemon=True)
        self.path, self.end_offsets, self.interval = path, end_offsets, interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            while not self._stop_event.is_set():
                t = time.time()
                try:
                    end = self.end_offsets()
                except Exception:  # a broker being killed by a fault is exactly when lag matters: keep going
                    end = None
                if end is not None:
                    f.write(json.dumps({"t": t, "end": {str(k): v for k, v in end.items()}}) + "\n")
                    f.flush()
                self._stop_event.wait(max(0.0, self.interval - (time.time() - t)))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=15)


def epoch_s(iso: str) -> float:
    """A progress record's ISO-8601 `timestamp` (UTC, "Z") as epoch seconds."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _committed_timeline(progress: list[dict]) -> list[tuple[float, dict[str, int]]]:
    """(commit time, per-partition end offset) of each batch, in commit order."""
    out = []
    for p in progress:
        sources = p.get("sources") or []
        if not sources or "timestamp" not in p:
            continue
        end = sources[0].get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if not isinstance(end, dict):
            continue
        parts: dict[str, int] = {}
        for value in end.values():  # {stream: {partition: offset}}
            if isinstance(value, dict):
                parts.update({str(k): int(v) for k, v in value.items()})
        done = epoch_s(p["timestamp"]) + p.get("durationMs", {}).get("triggerExecution", 0) / 1000.0
        out.append((done, parts))
    out.sort(key=lambda x: x[0])
    return out


def lag_by_partition(samples: list[dict], progress: list[dict]) -> list[tuple[float, dict[str, int]]]:
    """(t, {partition: lag}) per sample: events on the broker not yet committed by the query at that moment."""
    commits = _committed_timeline(progress)
    out, i, committed = [], 0, {}
    for s in sorted(samples, key=lambda x: x["t"]):
        while i < len(commits) and commits[i][0] <= s["t"]:
            committed = commits[i][1]
            i += 1
        out.append((s["t"], {p: max(0, int(end) - committed.get(p, 0)) for p, end in s["end"].items()}))
    return out


def lag_series(samples: list[dict], progress: list[dict]) -> list[dict]:
    """[{t, lag}] per sample, summed over partitions."""
    return [{"t": t, "lag": sum(parts.values())} for t, parts in lag_by_partition(samples, progress)]


def lag_summary(series: list[dict]) -> dict:
    if not series:
        return {"max": 0, "mean": 0.0, "final": 0, "samples": 0}
    values = [x["lag"] for x in series]
    return {"max": max(values), "mean": sum(values) / len(values), "final": values[-1], "samples": len(values)}
