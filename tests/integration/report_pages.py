"""Opening a report page as a person would: in headless Chromium, every figure drawn, nothing fetched, no error;
a full-page screenshot kept under runs/test-screenshots/ (HARNESS_SCREENSHOTS moves it) to look at."""
import os
from pathlib import Path

from browser import check_figures

SCREENSHOTS = Path(os.environ.get("HARNESS_SCREENSHOTS", Path(__file__).resolve().parents[2] / "runs" /
                                  "test-screenshots"))
MAX_BYTES = 2_000_000


def open_page(browser, path: Path, name: str) -> tuple[dict[str, dict], object]:
    """{figure id: its measurements} and the page (still open: the caller closes it)."""
    assert path.stat().st_size < MAX_BYTES, f"{path}: {path.stat().st_size:,} bytes"
    page = browser.open(path)
    assert page.problems() == [], page.problems()
    figures = check_figures(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(SCREENSHOTS / f"{name}.png")
    assert [f for f in figures if f["problems"]] == [], figures
    return {f["id"]: f for f in figures}, page


def svg_text(page, figure_id: str) -> str:
    return page.evaluate(f"document.querySelector('#{figure_id} svg').textContent")
