"""What join_job must output, from the producers' history alone: called after the run as
`pairs_once(acks, sink, params, run)` with the acked events, every sink row, the job's params and the run's facts
(harness.oracles.RunFacts: its final event-time watermark).

From the acks, per order (an acked event with an even seq): its payment is the acked event (producer, seq + 1)
when there is one and its time lies in [order time, order time + bound_ms] (times: intended ms, truncated to the
millisecond, as the job's event_time). Then:
- every order with a payment must come out once, paired with exactly that payment (the join emits a pair as soon
  as both sides are in; the run drains everything);
- every order without one must come out once with an empty payment if the final watermark passed its time +
  bound (+1 ms: Spark keeps a row while a payment at the bound could still arrive); one the watermark has not
  passed yet is still in the join's state and not judged;
- no order twice, nothing for an order never acked, no pair the history does not make.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

EVICTION_SLACK_MS = 1


def pairs_once(acks: pd.DataFrame, sink: pd.DataFrame, params: dict, run) -> dict:
    bound = int(params.get("bound_ms", 4))
    mark = int(run.final_watermark_ms)
    ids = acks[["producer", "seq"]].astype("int64").assign(
        t=np.floor(acks["intended_ms"].to_numpy(dtype="float64")).astype("int64")).drop_duplicates(
        ["producer", "seq"])
    orders = ids[ids["seq"] % 2 == 0].rename(columns={"seq": "order_seq", "t": "order_t"})
    pays = ids[ids["seq"] % 2 == 1].rename(columns={"seq": "payment_seq", "t": "payment_t"})
    pays = pays.assign(order_seq=pays["payment_seq"] - 1)
    want = orders.merge(pays, on=["producer", "order_seq"], how="left")
    gap = want["payment_t"] - want["order_t"]
    want["paired"] = want["payment_seq"].notna() & (gap >= 0) & (gap <= bound)
    want["due"] = want["paired"] | (want["order_t"] + bound + EVICTION_SLACK_MS < mark)

    cols = ["producer", "order_seq", "payment_seq"]
    got = sink[cols].copy() if len(sink) else pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    got = got.astype({"producer": "int64", "order_seq": "int64", "payment_seq": "float64"})
    per_order = got.groupby(["producer", "order_seq"]).size()
    twice = per_order[per_order > 1]
    first = got.drop_duplicates(["producer", "order_seq"])
    joined = want.merge(first, on=["producer", "order_seq"], how="outer", suffixes=("", "_out"), indicator=True)
    not_acked = joined[joined["_merge"] == "right_only"]
    out = joined[joined["_merge"] == "both"]
    right = np.where(out["paired"].astype(bool), out["payment_seq_out"] == out["payment_seq"],
                     out["payment_seq_out"].isna())
    wrong = out[~right]
    absent = joined[joined["_merge"] == "left_only"]
    missing_pairs = absent[absent["paired"].astype(bool)]
    missing_unmatched = absent[~absent["paired"].astype(bool) & absent["due"].astype(bool)]
    open_ = absent[~absent["due"].astype(bool)]
    ok = len(got) > 0 and twice.empty and not_acked.empty and wrong.empty and missing_pairs.empty \
        and missing_unmatched.empty
    out_pairs = int(out["payment_seq_out"].notna().sum())
    detail = (f"{len(orders)} acked orders, {int(want['paired'].sum())} with a payment within {bound} ms; output "
              f"{len(got)} rows ({out_pairs} pairs, {len(out) - out_pairs} orders without payment): "
              f"{len(wrong)} wrong, {len(twice)} orders twice, {len(not_acked)} never acked, {len(missing_pairs)} "
              f"pairs missing, {len(missing_unmatched)} unpaired orders the watermark passed missing; "
              f"{len(open_)} still open at the final watermark, not judged")
    return {"ok": ok, "detail": detail, "bound_ms": bound, "final_watermark_ms": mark, "orders": len(orders),
            "orders_paired": int(want["paired"].sum()), "rows": len(got), "pairs_out": out_pairs,
            "unpaired_out": len(out) - out_pairs, "wrong": len(wrong), "orders_twice": len(twice),
            "not_acked": len(not_acked), "pairs_missing": len(missing_pairs),
            "unpaired_missing": len(missing_unmatched), "open": len(open_),
            "wrong_examples": wrong[["producer", "order_seq", "payment_seq", "payment_seq_out"]].head(5)
            .astype("float64").values.tolist()}
