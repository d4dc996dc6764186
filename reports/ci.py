"""What a CI job shows of a run: junit.xml (one test case per check, so the job's test view names what failed)
and summary.md, short Markdown fit for a job summary ($GITHUB_STEP_SUMMARY). Pure functions of result.json."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from harness.check import counts_against, status_of


def junit_xml(result: dict[str, Any]) -> str:
    """A run is a test suite; each check a test case (failed, or unknown: <failure>, an unknown one's message
    saying it was not judged); an unjudged run adds one <error>."""
    name = f"harness.{result.get('scenario', 'run')}"
    checks = result.get("checks") or []
    unjudged = result.get("verdict") == "unjudged"
    failures = sum(1 for c in checks if counts_against(c))
    skipped = sum(1 for c in checks if status_of(c) == "not required")
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name=name, tests=str(len(checks) + unjudged),
                          failures=str(failures), errors=str(int(unjudged)), skipped=str(skipped),
                          time=f"{float(result.get('duration_s') or 0.0):.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("verdict", "run_dir", "backend"):
        ET.SubElement(props, "property", name=key, value=str(result.get(key, "")))
    for check in checks:
        case = ET.SubElement(suite, "testcase", classname=name, name=check["name"], time="0")
        if status_of(check) == "not required":
            ET.SubElement(case, "skipped", message=_one_line(check["detail"]))
        elif counts_against(check):
            unknown = status_of(check) == "unknown"
            ET.SubElement(case, "failure", message=_one_line(("unknown: " if unknown else "") + check["detail"]),
                          type="unknown" if unknown else "check").text = check["detail"]
        else:
            ET.SubElement(case, "system-out").text = check["detail"]
    if unjudged:
        case = ET.SubElement(suite, "testcase", classname=name, name="judged", time="0")
        reason = result.get("unjudged_reason") or "the run could not be judged"
        ET.SubElement(case, "error", message=_one_line(reason), type="unjudged").text = reason
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summary_markdown(result: dict[str, Any], baseline: dict | None = None) -> str:
    verdict = result.get("verdict", "unjudged")
    mark = {"pass": "✅", "fail": "❌"}.get(verdict, "⚠️")
    c, lat, thr = result.get("counts", {}), result.get("latency_ms", {}), result.get("throughput", {})
    checks = result.get("checks") or []
    failed = [ch for ch in checks if counts_against(ch)]
    lines = [f"## {mark} `{result.get('scenario')}` on {result.get('backend')}: {verdict.upper()}", ""]
    if verdict == "unjudged":
        lines += [f"**Could not be judged:** {result.get('unjudged_reason')}", ""]
    lines += ["| produced | delivered | lost | expected loss | duplicates | p50 ms | p99 ms | produced/s | "
              "Spark rows/s | faults | duration |", "|---|---|---|---|---|---|---|---|---|---|---|",
              f"| {c.get('produced', 0):,} | {c.get('delivered_unique', 0):,} | {c.get('lost', 0):,} | "
              f"{c.get('expected_lost', 0):,} | {c.get('duplicates', 0):,} | {lat.get('p50', 0):,.0f} | "
              f"{lat.get('p99', 0):,.0f} | {thr.get('produce_eps', 0):,.0f} | {thr.get('process_rps', 0):,.0f} | "
              f"{len(result.get('faults') or [])} | {float(result.get('duration_s') or 0) / 60:,.1f} min |", ""]
    if failed:
        lines += [f"**{len(failed)} of {len(checks)} checks failed:**", ""]
        lines += [f"- `{ch['name']}`: {_one_line(ch['detail'], 500)}" for ch in failed]
    else:
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
