"""The first pass of `hermes import`: is this file a whole `hermes export`? Writes nothing.

The header must come first; the end record (counts and a checksum over every line before it,
written by :func:`hermes.memory.transfer.sealed_lines`) must be there and match what the file
holds, so a file cut short, changed or damaged is found before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from hermes.errors import HermesError
from hermes.memory.transfer.export import EXPORT_END, EXPORT_FORMAT, READABLE_VERSIONS

NOTHING = "Nothing was imported."
# Where a file is not an export at all, the command that reads it.
OTHER_IMPORT = ("transcripts (JSON Lines) and ChatGPT or Claude exports are read by "
                "`hermes sessions import` (`--format chatgpt|claude`)")



def check_file(lines: Iterable[str], allow_unsealed: bool) -> tuple[dict[str, Any], list[str]]:
    """The first pass, which writes nothing: the header, and the end record against what the
    file holds. Returns the header and the warnings; a file that is not an export, or is cut
    short, changed or damaged (unless ``allow_unsealed``), is refused here."""
    digest = hashlib.sha256()
    header: dict[str, Any] | None = None
    trailer: dict[str, Any] | None = None
    read: dict[str, int] = {}
    after_end = unreadable = None
    number = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if header is None:
            try:
                header = load_record(number, line)
            except HermesError:
                header = {}
            if header.get("type") != EXPORT_FORMAT:
                raise HermesError("Not a Hermes export: the first line must be the "
                                  f"hermes-export header (`hermes export` writes it); "
                                  f"{OTHER_IMPORT}. {NOTHING}")
            digest.update(_canonical(line))
            continue
        if trailer is not None:
            after_end = after_end or number
        try:
            record = load_record(number, line)
        except HermesError as exc:
            unreadable = unreadable or str(exc).removesuffix(f". {NOTHING}")
            digest.update(_canonical(line))
            continue
        if record.get("type") == EXPORT_END and trailer is None:
            trailer = record
            continue
        digest.update(_canonical(line))
        _count(read, record)
    if header is None:
        raise HermesError("Not a Hermes export: the file is empty (`hermes export` writes a "
                          f"header first). {NOTHING}")
    version = header.get("version")
    if version not in READABLE_VERSIONS:
        raise HermesError(f"Unsupported export version {version!r} "
                          f"(this Hermes reads versions {', '.join(map(str, READABLE_VERSIONS))}).")
    if after_end is not None:
        raise HermesError(f"line {after_end}: a record after the end record. {NOTHING}")
    problem = _trailer_problem(version, trailer, read, digest.hexdigest(), number)
    if problem is None:
        return header, ["this is a version 1 export, written before exports had an end record: "
                        "whether it is complete cannot be checked"] if version == 1 else []
    if allow_unsealed:
        return header, [f"{problem}; what could be read was imported (--allow-incomplete)"]
    seen = f" ({unreadable})" if unreadable else ""
    raise HermesError(f"{problem[0].upper()}{problem[1:]}{seen}. {NOTHING} "
                      "(`hermes import --allow-incomplete` imports what can be read.)")


def _trailer_problem(version: Any, trailer: dict[str, Any] | None, read: dict[str, int],
                     checksum: str, last_line: int) -> str | None:
    if version == 1:
        return None
    if trailer is None:
        return (f"the file ends at line {last_line} without its end record: it was cut short "
                "(or is not what `hermes export` wrote)")
    expected = trailer.get("counts")
    if expected != read:
        if not isinstance(expected, dict):
            return f"the end record's counts are not counts ({str(expected)[:40]!r})"
        kinds = [k for k in {**expected, **read} if expected.get(k) != read.get(k)]
        counted = ", ".join(f"{expected.get(k, 0)} {k}" for k in kinds)
        held = ", ".join(f"{read.get(k, 0)} {k}" for k in kinds)
        return (f"the end record counts {counted}, but the file holds {held}: records are "
                "missing or were added")
    if trailer.get("sha256") != checksum:
        return ("the file's checksum does not match its end record: it was changed or damaged "
                "after it was exported")
    return None


def _canonical(line: str) -> bytes:
    return line.rstrip("\r\n").encode("utf-8", "surrogatepass") + b"\n"


def _count(counts: dict[str, int], record: dict[str, Any]) -> None:
    kind = str(record.get("type"))
    counts[kind] = counts.get(kind, 0) + 1
    if kind == "sessions" and isinstance(record.get("messages"), list):
        counts["messages"] = counts.get("messages", 0) + len(record["messages"])


def load_record(number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise HermesError(f"line {number}: not valid JSON ({exc.msg}). {NOTHING}") from None
    except RecursionError:  # `[` x 50,000
        raise HermesError(f"line {number}: JSON nested too deeply to read. {NOTHING}") from None
    if not isinstance(value, dict):
        raise HermesError(f"line {number}: expected a JSON object. {NOTHING}")
    return value
