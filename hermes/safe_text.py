"""Text at the edges: every string that enters Hermes is valid Unicode before it goes further,
and a text shown in a line is cut in one way (:func:`cut`, :func:`one_line`).

Python lets a ``str`` hold lone surrogates (``\\ud83e``): ``json.loads`` makes them from
``"\\ud83e"`` escapes, a model provider can send half an emoji, and ``sys.argv`` holds bytes that
are not UTF-8 as ``\\udcff`` (surrogateescape). SQLite, the terminal and every encoder refuse
them, so one bad character would lose a whole reply, extraction run or command. :func:`scrub`
turns each into U+FFFD (a valid surrogate pair becomes its character) and keeps the rest.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def scrub(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD; pairs joined. Cheap when clean."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_arg(arg: str) -> str:
    """A command-line argument: bytes that were not UTF-8 (surrogateescape) become U+FFFD."""
    if not _SURROGATE.search(arg):
        return arg
    try:
        raw = arg.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that did not come from a byte
        return scrub(arg)
    return raw.decode("utf-8", "replace")


def scrub_value(value: Any, depth: int = 0) -> Any:
    """Every string inside decoded JSON (dicts, lists), scrubbed; other values unchanged."""
    if isinstance(value, str):
        return scrub(value)
    if depth > 200:  # json.loads already bounds the depth; this is only a backstop
        return value
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_value(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v, depth + 1) for v in value]
    return value


def cut(text: str, width: int) -> str:
    """``text`` whole when it fits in ``width`` characters, else its first ``width - 1`` and an
    ellipsis (the one way Hermes cuts a text it shows)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def one_line(text: str | None, width: int) -> str:
    """``text`` on one line (each run of white space one space), cut to ``width``."""
    return cut(" ".join((text or "").split()), width)
