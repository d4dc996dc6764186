"""What dedup_job must output, from the producers' history alone: the harness calls it after the run as
`each_id_once(acks, sink, params)` with pandas frames (the acked events from the ack logs; every row the Parquet
sink's log lists, with its batch_id).

Every acked event id (producer, seq) exactly once, and nothing that was never acked. The copies the `resend`
fault produced carry the ids of events already acked, so a copy that got through shows up as an id twice. A row
at another offset than its event's ack is a copy kept instead of the original: still one row per id, so counted
and shown (`copies_kept`), not failed.
"""
from __future__ import annotations

import pandas as pd

ID = ["producer", "seq"]


def each_id_once(acks: pd.DataFrame, sink: pd.DataFrame, params: dict) -> dict:
    want = acks[ID + ["offset"]].astype("int64").drop_duplicates(ID)
    if len(sink):
        got = sink[ID + ["offset"]].astype("int64")
    else:
        got = pd.DataFrame({c: pd.Series(dtype="int64") for c in ID + ["offset"]})
    per_id = got.groupby(ID).size()
    twice = per_id[per_id > 1]
    joined = want.merge(got.drop_duplicates(ID), on=ID, how="outer", suffixes=("", "_sink"), indicator=True)
    missing = joined[joined["_merge"] == "left_only"]
    extra = joined[joined["_merge"] == "right_only"]
    both = joined[joined["_merge"] == "both"]
    copies_kept = int((both["offset"] != both["offset_sink"]).sum())
    ok = len(want) > 0 and twice.empty and missing.empty and extra.empty
    return {"ok": ok, "acked": len(want), "rows": len(got), "ids_twice": len(twice),
            "extra_rows": int(twice.sum() - len(twice)), "missing": len(missing), "not_acked": len(extra),
            "copies_kept": copies_kept,
            "twice_examples": [list(map(int, k)) for k in twice.index[:5]],
            "missing_examples": missing[ID].astype("int64").head(5).values.tolist(),
            "detail": f"{len(want)} acked ids, {len(got)} rows: {len(twice)} ids more than once, {len(missing)} "
                      f"missing, {len(extra)} never acked ({copies_kept} kept as a later copy)"}
