"""report.html laid out in a real browser (headless Chromium, tests/browser.py): no table is wider than the
column it sits in, at a desktop and at a laptop-narrow width. The accounting table, fifteen counts in one row,
used to run past the page's right edge. Built from a recorded run (tests/fixtures/runs), so no Spark is started."""
import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"

# every table wider than its container, by how much (scrollWidth: the width its content needs)
OVERFLOWING = """[...document.querySelectorAll('table')].map((t, i) => ({
    i, cls: t.className, need: t.scrollWidth, room: t.parentElement.clientWidth,
    right: t.getBoundingClientRect().right, edge: document.documentElement.clientWidth}))
  .filter(t => t.need > t.room || t.right > t.edge)"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("layout") / "eh-ageout"
    shutil.copytree(FIXTURES / "eh-ageout", run_dir)
    main(["check", str(run_dir)])
    assert json.loads((run_dir / "result.json").read_text())["counts"]["unread"] > 0  # a row of every kind
    return run_dir / "report.html"


@pytest.mark.parametrize("width", [1280, 820])
def test_no_table_is_wider_than_its_column(browser, report, width):
    with browser.open(report) as page:
        page.set_viewport(width, 900)
        assert page.evaluate("document.querySelectorAll('table.accounting tr').length") == 16  # head + 15 figures
        assert page.evaluate(OVERFLOWING) == []


def test_the_measure_sees_an_overflowing_table(browser, report, tmp_path):
    """The same measure on the page with the accounting as it was (one row of fifteen counts) finds it."""
    counts = json.loads((report.parent / "result.json").read_text())["counts"]
    wide = ("<table class=wide><tr>" + "".join(f"<th>{k}</th>" for k in counts) + "</tr><tr>"
            + "".join(f"<td class=num>{v:,}</td>" for v in counts.values()) + "</tr></table>")
    page_html = report.read_text().replace("<h2>Accounting</h2>", "<h2>Accounting</h2>" + wide, 1)
    (tmp_path / "wide.html").write_text(page_html)
    with browser.open(tmp_path / "wide.html") as page:
        page.set_viewport(820, 900)
        assert [t["cls"] for t in page.evaluate(OVERFLOWING)] == ["wide"]
