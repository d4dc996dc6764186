"""`harness --version`: the version of the installed distribution, read from its metadata (what pip installed,
wheel or editable), never a second copy of the number in the code that could drift from pyproject.toml. The line
also says where the package was imported from, so "which harness is this?" has one answer."""
from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "spark-stream-harness"


def version() -> str | None:
    """The installed distribution's version; None when the package runs from a source tree that was never
    installed (no metadata to read)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def version_line() -> str:
    where = Path(__file__).resolve().parent
    number = version() or "unknown (not installed: no package metadata; pip install it)"
    return f"{DISTRIBUTION} {number} ({where}; Python {sys.version.split()[0]})"


class VersionAction(argparse.Action):
    """`--version` printing the line as it is (argparse's own version action re-wraps it at the terminal's
    width, splitting the path), then exiting 0 like any --version."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()
