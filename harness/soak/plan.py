"""What a soak runs, decided before it starts: its length, its seed and its fault plan.

Random faults (`[soak.random_faults]`) are drawn here, once, from the scenario's seed, and written into the
resolved scenario as ordinary [[faults]] entries with fixed times; the nemesis then runs them like any schedule.
So the run directory's scenario.json is the whole night: `--replay RUN_DIR` validates it again and runs it.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from harness import secrets
from harness.config import ConfigError, Scenario, SoakSpec, validate_resolved


def draw_faults(scenario: Scenario) -> list[dict]:
    """The concrete fault plan of `[soak.random_faults]`: [[faults]] entries with fixed times, in time order."""
    spec = scenario.soak.random_faults if scenario.soak else None
    if spec is None:
        return [f.model_dump(mode="json", exclude_none=True) for f in scenario.faults]
    rng = random.Random(f"soak-faults-{scenario.seed}")
    catalog = list(scenario.faults)
    weights = spec.weights or [1.0] * len(catalog)
    end = scenario.producers.duration_s - spec.quiet_end_s
    plan, t = [], spec.start_s
    while t <= end:
        template = rng.choices(catalog, weights=weights)[0]
        entry = template.model_dump(mode="json", exclude_none=True)
        for key in ("every_s", "count", "until_s", "jitter_s", "at_s", "window"):
            entry.pop(key, None)
        if template.window is not None:
            entry["window"] = [round(t, 3), round(t + template.window[1] - template.window[0], 3)]
        else:
            entry["at_s"] = round(t, 3)
        plan.append(entry)
        t += (template.heal_after_s or 0.0) + rng.uniform(*spec.every_s)  # the gap counts from the heal
    return plan


def resolve(scenario: Scenario) -> Scenario:
    """The scenario a soak runs: a [soak] section (defaults when the file has none) and the drawn fault plan."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["faults"] = draw_faults(scenario)
    soak = data.setdefault("soak", SoakSpec().model_dump(mode="json", exclude_none=True))
    soak.pop("random_faults", None)
    # the backend as given: its dump shows its secrets as *** (harness.secrets), the run needs them
    return validate_resolved(data, "the soak's resolved scenario").model_copy(update={"backend": scenario.backend})


def replayed(run_dir: Path) -> tuple[Scenario, Path]:
    """The scenario a soak ran (its scenario.json), to run again exactly; and the scenario file it came from."""
    record = Path(run_dir) / "scenario.json"
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
        data, source = saved["resolved"], Path(saved["file"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--replay {run_dir}: cannot read its scenario.json ({exc}); give a run directory "
                          "a soak wrote") from None
    hidden = secrets.hidden_paths(data)
    if hidden:
        raise ConfigError(f"--replay {run_dir}: its scenario.json shows {', '.join(hidden[:5])} as "
                          f"{secrets.REDACTED!r} (secrets are never written), so it cannot be run again as it "
                          "was; give secrets in the scenario as \"${ENV_VAR}\" references, which a record keeps")
    return validate_resolved(data, str(record)), source

