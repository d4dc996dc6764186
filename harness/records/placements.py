"""Where the service stored events whose sends reported no position (Event Hubs sends report none): the backend
reads them back and writes placements/*.csv (a fault just before it removes events, the runner at the end); the
checker gives those acks the service's partition and offset. The file format is the contract between the two.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from harness.records.history import complete_lines

PLACEMENT_COLUMNS = ["producer", "seq", "partition", "offset"]


def load_placements(placements_dir: Path) -> pd.DataFrame:
    """Where the service stored events whose sends reported no position (Event Hubs), as read from the service
    by a fault just before it removed them (placements/*.csv)."""
    sources = [data for f in sorted(placements_dir.glob("*.csv")) if (data := complete_lines(f)).count(b"\n") >= 1]
    frames = [pd.read_csv(io.BytesIO(data), dtype="int64") for data in sources]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in PLACEMENT_COLUMNS})
    return pd.concat(frames, ignore_index=True).drop_duplicates(["producer", "seq"], keep="last")


def apply_placements(acks: pd.DataFrame, placements: pd.DataFrame) -> pd.DataFrame:
    """Acks that report no offset (or no partition: round-robin sends) take the service's placement, so loss
    ranges in the service's positions apply to them; a partition an ack did name is never overwritten."""
    if not len(placements) or not len(acks):
        return acks
    placed = acks[["producer", "seq"]].astype("int64").merge(
        placements, on=["producer", "seq"], how="left")
    known = placed["offset"].notna().to_numpy()
    out = acks.copy()
    no_offset = known & (out["offset"].to_numpy() < 0)
    out.loc[no_offset, "offset"] = placed.loc[no_offset, "offset"].astype("int64").to_numpy()
    no_partition = known & (out["partition"].to_numpy() < 0)
    out.loc[no_partition, "partition"] = placed.loc[no_partition, "partition"].astype("int32").to_numpy()
    return out
