"""Kafka consumer creations per batch, in report.md (figures: harness.analysis.consumers)."""
from __future__ import annotations


def consumers_section(summary: dict) -> list[str]:
    """The report's Markdown: totals, then the batches in which the role's clients connected."""
    if not summary:
        return []
    if "error" in summary:
        return ["", "## Kafka consumers created", summary["error"]]
    if "unknown" in summary:
        return ["", "## Kafka consumers created", summary["unknown"]]
    first = summary["first_data_batch"]
    whose = ("the Event Hubs emulator's Kafka connection records" if "eventhubs" in summary.get("records", "")
             else "the TCP proxy's connection records")
    lines = ["", f"## Kafka consumers created ({whose})",
             f"{summary['created']:,} executor consumers created ({summary['connections']:,} connections, "
             f"{summary['client_ids']:,} distinct client.ids); "
             + (f"{summary['created_in_first_data_batch']:,} in the first batch that read rows (batch {first}), "
                f"**{summary['created_after_first_data_batch']:,} after it** (in "
                f"{summary['batches_creating_after_first']:,} of the later batches)." if first is not None else
                "no batch read rows.")
             + " Spark's executors pool their consumers per topic-partition and reuse them batch after batch; a "
               "task creates one when none is idle for its partition: more tasks reading a partition at once than "
               "before (ranges split by minPartitions), a task retried, a consumer evicted, the query restarted.",
             "All roles (connections / instances created): " + ", ".join(
                 f"{r} {v['connections']} / {v['created']}" for r, v in summary["all_roles"].items()) + ".", ""]
    busy = [(b, v) for b, v in summary["per_batch"].items() if v["connections"] or v["created"]]
    quiet = summary["batches"] - len(busy)
    if busy or any(summary["outside_batches"].values()):
        lines += ["| batch | rows | connections | new client.ids | consumers created |", "|---|---|---|---|---|"]
        lines += [f"| {b} | {v['rows']:,} | {v['connections']} | {v['client_ids']} | {v['created']} |"
                  for b, v in busy]
        o = summary["outside_batches"]
        if any(o.values()):
            lines.append(f"| outside any batch | - | {o['connections']} | {o['client_ids']} | {o['created']} |")
        lines += ["", f"{quiet:,} other batches opened no executor connection."]
    return lines
