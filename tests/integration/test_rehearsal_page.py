"""rehearsal.html in a real browser (headless Chromium, tests/browser.py), from a literal rehearsal summary (no run
is needed: the page is a function of rehearsal.json): self-contained, the finding first and marked, each row's
last cell a link to its run's report."""
from harness.reports.rehearsal import write_rehearsal_reports

ROWS = [
    {"name": "grouping key added", "run_dir": "/x/00-grouping_key_added", "verdict": "pass", "rule": "not_allowed",
     "restarted": False, "refused_with": "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", "exactly_once": "held",
     "state": "right at the change", "settings": "-", "first_batch_after_s": None, "finding": None,
     "failed_checks": []},
    {"name": "shuffle partitions 4 to 8", "run_dir": "/x/01-shuffle_partitions_4_to_8", "verdict": "pass",
     "rule": "not_allowed", "restarted": True, "refused_with": None, "exactly_once": "held", "state": "carried",
     "settings": "spark.sql.shuffle.partitions = 8 not taken (4 in force)", "first_batch_after_s": 9.5,
     "finding": "documented as not allowed, yet Spark restarted and kept the checkpoint's "
                "spark.sql.shuffle.partitions silently", "failed_checks": []},
]

CELLS = """[...document.querySelectorAll('tbody tr')].map(tr => ({cls: tr.className,
  bg: getComputedStyle(tr).backgroundColor, cells: [...tr.cells].map(c => c.innerText),
  link: tr.querySelector('a') && tr.querySelector('a').getAttribute('href')}))"""


def test_the_rehearsal_page_shows_the_finding_first(browser, tmp_path):
    write_rehearsal_reports(tmp_path, {"rehearsal": "r", "base": "bases/windowed.toml", "verdict": "pass",
                                       "description": "two changes", "rows": ROWS})
    with browser.open(tmp_path / "rehearsal.html") as page:
        assert page.problems() == []
        rows = page.evaluate(CELLS)
    assert [r["cells"][0] for r in rows] == ["shuffle partitions 4 to 8", "grouping key added"]
    assert rows[0]["cls"] == "finding" and rows[0]["bg"] == "rgb(255, 243, 205)"
    assert rows[1]["cells"][2] == "refused: STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" and rows[1]["cells"][-1] == \
        "as documented"
    assert [r["link"] for r in rows] == ["01-shuffle_partitions_4_to_8/report.html",
                                         "00-grouping_key_added/report.html"]
