"""A change rehearsal's table (harness.commands.rehearse): one row per change, from each run's result.json only.

A row: the change; restarted, or the error class Spark refused it with; exactly-once held across the change (the
run's delivery checks: no loss, no duplicates beyond what the sink declares, or the query's own oracle); the state
carried (the state at the change and the final state, key by key against the history's, for a stateful query);
the settings in force after the restart (requested against what Spark ran with, and where that was read); the
run's verdict, i.e. whether what the change declares held; and Spark's documented rule for the change beside
what happened. A row whose outcome differs from the rule is a **finding** and is listed first:
- `allowed`: the change must restart, be in force, keep exactly-once and carry the state;
- `not_allowed`: Spark documents the change as not allowed; a restart that went on anyway (taking the change, or
  silently keeping the checkpoint's value) is a finding, a refusal is not;
- `not_well_defined`: any outcome is as documented, unless data was lost or repeated or the state was not
  carried;
- no rule given (a team's own change): it must restart and keep exactly-once and the state.
"""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from harness.check import status_of
from harness.files import atomic

EXACTLY_ONCE = ("no_loss", "no_duplicates", "offsets_match", "no_unacked_deliveries")
RULE_WORDS = {"allowed": "allowed", "not_allowed": "not allowed", "not_well_defined": "not well-defined",
              None: "no rule given"}


def _status(result: dict, names: tuple[str, ...] | None = None, prefix: str | None = None) -> str | None:
    """'pass', 'fail' or 'unknown' over the checks named (or starting with `prefix`); None: none was judged."""
    checks = [c for c in result.get("checks") or []
              if (names and c["name"] in names) or (prefix and c["name"].startswith(prefix))]
    statuses = [status_of(c) for c in checks if status_of(c) != "not required"]
    if not statuses:
        return None
    return "fail" if "fail" in statuses else "unknown" if any(s != "pass" for s in statuses) else "pass"


def exactly_once(result: dict) -> str:
    status = _status(result, EXACTLY_ONCE, prefix="oracle_")
    counts = result.get("counts") or {}
    if status == "fail":
        return f"broken: {counts.get('lost', 0):,} lost, {counts.get('duplicates', 0):,} duplicated"
    if status is None:
        return "not judged"
    held = "held" if status == "pass" else "unknown"
    failed = (result.get("query") or {}).get("final_state") == "failed"
    return f"{held} (up to the failure)" if failed else held


def state_carried(result: dict) -> str:
    """The state at the change (`change_state`: what phase A committed last) and at the end (`state_matches`),
    each key by key against the history's."""
    at, end = _status(result, ("change_state",)), _status(result, ("state_matches",))
    if at is None and end is None:
        return "-"
    if "fail" in (at, end):
        return "wrong at the change" if at == "fail" else "not carried"
    if end == "pass" and at in ("pass", None):  # the final state right: what spans the change was carried
        return "carried"
    if at == "pass" and end is None:
        return "right at the change"
    return "unknown"


def settings_text(change: dict) -> str:
    words = []
    for s in change.get("settings") or []:
        if s["taken"] is None:
            words.append(f"{s['setting']}: not measured")
        elif s["taken"]:
            words.append(f"{s['setting']} = {s['in_force']} in force")
        else:
            words.append(f"{s['setting']} = {s['requested']} not taken ({s['in_force']} in force)")
    spark = change.get("spark") or [None, None]
    if spark[0] and spark[1] and spark[0] != spark[1]:
        words.append(f"Spark {spark[0]} -> {spark[1]}")
    return "; ".join(words) or "-"


def finding(rule: str | None, restarted: bool, eo: str, state: str, change: dict) -> str | None:
    """How what happened differs from Spark's documented rule (None: as documented)."""
    broken = [w for w, bad in (("exactly-once broken", eo.startswith("broken")),
                               (f"state {state}", state in ("not carried", "wrong at the change"))) if bad]
    not_taken = [s["setting"] for s in change.get("settings") or [] if s["taken"] is False]
    if rule == "not_allowed":
        if restarted:
            went = f"kept the checkpoint's {', '.join(not_taken)} silently" if not_taken else "took the change"
            return f"documented as not allowed, yet Spark restarted and {went}" + "".join(f"; {b}" for b in broken)
        return None
    if rule == "not_well_defined":
        return "; ".join(broken) or None
    problems = ([] if restarted else ["Spark refused it"]) + ([f"{', '.join(not_taken)} not taken"]
                                                               if not_taken else []) + broken
    lead = "documented as allowed, yet " if rule == "allowed" else ""
    return lead + "; ".join(problems) if problems else None


def refusal_class(error: str | None) -> str | None:
    """The most specific Spark error class of a failure: the last bracketed condition before its message
    (`[STREAM_FAILED] [STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] Provided key schema ...` -> the second)."""
    lead = re.match(r"^(\s*\[[A-Z_][A-Z0-9_.]*\])+", error or "")
    return re.findall(r"\[([A-Z_][A-Z0-9_.]*)\]", lead.group(0))[-1] if lead else None


def row_of(name: str, run_dir: Path, result: dict, fault: dict) -> dict[str, Any]:
    """The row of one change's run."""
    change = next(iter(result.get("changes") or []), {})
    restarted = bool(change.get("restarted"))
    query = result.get("query") or {}
    eo, state = exactly_once(result), state_carried(result)
    return {
        "name": name, "run_dir": str(run_dir), "verdict": result.get("verdict"), "rule": fault.get("rule"),
        "stop": fault.get("stop", "graceful"), "restarted": restarted,
        "refused_with": None if restarted else refusal_class(query.get("error")) or query.get("error_class"),
        "declared_refusal": fault.get("refused_with"), "exactly_once": eo, "state": state,
        "settings": settings_text(change), "first_batch_after_s": change.get("first_batch_after_s"),
        "finding": finding(fault.get("rule"), restarted, eo, state, change) if change else "the change was not "
                                                                                             "applied",
        "failed_checks": [c["name"] for c in result.get("checks") or [] if status_of(c) == "fail"],
        "unjudged_reason": result.get("unjudged_reason"),
    }


def ordered(rows: list[dict]) -> list[dict]:
    """Findings first, then the rest, each in the rehearsal's order."""
    return [r for r in rows if r["finding"]] + [r for r in rows if not r["finding"]]


HEADERS = ["change", "rule", "restarted", "exactly-once", "state", "settings in force", "verdict", "finding"]


def cells(row: dict) -> list[str]:
    restarted = ("yes" + (f" ({row['first_batch_after_s']:,.1f} s)" if row.get("first_batch_after_s") is not None
                          else "")) if row["restarted"] else f"refused: {row['refused_with'] or 'no error class'}"
    verdict = row["verdict"] + (f" ({', '.join(row['failed_checks'])})" if row["failed_checks"] else "")
    return [row["name"], RULE_WORDS.get(row["rule"], str(row["rule"])), restarted, row["exactly_once"], row["state"],
            row["settings"], verdict, row["finding"] or "as documented"]


def rehearsal_md(summary: dict) -> str:
    rows = ordered(summary["rows"])
    findings = sum(1 for r in rows if r["finding"])
    lines = [f"# Rehearsal {summary['rehearsal']}: {summary.get('verdict', 'unjudged').upper()}", "",
             summary.get("description") or "", "",
             f"Base scenario `{summary['base']}`, {len(rows)} changes, {findings} where Spark did not do what it "
             "documents (findings, first). The verdict of a row is whether what its change declares held.", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row)) + " |")
    lines += ["", "Runs: " + ", ".join(f"`{Path(r['run_dir']).name}`" for r in summary["rows"]), ""]
    return "\n".join(lines)


def rehearsal_html(summary: dict) -> str:
    rows = ordered(summary["rows"])
    body = "".join("<tr class=\"{}\">{}</tr>".format(
        "finding" if r["finding"] else r["verdict"],
        "".join(f"<td>{html.escape(c)}</td>" for c in cells(r)[:-1])
        + f"<td><a href=\"{html.escape(Path(r['run_dir']).name)}/report.html\">"
          f"{html.escape(cells(r)[-1])}</a></td>") for r in rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Rehearsal {html.escape(summary['rehearsal'])}"
            "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}tr.finding{background:#fff3cd}"
            "tr.fail{background:#f8d7da}</style></head><body>"
            f"<h1>Rehearsal {html.escape(summary['rehearsal'])}: "
            f"{html.escape(summary.get('verdict', 'unjudged').upper())}</h1>"
            f"<p>{html.escape(summary.get('description') or '')}</p>"
            f"<p>Base scenario <code>{html.escape(summary['base'])}</code>; findings (Spark not doing what it "
            "documents) first; a row's verdict says whether what its change declares held.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>\n")


def write_rehearsal_reports(out: Path, summary: dict) -> None:
    atomic.write_text(out / "rehearsal.md", rehearsal_md(summary))
    atomic.write_text(out / "rehearsal.html", rehearsal_html(summary))
