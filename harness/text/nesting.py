"""How deeply a JSON or TOML text nests its arrays and tables, found before a parser sees it.

Python's json and tomllib parsers recurse once per level: a value 50,000 levels deep (`[[[[...]]]]`) ends in a
RecursionError and a traceback instead of an error naming the input. No configuration this project reads nests
deeper than a handful of levels, so texts deeper than MAX_DEPTH are refused before parsing, with a message the
caller prefixes with the file or the `--set` key.
"""
from __future__ import annotations

MAX_DEPTH = 64
_OPEN, _CLOSE = "[{", "]}"


def depth(text: str) -> int:
    """The deepest nesting of [ ] and { } in `text`, outside strings ("..." with backslash escapes, and TOML's
    literal '...'); a comment (# to the end of the line, TOML) is skipped. Unbalanced text is measured as far as
    it goes: the parser says what else is wrong with it."""
    deepest = level = 0
    quote = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote is not None:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in _OPEN:
            level += 1
            deepest = max(deepest, level)
        elif c in _CLOSE:
            level = max(0, level - 1)
        i += 1
    return deepest


def too_deep(text: str, limit: int = MAX_DEPTH) -> str | None:
    """Why `text` is refused (nested deeper than `limit`), None when it is not."""
    found = depth(text)
    if found <= limit:
        return None
    return f"nested {found:,} levels deep (at most {limit}: arrays and tables inside each other)"


def dotted(table: dict, prefix: str = "") -> dict:
    """A TOML table nested by its dotted keys (`a.b = 1` is {"a": {"b": 1}}) as the flat {"a.b": 1} it meant."""
    flat: dict = {}
    for key, item in table.items():
        if isinstance(item, dict):
            flat.update(dotted(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat
