"""Splitting a reply into messages under a length limit (Discord: 2,000 characters).

Splits prefer paragraph breaks, then line breaks, then spaces; a hard cut only for a run with
none. A fenced code block that has to be split is closed at the end of one piece and reopened,
with its language, at the start of the next, so every piece renders as intended.
"""

from __future__ import annotations

import re

DISCORD_LIMIT = 2000
_FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")


def _open_fence(text: str, state: tuple[str, str] | None) -> tuple[str, str] | None:
    """The fence (marker, info string) still open after ``text``, starting from ``state``."""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if not match:
            continue
        marker, info = match.group(1), match.group(2).strip()
        if state is None:
            state = (marker, info)
        elif marker.startswith(state[0][0]) and len(marker) >= len(state[0]) and not info:
            state = None
    return state


def _cut_point(text: str, limit: int) -> int:
    """Where to end a piece of at most ``limit`` characters: after a break if there is one."""
    if len(text) <= limit:
        return len(text)
    window = text[:limit + 1]
    for sep in ("\n\n", "\n", " "):
        index = window.rfind(sep, 0, limit)
        if index > limit // 4:
            return index + len(sep) if sep == " " else index + 1
    return limit


def chunk_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters with code fences balanced."""
    if limit < 40:
        raise ValueError("limit too small to hold a reopened code fence")
    text = text.strip("\n")
    if not text.strip():
        return []
    pieces: list[str] = []
    fence: tuple[str, str] | None = None      # open at the start of the remaining text
    rest = text
    while rest:
        prefix = f"{fence[0]}{fence[1]}\n" if fence else ""
        # Reserve room for a closing fence in case this piece ends inside a block.
        room = limit - len(prefix) - 4 - 16
        if len(prefix) + len(rest) <= limit and _open_fence(rest, fence) is None:
            pieces.append(prefix + rest)
            break
        cut = _cut_point(rest, max(room, 1)) if len(prefix) + len(rest) > room else len(rest)
        body, rest = rest[:cut], rest[cut:]
        still_open = _open_fence(body, fence)
        piece = prefix + body.rstrip("\n")
        if still_open is not None:
            piece += "\n" + still_open[0]
        if piece.strip():
            pieces.append(piece)
        fence = still_open
        rest = rest.lstrip("\n") if still_open is None else rest
    return pieces
