"""Soak: one long run, unattended, that must say early and exactly when something breaks.

A soak is a scenario run through the one runner pipeline with its `[soak]` section: the fault plan drawn up front
from the seed (plan.py: random faults become concrete steps recorded in scenario.json, so `--replay` runs the
same night again), checks evaluated while it goes (live.py, with `fail_fast`), every process's resources sampled
(harness.samplers.resources), and at the end the usual verdict plus the soak's own checks (checks.py: every live check,
leaks, the disk budget, a baseline's regression thresholds), junit.xml and a CI summary (reports/ci.py).
"""
