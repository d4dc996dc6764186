"""A small supervised headless Chromium for the HTML report tests, driven over the Chrome DevTools Protocol.

    with Browser() as browser:
        page = browser.open(tmp_path / "report.html")   # navigates, waits for the load event
        assert page.problems() == []                     # console errors, exceptions, failed or network requests
        figures = check_figures(page)                    # the report's charts, measured in the rendered page
        page.screenshot(tmp_path / "report.png")

The browser is one process group started through harness.supervisor (own session, SIGKILL from the kernel
when the test process dies, the whole group killed on close or at interpreter exit), binds 127.0.0.1 only,
and uses a throw-away profile. A report must be self-contained: any request that is not file:, data:, blob: or
about: is recorded as a violation and, by default, blocked before it leaves the browser.

`make browser` (a dependency of `make test`) installs Chromium with apt-get when it is missing; CHROMIUM
names another binary.

Single-threaded by design (one websocket, events handled while a command waits for its reply): use a Browser
from one thread, and start it from a thread that outlives it (PR_SET_PDEATHSIG fires when the *thread* that
started the browser ends).
"""
from __future__ import annotations

import base64
import itertools
import json
import math
import os
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import websocket

from harness.supervisor import Child, Supervisor, processes_with_env

VIEWPORT = (1280, 900)
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
MARKER_ENV = "HARNESS_BROWSER_ID"


class BrowserError(RuntimeError):
    pass


class BrowserTimeout(BrowserError):
    pass


class JavaScriptError(BrowserError):
    pass


def find_chromium() -> str:
    """The Chromium binary: $CHROMIUM, else `chromium` on PATH (behind Debian's wrapper script, the real binary)."""
    name = os.environ.get("CHROMIUM") or "chromium"
    found = shutil.which(name)
    if found is None:
        raise BrowserError(f"no {name!r} on PATH: run `make browser` (apt-get install chromium) or set CHROMIUM")
    # Debian's /usr/bin/chromium is a shell script that adds its own flags (extension loading, GPU
    # rasterization, a /dev/shm check that breaks on some mounts) and then execs /usr/lib/chromium/chromium.
    real = Path("/usr/lib/chromium/chromium")
    if Path(found).resolve() == Path("/usr/bin/chromium") and real.is_file() and os.access(real, os.X_OK):
        return str(real)
    return found


def chromium_argv(binary: str, user_data_dir: Path, window_size: tuple[int, int] = VIEWPORT) -> list[str]:
    return [
        binary,
        "--headless=new",
        "--no-sandbox",  # the sandbox refuses to start as root (CI, containers)
        "--disable-gpu",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",  # the chosen port is written to <user-data-dir>/DevToolsActivePort
        f"--user-data-dir={user_data_dir}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--no-proxy-server",
        "--mute-audio",
        "--hide-scrollbars",
        f"--window-size={window_size[0]},{window_size[1]}",
        "about:blank",
    ]


class Browser:
    """One headless Chromium; `open()` gives a fresh tab per page. Use as a context manager."""

    def __init__(self, *, startup_timeout: float = 30.0, command_timeout: float = 30.0,
                 viewport: tuple[int, int] = VIEWPORT, supervisor: Supervisor | None = None):
        self.startup_timeout = startup_timeout
        self.command_timeout = command_timeout
        self.viewport = viewport
        self.run_id = f"browser-{uuid.uuid4().hex}"
        self.supervisor = supervisor or Supervisor(self.run_id)
        self.child: Child | None = None
        self.ws_url: str | None = None
        self._ws: websocket.WebSocket | None = None
        self._ids = itertools.count(1)
        self._pages: dict[str, Page] = {}
        self._dir: Path | None = None
        self._sid: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> "Browser":
        binary = find_chromium()
        self._dir = Path(tempfile.mkdtemp(prefix="harness-chromium-"))
        profile = self._dir / "profile"
        profile.mkdir()
        env = dict(os.environ)
        env[MARKER_ENV] = self.run_id  # the supervisor sets HARNESS_RUN_ID to its own id; strays are found by ours
        # Crashpad keeps its database under the default config dir, not --user-data-dir: keep it in the tmp dir.
        env["XDG_CONFIG_HOME"] = str(self._dir / "config")
        env["XDG_CACHE_HOME"] = str(self._dir / "cache")
        self.child = self.supervisor.spawn("chromium", chromium_argv(binary, profile, self.viewport),
                                           log_path=self._dir / "chromium.log", env=env)
        self._sid = self.child.pid  # start_new_session: the browser leads its own session and process group
        try:
            self.ws_url = self._wait_for_devtools(profile)
            self._ws = websocket.create_connection(self.ws_url, timeout=self.command_timeout,
                                                   suppress_origin=True, enable_multithread=False)
        except BaseException:
            self.close()
            raise
        return self

    def _wait_for_devtools(self, profile: Path) -> str:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if port_file.exists():
                lines = port_file.read_text().splitlines()
                if len(lines) >= 2 and lines[0].strip().isdigit():
                    return f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
            if not self.child.alive():
                raise BrowserError(f"chromium exited with {self.child.proc.returncode} before DevTools "
                                   f"listened:\n{self.log_tail()}")
            time.sleep(0.05)
        raise BrowserError(f"chromium did not write {port_file} within {self.startup_timeout:.0f}s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The end of chromium's stderr (its dbus complaints in containers are noise)."""
        if self._dir is None or not (self._dir / "chromium.log").exists():
            return ""
        return "\n".join((self._dir / "chromium.log").read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        """Browser.close over CDP (chromium reaps its own helpers), then SIGKILL to the whole process group."""
        if self._ws is not None:
            try:
                self._ws.settimeout(2)
                self._ws.send(json.dumps({"id": next(self._ids), "method": "Browser.close"}))
            except Exception:
                pass
            if self.child is not None:
                try:
                    self.child.proc.wait(3)
                except Exception:
                    pass
            try:
                self._ws.close()
            except Exception:
                pass
            self._ws = None
        if self.child is not None:
            self.child.stop_signal = signal.SIGKILL
            self.supervisor.stop(self.child, timeout=2)
            self.child = None
        self._pages.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def leftover_pids(self) -> list[int]:
        """Live processes this browser started (for tests: empty after close): its session (the browser, zygotes,
        renderers, which overwrite their /proc environ with their titles) and whatever carries our marker (the
        crashpad handlers, which leave the session)."""
        found = set(processes_with_env(MARKER_ENV, self.run_id))
        if self._sid is not None:
            found.update(_live_in_session(self._sid))
        return sorted(found)

    def __enter__(self) -> "Browser":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- protocol ----------------------------------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, *, session: str | None = None,
             timeout: float | None = None) -> dict:
        """One CDP command; events that arrive meanwhile go to their pages. Raises BrowserError on a CDP error."""
        if self._ws is None:
            raise BrowserError("browser is not running")
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        reply = self._pump(lambda m: m.get("id") == msg_id, timeout or self.command_timeout, what=method)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')} {reply['error'].get('data', '')}".strip())
        return reply.get("result", {})

    def post(self, method: str, params: dict | None = None, *, session: str | None = None) -> None:
        """A CDP command whose reply nobody waits for (safe inside event handlers)."""
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))

    def _pump(self, until, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserTimeout(f"timed out after {timeout:.1f}s waiting for {what}")
            self._ws.settimeout(left)
            try:
                raw = self._ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except (websocket.WebSocketConnectionClosedException, OSError) as e:
                raise BrowserError(f"DevTools connection lost while waiting for {what}: {e}\n{self.log_tail()}")
            message = json.loads(raw)
            if "method" in message:
                page = self._pages.get(message.get("sessionId", ""))
                if page is not None:
                    page._on_event(message["method"], message.get("params", {}))
            if until(message):
                return message

    def drain(self, seconds: float) -> None:
        """Handle the events that arrive within `seconds` (late console errors, failed requests)."""
        try:
            self._pump(lambda m: False, seconds, what="events")
        except BrowserTimeout:
            pass

    # -- pages -------------------------------------------------------------------------------------------------
    def open(self, target: str | os.PathLike, *, timeout: float = 30.0, settle: float = 0.2,
             block_network: bool = True) -> "Page":
        """A new tab that loads `target` (a path or URL) and waits for its load event plus `settle` seconds."""
        text = str(target)
        url = text if "://" in text or text.startswith(("data:", "about:")) else Path(target).resolve().as_uri()
        target_id = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
        page = Page(self, target_id, session, url)
        self._pages[session] = page
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                page.send(f"{domain}.enable")
            if block_network:  # every request pauses; _on_event lets the local ones go and fails the others
                page.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]})
            page.set_viewport()
            page.navigate(url, timeout=timeout, settle=settle)
        except BaseException:
            page.close()
            raise
        return page


class Page:
    """A tab: what went wrong while it loaded, plus evaluate() and screenshot()."""

    def __init__(self, browser: Browser, target_id: str, session: str, url: str):
        self.browser = browser
        self.target_id = target_id
        self.session = session
        self.url = url
        self.console: list[dict] = []            # every console call: {"type", "text", "url", "line"}
        self.console_errors: list[dict] = []     # console.error/assert, uncaught exceptions, Log entries "error"
        self.failed_requests: list[dict] = []    # Network.loadingFailed: {"url", "error", "blocked"}
        self.network_violations: list[dict] = [] # requests that are not file:/data:/blob:/about:
        self._requests: dict[str, str] = {}
        self._loaded = False

    def send(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def navigate(self, url: str, *, timeout: float = 30.0, settle: float = 0.2) -> None:
        self.url = url
        self._loaded = False
        result = self.send("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            raise BrowserError(f"cannot load {url}: {result['errorText']}")
        if not self._loaded:
            self.browser._pump(lambda m: self._loaded, timeout, what=f"the load event of {url}")
        if settle > 0:
            self.browser.drain(settle)

    def _on_event(self, method: str, p: dict) -> None:
        if method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Runtime.consoleAPICalled":
            frame = (p.get("stackTrace") or {}).get("callFrames") or [{}]
            entry = {"type": p.get("type"), "text": " ".join(_remote_text(a) for a in p.get("args", [])),
                     "url": frame[0].get("url"), "line": _line(frame[0].get("lineNumber"))}
            self.console.append(entry)
            if p.get("type") in ("error", "assert"):
                self.console_errors.append({"source": f"console.{p['type']}", **entry})
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = (d.get("exception") or {}).get("description") or d.get("text")
            self.console_errors.append({"source": "exception", "text": text, "url": d.get("url"),
                                        "line": _line(d.get("lineNumber"))})
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            if e.get("level") == "error":
                self.console_errors.append({"source": f"log.{e.get('source')}", "text": e.get("text"),
                                            "url": e.get("url"), "line": _line(e.get("lineNumber"))})
        elif method == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            self._requests[p.get("requestId")] = url
            if not url.startswith(LOCAL_SCHEMES):
                self.network_violations.append({"url": url, "type": p.get("type"),
                                                "initiator": (p.get("initiator") or {}).get("url")})
        elif method == "Fetch.requestPaused":
            if p.get("request", {}).get("url", "").startswith(LOCAL_SCHEMES):
                self.browser.post("Fetch.continueRequest", {"requestId": p["requestId"]}, session=self.session)
            else:
                self.browser.post("Fetch.failRequest", {"requestId": p["requestId"], "errorReason": "BlockedByClient"},
                                  session=self.session)
        elif method == "Network.loadingFailed":
            if not p.get("canceled"):
                self.failed_requests.append({"url": self._requests.get(p.get("requestId"), "?"),
                                             "error": p.get("errorText"), "blocked": p.get("blockedReason")})

    def problems(self) -> list[str]:
        """Everything that makes a report page not clean, one line each (empty when clean)."""
        out = [f"{e['source']}: {e['text']} ({e.get('url') or '?'}:{e.get('line')})" for e in self.console_errors]
        out += [f"request failed: {r['url']} {r['error']}" + (f" [blocked: {r['blocked']}]" if r["blocked"] else "")
                for r in self.failed_requests]
        out += [f"network request from a self-contained page: {v['url']} ({v['type']})"
                for v in self.network_violations]
        return out

    def evaluate(self, expression: str, *, timeout: float | None = None) -> Any:
        """The value of a JS expression (promises awaited), by value; JavaScriptError when it throws."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            d = result["exceptionDetails"]
            raise JavaScriptError((d.get("exception") or {}).get("description") or d.get("text"))
        return result.get("result", {}).get("value")

    def set_viewport(self, width: int | None = None, height: int | None = None) -> None:
        """Fix the layout viewport (headless windows lose some height to emulated window decorations)."""
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width or self.browser.viewport[0], "height": height or self.browser.viewport[1],
            "deviceScaleFactor": 1, "mobile": False})

    def screenshot(self, path: str | os.PathLike | None = None, *, full_page: bool = True,
                   max_height: int = 16384) -> bytes:
        """A PNG of the viewport or of the whole page (viewport stretched to the content height, at most
        `max_height` CSS pixels); written to `path` when given, returned either way."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")
            content = metrics.get("cssContentSize") or metrics["contentSize"]
            self.set_viewport(height=min(max_height, max(1, math.ceil(content["height"]))))
            params["captureBeyondViewport"] = True
        try:
            data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        finally:
            if full_page:
                self.set_viewport()
        if path is not None:
            Path(path).write_bytes(data)
        return data

    def close(self) -> None:
        self.browser._pages.pop(self.session, None)
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target_id})
        except BrowserError:
            pass

    def __enter__(self) -> "Page":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _live_in_session(sid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
                found.append(int(entry.name))
    return found


def _line(zero_based: int | None) -> int | None:  # CDP counts lines from 0, editors from 1
    return None if zero_based is None else zero_based + 1


def _remote_text(obj: dict) -> str:
    if "value" in obj:
        return obj["value"] if isinstance(obj["value"], str) else json.dumps(obj["value"])
    return obj.get("description") or obj.get("unserializableValue") or obj.get("type", "")


# -- the charts contract ---------------------------------------------------------------------------------------
# Every chart in a report is <figure class="chart" id="fig-..." data-points="N"> holding one inline <svg>; the
# drawn data marks sit in SVG groups whose id starts with "data" (matplotlib's gid).
_FIGURES_JS = r"""
(() => {
  const SHAPES = new Set(['path', 'line', 'polyline', 'polygon', 'rect', 'circle', 'ellipse', 'use', 'image',
                          'text']);
  return Array.from(document.querySelectorAll('figure.chart')).map(fig => {
    const box = fig.getBoundingClientRect();
    const svgs = Array.from(fig.querySelectorAll('svg')).filter(s => !s.parentElement.closest('svg'));
    const svg = svgs[0] || null;
    const svgBox = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const marks = new Set();
    if (svg) {
      for (const group of svg.querySelectorAll('[id^="data"]')) {
        if (SHAPES.has(group.localName)) marks.add(group);
        for (const el of group.querySelectorAll('*')) if (SHAPES.has(el.localName)) marks.add(el);
      }
    }
    const visible = box.width > 0 && box.height > 0 &&
      (fig.checkVisibility ? fig.checkVisibility({opacityProperty: true, visibilityProperty: true}) : true);
    return {id: fig.id, width: box.width, height: box.height, data_points: fig.getAttribute('data-points'),
            svgs: svgs.length, svg_width: svgBox.width, svg_height: svgBox.height, data_marks: marks.size,
            visible: visible};
  });
})()
"""


def check_figures(page: Page) -> list[dict]:
    """Every chart figure of the page, measured as rendered: {"id", "width", "height", "data_points",
    "data_marks" (drawn elements under [id^="data"] in its svg), "svgs", "svg_width", "svg_height", "visible",
    "problems"}; `problems` lists what breaks the contract (empty, invisible, no/more than one svg, ...)."""
    figures = page.evaluate(_FIGURES_JS) or []
    seen: dict[str, int] = {}
    for f in figures:
        seen[f["id"]] = seen.get(f["id"], 0) + 1
    for f in figures:
        problems = []
        raw = f["data_points"]
        try:
            f["data_points"] = int(raw) if raw is not None else None
        except ValueError:
            f["data_points"] = None
            problems.append(f"data-points={raw!r} is not a whole number")
        if not f["id"].startswith("fig-"):
            problems.append(f"id {f['id']!r} does not start with 'fig-'")
        elif seen[f["id"]] > 1:
            problems.append(f"id {f['id']!r} is used by {seen[f['id']]} figures")
        if f["svgs"] != 1:
            problems.append(f"{f['svgs']} inline <svg> elements (want 1)")
        if raw is None:
            problems.append("no data-points attribute")
        elif f["data_points"] is not None and f["data_points"] <= 0:
            problems.append(f"data-points={f['data_points']} (empty chart)")
        if f["data_marks"] == 0:
            problems.append('no drawn elements under [id^="data"] (empty chart)')
        if not f["visible"]:
            problems.append(f"not visible ({f['width']:.0f}x{f['height']:.0f} px)")
        elif f["svgs"] and (f["svg_width"] <= 0 or f["svg_height"] <= 0):
            problems.append(f"svg has no area ({f['svg_width']:.0f}x{f['svg_height']:.0f} px)")
        f["problems"] = problems
    return figures
