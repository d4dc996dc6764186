"""`harness capacity`'s defaults, apart from the search itself: the CLI shows them in its help, and building the
help must not import the search (it draws charts: matplotlib is a second of a run's start)."""
from __future__ import annotations

DEFAULT_START_EPS = 1000
DEFAULT_TRIAL_S = 30.0
DEFAULT_WARMUP_S = 30.0
DEFAULT_MAX_TRIALS = 12
DEFAULT_LATENCY_P99_MS = 5000.0
LATENCY_INTERVALS = 3.0  # a trial's p99 limit, when the scenario sets none: this many trigger intervals, or more
