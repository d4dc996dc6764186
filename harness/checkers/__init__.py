"""The verdict's checkers: each one a function of the run's view (harness.analysis.runview.RunView, read once from
the run directory and the run's state by the measuring step, harness.analysis.measure) returning its checks
(harness.check.Check: pass, fail or unknown, with its figure and detail); a checker reads no file, so each is
tested on literal views (tests/unit/test_checkers_literal.py). The verdict (harness.verdict) is their
composition; adding a check is one checker and its test. A checker that does not apply to a run returns nothing,
so every run shows the checks it was judged by.
"""
from __future__ import annotations

from typing import Protocol

from harness.check import Check
from harness.analysis.runview import RunView


class Checker(Protocol):
    def __call__(self, run: RunView) -> list[Check]: ...
