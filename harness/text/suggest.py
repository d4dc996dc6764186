"""'Did you mean': the nearest allowed names to an unknown one, in one place so every refusal words it the same.

A typo is the commonest bad input (`maxOffsetPerTrigger`, `partitons`, `stedy`); naming the two or three nearest
allowed names turns a hunt through the docs into a one-character fix. difflib's ratio is used on lower-cased
names (Spark and the connectors read option names case-insensitively), with a cut-off that keeps unrelated names
out: no suggestion is better than a wrong one.
"""
from __future__ import annotations

import difflib
from typing import Iterable

CUTOFF = 0.6
MAX_SUGGESTIONS = 3
MAX_QUOTED = 200  # characters of a user's value quoted back in an error message


def nearest(name: str, allowed: Iterable[str], n: int = MAX_SUGGESTIONS, cutoff: float = CUTOFF) -> list[str]:
    """Up to `n` allowed names closest to `name` (case-insensitive), best first; [] when none is close."""
    choices = list(dict.fromkeys(str(a) for a in allowed))
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=cutoff)
    return [by_lower[f] for f in found]


def did_you_mean(name: str, allowed: Iterable[str]) -> str:
    """"; did you mean 'a' or 'b'?" (or '' when nothing is close), appended to an 'unknown ...' message."""
    found = nearest(name, allowed)
    if not found:
        return ""
    quoted = [repr(f) for f in found]
    return "; did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


def quote(value: object, limit: int = MAX_QUOTED) -> str:
    """repr() of a user's value, cut to `limit` characters (a pasted certificate must not flood the console)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"
