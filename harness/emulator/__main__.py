"""``python -m harness.emulator [options]``: the same options as ``harness emulator serve`` (options.py)."""

from __future__ import annotations

import sys

from harness.errors import InputError
from .options import parser, run


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
