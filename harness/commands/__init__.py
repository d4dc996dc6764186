"""The commands above the run pipeline: each calls harness.runner (the one pipeline) and is never called by it.

`run` (a scenario, or every combination of its `[sweep]`), `sweep`, `capacity` (the highest sustained rate),
`soak` (one long run with live checks and CI outputs). The benchmarks (harness.bench) sit at the same level.
"""
