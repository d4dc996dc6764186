"""Where Spark ran the read tasks, in report.md (figures: harness.analysis.spark_tasks)."""
from __future__ import annotations

from harness.reports.source_tasks import pct


def placement_section(summary: dict) -> list[str]:
    """The report's Markdown for it."""
    if not summary:
        return []
    if "error" in summary:
        return ["", "## Where Spark read the source", summary["error"]]
    same = summary["same_executor_as_last_batch"]
    lines = ["", "## Where Spark read the source (scan tasks, from Spark's event log)",
             f"{summary['tasks']:,} tasks over {summary['batches']:,} batches on executors "
             f"{', '.join(summary['executors'])}; tasks per executor {summary['tasks_per_executor']}; locality "
             f"levels {summary['locality']}; failed tasks {summary['failed_tasks']}.",
             f"A partition read on the same executor as in its previous batch: "
             f"{pct(same)} (source partition known for {pct(summary['partition_known'])} of the tasks that read "
             f"events). Task time: median "
             f"{summary['task_ms']['median_of_batch_medians']} ms; slowest task over the median, per batch, median "
             f"{summary['task_ms']['median_max_over_median']}.", ""]
    if summary["partitions"]:
        lines += ["| partition | batches | moves | executors (tasks) |", "|---|---|---|---|"]
        lines += [f"| {p} | {v['batches']} | {v['moves']} | {v['executors']} |"
                  for p, v in summary["partitions"].items()]
    return lines
