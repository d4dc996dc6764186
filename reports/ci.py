"""What a CI job shows of a run: junit.xml (reports.junit: one test case per check, the same cases in every run of
a scenario) and summary.md, short Markdown fit for a job summary ($GITHUB_STEP_SUMMARY). Pure functions of
result.json."""
from __future__ import annotations

from typing import Any

from harness.check import UNDECIDED, status_of
from harness.reports.junit import junit_xml

__all__ = ["junit_xml", "summary_markdown"]  # junit.xml is written through reports.ci


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summary_markdown(result: dict[str, Any], baseline: dict | None = None) -> str:
    verdict = result.get("verdict", "unjudged")
    mark = {"pass": "✅", "fail": "❌"}.get(verdict, "⚠️")
    c, lat, thr = result.get("counts", {}), result.get("latency_ms", {}), result.get("throughput", {})
    checks = result.get("checks") or []
    failed = [ch for ch in checks if status_of(ch) == "fail"]
    undecided = [ch for ch in checks if status_of(ch) in UNDECIDED]
    lines = [f"## {mark} `{result.get('scenario')}` on {result.get('backend')}: {verdict.upper()}", ""]
    if verdict == "unjudged":
        lines += [f"**Unjudged:** {result.get('unjudged_reason')}", ""]
    lines += ["| produced | delivered | lost | expected loss | duplicates | p50 ms | p99 ms | produced/s | "
              "Spark rows/s while busy | faults | duration |", "|---|---|---|---|---|---|---|---|---|---|---|",
              f"| {c.get('produced', 0):,} | {c.get('delivered_unique', 0):,} | {c.get('lost', 0):,} | "
              f"{c.get('expected_lost', 0):,} | {c.get('duplicates', 0):,} | {lat.get('p50', 0):,.0f} | "
              f"{lat.get('p99', 0):,.0f} | {thr.get('produce_eps', 0):,.0f} | {thr.get('process_rps', 0):,.0f} | "
              f"{len(result.get('faults') or [])} | {float(result.get('duration_s') or 0) / 60:,.1f} min |", ""]
    if failed:
        lines += [f"**{len(failed)} of {len(checks)} checks failed:**", ""]
        lines += [f"- `{ch['name']}`: {_one_line(ch['detail'], 500)}" for ch in failed]
    if undecided:
        lines += ([""] if failed else []) + [f"**{len(undecided)} of {len(checks)} checks unjudged:**", ""]
        lines += [f"- `{ch['name']}`: {_one_line(ch['detail'], 500)}" for ch in undecided]
    if not failed and not undecided:
        lines += [f"All {len(checks)} checks passed."]
    resources = result.get("resources") or {}
    roles = resources.get("roles") or {}
    if roles:
        lines += ["", "| processes | peak RSS MB (10^6 B) | CPU cores (mean) |", "|---|---|---|"]
        lines += [f"| {role} | {(r.get('rss_peak_bytes') or 0) / 1e6:,.0f} | {r.get('cores_mean') or 0:.2f} |"
                  for role, r in roles.items()]
    if baseline:
        lines += ["", f"Compared with the baseline `{baseline.get('baseline', {}).get('run')}`: "
                  + ("; ".join(baseline.get("failures") or []) or "no figure moved past its threshold.")]
    lines += ["", f"Run directory: `{result.get('run_dir')}` (report.html, report.md, result.json, junit.xml)", ""]
    return "\n".join(lines)
