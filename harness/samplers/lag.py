"""The broker's end offsets sampled once a second while a run's traffic flows (lag.jsonl): Spark's own progress
cannot show consumer lag (without a rate limit every batch reads up to the latest offset it saw), so the runner
samples what the broker holds and harness.analysis.lag sets it against each batch's commit."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path


class LagSampler(threading.Thread):
    """Writes {"t", "end": {partition: offset}} lines every `interval` s until stopped, and one at the stop."""

    def __init__(self, path: Path, end_offsets, interval: float = 1.0):
        super().__init__(name="lag-sampler", daemon=True)
        self.path, self.end_offsets, self.interval = path, end_offsets, interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            while not self._stop_event.is_set():
                t = time.time()
                self._sample(f, t)
                self._stop_event.wait(max(0.0, self.interval - (time.time() - t)))
            # one more at the stop (after the drain): a query that caught up only in its last batches, less than
            # an interval before it stopped, would otherwise never be seen back (a fault's recovery unknown)
            self._sample(f, time.time())

    def _sample(self, f, t: float) -> None:
        try:
            end = self.end_offsets()
        except Exception:  # a broker being killed by a fault is exactly when lag matters: keep going
            return
        if end is not None:
            f.write(json.dumps({"t": t, "end": {str(k): v for k, v in end.items()}}) + "\n")
            f.flush()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=15)
