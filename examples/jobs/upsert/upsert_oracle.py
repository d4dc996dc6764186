"""What upsert_job's table must hold, from the producers' history alone (the harness calls it after the run with
the acked events and the table as upsert_job.read_table reads it).

Every acked event exactly once: a row per acked id, each at the partition and offset its ack reported, each
written once (version 1: a batch written again after a driver kill bumps its rows to 2), and no row for an id
never acked. Batches Spark handed over again after they were written are counted (`batches_redelivered`): the
replays the batch-id check had to absorb.
"""
from __future__ import annotations

import pandas as pd

ID = ["producer", "seq"]


def each_event_once(acks: pd.DataFrame, table: pd.DataFrame, params: dict) -> dict:
    want = acks[ID + ["partition", "offset"]].astype("int64").drop_duplicates(ID)
    cols = ID + ["partition", "offset", "version", "batch_id", "batch_redelivered"]
    got = table[cols].fillna({"batch_redelivered": 0}).astype("int64") if len(table) else \
        pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    joined = want.merge(got, on=ID, how="outer", suffixes=("", "_table"), indicator=True)
    missing = joined[joined["_merge"] == "left_only"]
    extra = joined[joined["_merge"] == "right_only"]
    both = joined[joined["_merge"] == "both"]
    misplaced = both[(both["partition"] != both["partition_table"]) | (both["offset"] != both["offset_table"])]
    rewritten = got[got["version"] != 1]
    redelivered = got.loc[got["batch_redelivered"] > 0, "batch_id"].unique()
    ok = len(want) > 0 and missing.empty and extra.empty and misplaced.empty and rewritten.empty
    return {"ok": ok, "acked": len(want), "rows": len(got), "missing": len(missing), "not_acked": len(extra),
            "misplaced": len(misplaced), "written_more_than_once": len(rewritten),
            "max_version": int(got["version"].max()) if len(got) else 0,
            "batches": int(got["batch_id"].nunique()), "batches_redelivered": len(redelivered),
            "rows_in_redelivered_batches": int(got["batch_id"].isin(redelivered).sum()),
            "rewritten_examples": rewritten[ID + ["version"]].head(5).values.tolist(),
            "missing_examples": missing[ID].head(5).values.tolist(),
            "detail": f"{len(want)} acked events, {len(got)} rows in the table: {len(missing)} missing, "
                      f"{len(extra)} never acked, {len(misplaced)} at another offset, {len(rewritten)} written "
                      f"more than once; {len(redelivered)} batches handed over again after their write"}
