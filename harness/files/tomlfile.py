"""A scenario written back as a TOML file a person can read, run and attach to a bug report (harness shrink).

TOML has no null: a key whose value is None is left out, which for a scenario is the same thing (every field that
may be None defaults to None). The file is written atomically, like every record, and passes through
`harness.secrets.scrub` there; a value the record already shows as `***` stays `***`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

from harness.files import atomic


def without_nulls(value: Any) -> Any:
    """`value` with every None dropped from its tables (and from its lists: TOML has no null anywhere)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value if v is not None]
    return value


def dumps(data: dict, header: str = "") -> str:
    """`data` as TOML, after `header` (each line made a comment)."""
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comment + ("\n" if comment else "") + tomli_w.dumps(without_nulls(data), multiline_strings=False)


def write_toml(path: Path, data: dict, header: str = "") -> None:
    atomic.write_text(path, dumps(data, header))
