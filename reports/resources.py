"""Resources per role and leak verdicts, in report.md (figures: harness.analysis.resources)."""
from __future__ import annotations

import html

from harness.analysis.resources import MB
from harness.text.wording import footprint_line, machine_line


# -- report.md -----------------------------------------------------------------------------------------------------
def _mb(n: float | None) -> str:
    return "-" if n is None else f"{n / MB:,.0f} MB"


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_markdown(machine: dict | None) -> list[str]:
    """The machine's paragraph: what processes outside the run took of its CPU (result.json `machine`)."""
    if not machine:
        return []
    return ["", ("**The machine was busy.** " if machine.get("busy") else "") + machine_line(machine) + "."]


def machine_html(machine: dict | None) -> str:
    """The machine's paragraph for report.html (escaped; "the machine was busy" marked when over the bound)."""
    if not machine:
        return ""
    lead = '<span class="bad">The machine was busy.</span> ' if machine.get("busy") else ""
    return f"<p>{lead}{html.escape(machine_line(machine))}.</p>"


def footprint_markdown(foot: dict) -> list[str]:
    """The footprint's paragraph: the harness's CPU against the system under test's, per role, in words."""
    if not foot:
        return []
    text = footprint_line(foot)
    if foot.get("ok") is False:
        text = f"**Measurement distorted.** {text}"
    by_role = foot.get("by_role") or {}
    if by_role:
        sides = {r: "harness" for r in foot.get("harness_roles") or []} | \
                {r: "system under test" for r in foot.get("sut_roles") or []}
        text += ". Per role over the traffic (CPU s): " + ", ".join(
            f"{r} {v:,.1f} ({sides.get(r, 'not counted')})" for r, v in by_role.items())
    return ["", text + "."]


def footprint_html(foot: dict) -> str:
    """The footprint's paragraph for report.html (escaped; "measurement distorted" marked when over the goal)."""
    if not foot:
        return ""
    lead = '<span class="bad">Measurement distorted.</span> ' if foot.get("ok") is False else ""
    by_role = foot.get("by_role") or {}
    roles = ("; per role over the traffic, CPU s: " + ", ".join(f"{r} {v:,.1f}" for r, v in by_role.items())
             if by_role else "")
    return f"<p>{lead}{html.escape(footprint_line(foot) + roles)}.</p>"


def resources_markdown(summary: dict, foot: dict | None = None, machine: dict | None = None) -> list[str]:
    """The Resources section of report.md (nothing when the run was not sampled), opening with the footprint and
    the machine's other load."""
    if not summary or not summary.get("roles"):
        if not foot and not machine:
            return []
        return ["", "## Resources"] + (["", footprint_line(foot)] if foot else []) + machine_markdown(machine)
    cost = summary.get("cost_ms") or {}
    span = (summary.get("last_t") or 0) - (summary.get("first_t") or 0)
    parts = ["", "## Resources",
             f"Every process of the run sampled {summary['samples']} times over {span:,.0f} s "
             f"(every {summary.get('interval_s') or 0:g} s"
             + (f"; a sample cost {cost['mean']:.1f} ms on average, {cost['max']:.1f} ms at most" if cost else "")
             + (f", of which walking the run directory {walk['mean']:.1f} ms on average over {walk['count']} walks"
                if (walk := summary.get("disk_walk_ms")) else "")
             + "). RSS is the role's processes summed at a sample; cores are CPU time over wall time"
             + (f"; {summary['transient']} sighting(s) of single-threaded processes under a second old (spawns "
                f"in passing) left out" if summary.get("transient") else "") + ".", "",
             _table(["role", "processes", "peak RSS", "mean RSS", "largest process", "CPU s", "cores mean",
                     "cores peak", "max open files", "max threads"],
                    [[role, r["processes"], _mb(r["rss_peak_bytes"]), _mb(r["rss_mean_bytes"]),
                      _mb(r["rss_peak_process_bytes"]), f"{r['cpu_s']:,.1f}",
                      "-" if r["cores_mean"] is None else f"{r['cores_mean']:.2f}",
                      "-" if r["cores_peak"] is None else f"{r['cores_peak']:.2f}", r["fds_max"], r["threads_max"]]
                     for role, r in summary["roles"].items()])]
    parts[3:3] = footprint_markdown(foot or {}) + machine_markdown(machine)
    disk = summary.get("disk") or {}
    if disk:
        parts += ["", f"Disk (allocated, the run directory): peak {_mb(disk['peak_bytes'])}, at the end "
                      f"{_mb(disk['final_bytes'])}.", "",
                  _table(["directory", "peak", "at the end"],
                         [[d, _mb(v), _mb((disk.get("by_dir_final") or {}).get(d, 0))]
                          for d, v in sorted(disk["by_dir_peak"].items(), key=lambda kv: -kv[1])])]
    lk = summary.get("leaks") or {}
    if lk:
        parts += ["", f"### Leaks: {'ok' if lk['ok'] else '**LEAK**'}", "",
                  f"RSS growth per hour (least-squares slope) after a {lk['after_s']:g} s warm-up, against "
                  f"{lk['max_growth_mb_per_h']:g} MB/h; a process watched less than {lk['min_span_s']:g} s after "
                  f"its warm-up is not judged. {lk['detail']}.", "",
                  _table(["role", "pid", "samples", "span s", "RSS first", "RSS last", "growth MB/h", "verdict"],
                         [[r["role"], r["pid"], r["samples"], f"{r['span_s']:,.0f}",
                           "-" if r["rss_first_mb"] is None else f"{r['rss_first_mb']:,.0f} MB",
                           "-" if r["rss_last_mb"] is None else f"{r['rss_last_mb']:,.0f} MB",
                           "-" if r["growth_mb_per_h"] is None else f"{r['growth_mb_per_h']:+,.1f}",
                           "**LEAK**" if r["verdict"] == "leak" else r["verdict"]] for r in lk["processes"]])]
    return parts
