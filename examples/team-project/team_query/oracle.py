"""What team_query.enrich must output, from the producers' history alone (the harness calls it after the run as
`oracle(acks, sink, params)` with pandas frames: the acked events, and every sink row with its batch_id).

Every acked event exactly once, tagged with the region of the partition its ack reports; nothing that was not
acked. The region is computed here with plain integer arithmetic, independently of the query's join.
"""
from __future__ import annotations

import pandas as pd

from team_query.enrich import regions


def enriched_exactly_once(acks: pd.DataFrame, sink: pd.DataFrame, params: dict) -> dict:
    names = regions(params)
    want = acks[["producer", "seq", "partition"]].astype("int64")
    want = want.assign(region=[names[p % len(names)] for p in want["partition"]])
    got = sink[["producer", "seq", "region"]].astype({"producer": "int64", "seq": "int64"}) if len(sink) else \
        pd.DataFrame({"producer": pd.Series(dtype="int64"), "seq": pd.Series(dtype="int64"),
                      "region": pd.Series(dtype="object")})
    twice = int(got.duplicated(["producer", "seq"]).sum())
    joined = want.merge(got.drop_duplicates(["producer", "seq"]), on=["producer", "seq"], how="outer",
                        suffixes=("", "_sink"), indicator=True)
    missing = int((joined["_merge"] == "left_only").sum())
    extra = int((joined["_merge"] == "right_only").sum())
    both = joined[joined["_merge"] == "both"]
    wrong_region = int((both["region"] != both["region_sink"]).sum())
    ok = len(want) > 0 and not (twice or missing or extra or wrong_region)
    return {"ok": ok, "expected": len(want), "rows": len(got), "missing": missing, "extra": extra, "twice": twice,
            "wrong_region": wrong_region,
            "detail": f"{len(want)} acked events; sink rows {len(got)}: {missing} missing, {extra} not acked, "
                      f"{twice} twice, {wrong_region} with a wrong region"}
