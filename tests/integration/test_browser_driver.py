"""The headless-browser driver the HTML report tests stand on: it must see what goes wrong in a page.

One Chromium for the module; each page gets its own tab.
"""
import struct

import pytest

from browser import Browser, BrowserError, JavaScriptError, check_figures
from harness.supervisor import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    with b:
        yield b
    # Closed: nothing of it may be left running (the crashpad handlers leave a moment after the browser).
    wait_until(lambda: not b.leftover_pids(), timeout=10, what=f"chromium processes {b.leftover_pids()} to exit")


def page_file(tmp_path, name, body, head=""):
    path = tmp_path / name
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{name}</title>{head}</head>"
                    f"<body>{body}</body></html>")
    return path


def test_console_error_is_reported(browser, tmp_path):
    with browser.open(page_file(tmp_path, "console.html", "<script>console.error('boom', 42)</script>")) as page:
        assert [(e["source"], e["text"]) for e in page.console_errors] == [("console.error", "boom 42")]
        assert page.console_errors[0]["line"] == 1
        assert page.failed_requests == [] and page.network_violations == []
        assert len(page.problems()) == 1


def test_uncaught_exception_is_reported(browser, tmp_path):
    body = "<p>before</p><script>throw new TypeError('kaboom')</script><p>after</p>"
    with browser.open(page_file(tmp_path, "throws.html", body)) as page:
        assert [e["source"] for e in page.console_errors] == ["exception"]
        assert "TypeError: kaboom" in page.console_errors[0]["text"]
        assert page.evaluate("document.querySelectorAll('p').length") == 2  # the page itself went on


def test_late_errors_are_reported(browser, tmp_path):
    body = ("<script>window.addEventListener('load', () => setTimeout(() => { throw new Error('after load') }, 20));"
            "Promise.reject(new RangeError('unhandled'))</script>")
    with browser.open(page_file(tmp_path, "late.html", body)) as page:
        texts = " | ".join(e["text"] for e in page.console_errors)
        assert len(page.console_errors) == 2, texts
        assert "RangeError: unhandled" in texts and "Error: after load" in texts


def test_network_request_is_reported(browser, tmp_path):
    with browser.open(page_file(tmp_path, "net.html", '<img src="http://127.0.0.1:9/x.png">')) as page:
        assert [v["url"] for v in page.network_violations] == ["http://127.0.0.1:9/x.png"]
        assert [r["url"] for r in page.failed_requests] == ["http://127.0.0.1:9/x.png"]
        assert page.failed_requests[0]["blocked"]  # stopped inside the browser, never sent
        assert any("127.0.0.1:9" in p for p in page.problems())


def test_clean_page_reports_nothing(browser, tmp_path):
    (tmp_path / "dot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'
                                      '<rect width="4" height="4"/></svg>')
    body = ('<h1>clean</h1><img src="dot.svg"><img src="data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/'
            'svg%22 width=%222%22 height=%222%22/%3E"><script>console.log("fine"); console.warn("also fine")</script>')
    with browser.open(page_file(tmp_path, "clean.html", body)) as page:
        assert page.problems() == []
        assert [c["type"] for c in page.console] == ["log", "warning"]
        assert page.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)") is True


def test_missing_file_is_an_error(browser, tmp_path):
    with pytest.raises(BrowserError, match="ERR_FILE_NOT_FOUND"):
        browser.open(tmp_path / "nowhere.html")


def test_evaluate_returns_values(browser, tmp_path):
    with browser.open(page_file(tmp_path, "eval.html", "<p id='x'>hello</p>")) as page:
        assert page.evaluate("document.getElementById('x').textContent") == "hello"
        assert page.evaluate("({n: 1 + 2, xs: [1.5, null, 'a']})") == {"n": 3, "xs": [1.5, None, "a"]}
        assert page.evaluate("new Promise(r => setTimeout(() => r(7), 10))") == 7
        with pytest.raises(JavaScriptError, match="nope"):
            page.evaluate("(() => { throw new Error('nope') })()")
        assert page.problems() == []  # an evaluate() error is the caller's, not the page's


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_screenshot_is_a_png_of_the_whole_page(browser, tmp_path):
    body = ("<div style='height:2500px;background:linear-gradient(#c33,#33c)'>tall</div>"
            "<p id='end'>end</p>")
    with browser.open(page_file(tmp_path, "tall.html", body)) as page:
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height > 2500
        full = page.screenshot(tmp_path / "full.png")
        assert (tmp_path / "full.png").read_bytes() == full
        assert _png_size(full) == (1280, height)
        assert len(full) > 5_000
        viewport = page.screenshot(full_page=False)
        assert _png_size(viewport) == (1280, 900)
        assert page.evaluate("window.innerHeight") == 900  # the device metrics override is cleared again


FIGURES = """
<style>figure.chart { margin: 1em; } </style>
<figure class="chart" id="fig-latency" data-points="3">
  <svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="320" height="200"
       viewBox="0 0 320 200">
    <defs><path id="m0" d="M 0 -3 L 3 0 L 0 3 L -3 0 z"/></defs>
    <g id="figure_1"><g id="axes_1">
      <g id="patch_1"><path d="M 40 180 L 300 180 L 300 20 L 40 20 z" fill="none" stroke="#000"/></g>
      <g id="data-latency">
        <path d="M 40 150 L 170 90 L 300 40" fill="none" stroke="#1f77b4"/>
        <g><use xlink:href="#m0" x="40" y="150"/><use xlink:href="#m0" x="170" y="90"/>
           <use xlink:href="#m0" x="300" y="40"/></g>
      </g>
      <g id="text_1"><text x="160" y="195">seconds</text></g>
    </g></g>
  </svg>
  <figcaption>latency</figcaption>
</figure>
<figure class="chart" id="fig-lag" data-points="0">
  <svg xmlns="http://www.w3.org/2000/svg" width="320" height="200" viewBox="0 0 320 200">
    <g id="axes_1"><g id="patch_1"><path d="M 40 180 L 300 180" stroke="#000"/></g><g id="data-lag"></g></g>
  </svg>
  <figcaption>lag (nothing plotted)</figcaption>
</figure>
<figure class="chart" id="fig-hidden" data-points="2" style="display: none">
  <svg xmlns="http://www.w3.org/2000/svg" width="320" height="200">
    <g id="data-x"><path d="M 0 0 L 10 10"/></g>
  </svg>
</figure>
"""


def test_check_figures_flags_empty_and_hidden_charts(browser, tmp_path):
    with browser.open(page_file(tmp_path, "figures.html", FIGURES)) as page:
        assert page.problems() == []
        figures = {f["id"]: f for f in check_figures(page)}
    assert list(figures) == ["fig-latency", "fig-lag", "fig-hidden"]

    ok = figures["fig-latency"]
    assert ok["problems"] == []
    assert ok["data_points"] == 3 and ok["data_marks"] == 4  # the line and its three markers
    assert ok["visible"] and ok["svgs"] == 1
    assert ok["width"] > 300 and ok["height"] > 200 and (ok["svg_width"], ok["svg_height"]) == (320, 200)

    empty = figures["fig-lag"]
    assert empty["visible"] and empty["data_points"] == 0 and empty["data_marks"] == 0
    assert empty["problems"] == ["data-points=0 (empty chart)", 'no drawn elements under [id^="data"] (empty chart)']

    hidden = figures["fig-hidden"]
    assert hidden["data_marks"] == 1 and not hidden["visible"]
    assert hidden["problems"] == ["not visible (0x0 px)"]
