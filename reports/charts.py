"""Charts as inline SVG, drawn by matplotlib: a report is one file that opens offline, with text a browser can
search and no script to fail.

Each chart becomes `<figure class="chart" id="fig-…" data-points="N">`: N is how many data points it plots, and its
data marks are SVG groups whose id starts with `data` (the browser test counts both); a long series drawn binned
(reports.binning) adds `data-binned="K"`, samples per bin, and says so in its caption. Faults are shaded on every
time axis (`shade_faults`), the warm-up too.

matplotlib is the `plots` extra: without it every page is built with its tables and says in one line, where the
figures would be, why there are none and what to install (`missing_html`), never a broken page or a lost run.
"""
from __future__ import annotations

import html
import io
import math
import re

try:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # (no pyplot: no global state between reports)
except ImportError:  # the `plots` extra is not installed
    matplotlib = None

PLOTS_MISSING = ("No figures: matplotlib is not installed here (pip install 'spark-stream-harness[plots]'); "
                 "the tables hold every figure of the run.")

RC = {"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False,
      "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8, "legend.frameon": False,
      "font.family": ["DejaVu Sans", "sans-serif"]}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
FAULT_COLOR, WARMUP_COLOR, STEADY_COLOR = "#d62728", "#7f7f7f", "#2e7d32"
MARGIN_IN = (0.85, 1.75, 0.3, 0.55)  # left, right, top, bottom


def can_draw() -> bool:
    """Whether charts can be drawn here: the `plots` extra (matplotlib) is installed."""
    return matplotlib is not None


def missing_html() -> str:
    """The line a page carries where its figures would be when they cannot be drawn; nothing when they can."""
    return "" if can_draw() else f'<p class="bad" id="no-figures">{html.escape(PLOTS_MISSING, quote=False)}</p>'


class Chart:
    """One figure: `ax` to draw on, `mark(artist, n)` for every data artist (n points), `html()` at the end."""

    def __init__(self, fig_id: str, title: str, caption: str = "", width: float = 9.6, height: float = 3.1,
                 axes: int = 1):
        self.id, self.title, self.caption = fig_id, title, caption
        with matplotlib.rc_context(RC):
            # fixed margins (inches), the same on every chart: time axes line up down the page, and drawing is
            # three times faster than with a layout engine; the right margin holds the legend
            h = height * axes
            self.fig = Figure(figsize=(width, h))
            self.fig.subplots_adjust(left=MARGIN_IN[0] / width, right=1 - MARGIN_IN[1] / width,
                                     top=1 - MARGIN_IN[2] / h, bottom=MARGIN_IN[3] / h, hspace=0.3)
            self.axes = self.fig.subplots(axes, 1, sharex=True, squeeze=False)[:, 0].tolist()
        self.ax = self.axes[0]
        self.points = 0
        self.binned = 1  # samples per drawn bin (reports.binning), the most of any series; 1: every sample drawn
        self._marks = 0

    def mark(self, artist, n: int):
        """A data artist (or a list of them, as plot() returns) and how many data points it shows."""
        for a in artist if isinstance(artist, (list, tuple)) else [artist]:
            self._marks += 1
            a.set_gid(f"data-{self.id}-{self._marks}")
        self.points += int(n)
        return artist

    def bin(self, k: int, note: str) -> None:
        """A series drawn k samples to a bin (reports.binning): the caption says so (`note`), and data-binned."""
        if k > 1:
            self.binned = max(self.binned, k)
            self.caption += note

    def svg(self) -> str:
        buf = io.StringIO()
        with matplotlib.rc_context({**RC, "svg.hashsalt": self.id}):
            self.fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        text = buf.getvalue()
        text = text[text.index("<svg"):]
        # a responsive width; the viewBox keeps the aspect ratio
        return re.sub(r'<svg([^>]*?) width="[^"]+" height="[^"]+"', r'<svg\1 width="100%"', text, count=1)

    def html(self) -> str:
        cap = f'<p class="caption">{html.escape(self.caption)}</p>' if self.caption else ""
        binned = f' data-binned="{self.binned}"' if self.binned > 1 else ""
        return (f'<figure class="chart" id="{self.id}" data-points="{self.points}"{binned}>'
                f"<figcaption>{html.escape(self.title)}</figcaption>{self.svg()}{cap}</figure>")


def shade_faults(axes, spans: list[tuple[float, float | None, str]], warmup_s: float = 0.0,
                 to_x=lambda t: t) -> None:
    """Faults (start, end or None, label) as shaded spans (a line when instantaneous) labelled at the top; the
    warm-up as a grey span from 0. `to_x` maps seconds to the axis's x when it is not time."""
    for i, ax in enumerate(axes):
        if warmup_s:
            ax.axvspan(to_x(0.0), to_x(warmup_s), color=WARMUP_COLOR, alpha=0.12, lw=0)
            if i == 0:
                ax.annotate("warm-up", (to_x(0.0), 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                            color=WARMUP_COLOR, va="bottom")
        for start, end, label in spans:
            x0 = to_x(start)
            if end is not None and to_x(end) - x0 > 0:
                ax.axvspan(x0, to_x(end), color=FAULT_COLOR, alpha=0.12, lw=0)
            else:
                ax.axvline(x0, color=FAULT_COLOR, lw=1, alpha=0.7)
            if i == 0:
                ax.annotate(label, (x0, 1.0), xycoords=("data", "axes fraction"), fontsize=7, color=FAULT_COLOR,
                            va="bottom", rotation=0)


def mark_performance(axes, result: dict) -> None:
    """Where the steady state began (a dashed line, when start-up was cut) and where each fault's recovery came
    (a dotted line in the fault's colour, 'back +Xs'), on a chart over the run's time."""
    steady = result.get("steady") or {}
    for i, ax in enumerate(axes):
        if steady.get("from_s", 0.0) > steady.get("measured_from_s", 0.0):
            ax.axvline(steady["from_s"], color=STEADY_COLOR, lw=1, ls="--", alpha=0.8)
            if i == 0:
                ax.annotate("steady", (steady["from_s"], 0.0), xycoords=("data", "axes fraction"), fontsize=7,
                            color=STEADY_COLOR, va="bottom")
        for r in result.get("recovery") or []:
            if r.get("recovered_s") is None:
                continue
            ax.axvline(r["recovered_s"], color=FAULT_COLOR, lw=1, ls=":", alpha=0.8)
            if i == 0:
                ax.annotate(f"back +{r['time_to_recover_s']:.0f}s", (r["recovered_s"], 0.93),
                            xycoords=("data", "axes fraction"), fontsize=7, color=FAULT_COLOR, va="bottom")


def ms_axis(ax) -> None:
    """Latency ticks in ms or s (1, 2, 5 per decade on a log axis)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if ax.get_yscale() == "log":
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: human_ms(v) if v > 0 else "0"))


def nines_axis(ax) -> None:
    """x as 'nines' (−log10(1 − q)): 50%, 90%, 99%, 99.9% … equally spaced, as latency tails are read."""
    ticks = [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999]
    ax.set_xticks([nines(q * 100) for q in ticks], [f"{q * 100:g}%" for q in ticks])


def nines(percentile: float) -> float:
    q = min(percentile / 100.0, 0.999999)
    return -math.log10(1.0 - q)


def human_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    return f"{ms:.3g} ms"


def thousands(ax, axis: str = "y") -> None:
    from matplotlib.ticker import FuncFormatter

    getattr(ax, f"{axis}axis").set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
