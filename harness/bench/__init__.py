"""Benchmarks (`harness bench ...`): measured side by side in one run, never as timed tests."""
