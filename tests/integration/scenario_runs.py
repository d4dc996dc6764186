"""One way for tests to run a scenario through the CLI, as a user does: (the process, its result.json)."""
import json
import subprocess
import sys


def run(harness_env, out, scenario, *overrides, timeout=900):
    argv = [sys.executable, "-m", "harness", "run", scenario, "--out", str(out)]
    for o in overrides:
        argv += ["--set", o]
    proc = subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=timeout)
    return proc, json.loads((out / "result.json").read_text())
