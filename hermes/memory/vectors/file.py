"""A user's vectors as a process holds them, saved in one file under ``<home>/cache/vectors/``
and memory-mapped by the next process instead of read out of SQLite again.

At 1M messages a new process (``hermes ask`` without a daemon, ``hermes sessions search``, the
MCP server) spent ~4 s of CPU reading the vector blobs and ~7 s building the session windows
before its first search, and held all of it (561 MB RSS). Mapped, the file costs a few page
faults: a search touches the centroids, the nearest cells' rows and a few windows, and the
kernel shares the pages between processes and drops them under pressure.

The file is derived data, never the truth: the database and its change log (``vector_changes``,
hermes.memory.vectors.matrix) are. It records the newest change it includes (``seq``), so a
process that maps it re-reads only the rows changed since. One file per kind, user and model;
the header names all three and is checked on every read, so a file is never served to another
user even if renamed. A file that is missing, cut short, altered, of another format, model or
user, or that disagrees with the database where sampled (a home restored from a backup) is not
used: the caller rebuilds it, with one log line. A write goes to a temporary file renamed into
place (a reader sees the old file or the new one, whole); a full disk leaves the old state and
the caller's in-memory path, with one log line.

Layout: ``MAGIC``, the header's length (8 bytes, little-endian), the header (JSON: the names
above, ``seq``, ``arrays``: name -> dtype, shape, offset), then each array at a page-aligned
offset. An array may have *room*: rows reserved past its last one, left as a hole in the file
(no disk used), so that a process that maps it copy-on-write appends new rows in place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes.home import make_private_dirs, private_opener

log = logging.getLogger(__name__)

MAGIC = b"HERMVEC\x01"
FORMAT = 1  # raise when what the arrays mean changes: older files are then rebuilt
ALIGN = 4096
WRITE_CHUNK = 1 << 24  # bytes written at once (never a copy of a whole array)


class Unusable(Exception):
    """The file cannot be used (the message says why, in one line)."""


def _np() -> Any:
    import numpy as np

    return np


def path_for(directory: Path, kind: str, user: str, model: str) -> Path:
    """Where ``user``'s vectors of this kind and model are kept (a name that says nothing of
    the user; the header does, and is checked)."""
    key = hashlib.sha256("\0".join([kind, user, model]).encode()).hexdigest()[:24]
    return Path(directory) / "vectors" / f"{kind}-{key}.vec"


@dataclass
class Mapped:
    """A file's header fields and its arrays, mapped copy-on-write (writes stay private to
    this process; ``room[name]``: the array with its reserved rows, for appends)."""

    meta: dict[str, Any]
    arrays: dict[str, Any]
    room: dict[str, Any]


def save(path: Path, meta: Mapping[str, Any], arrays: Mapping[str, Any],
         room: Mapping[str, int] | None = None) -> int:
    """Write ``arrays`` (numpy, C-contiguous) and ``meta`` to ``path``, atomically. ``room``:
    rows to reserve at the end of these arrays. Returns the bytes written. Raises OSError."""
    np = _np()
    room = dict(room or {})
    layout: dict[str, dict[str, Any]] = {}
    offset = 0
    for name, array in arrays.items():
        shape = list(array.shape)  # one dimension or more
        reserved = shape[0] + room.get(name, 0)
        layout[name] = {"dtype": array.dtype.str, "shape": shape, "offset": offset,
                        "room": reserved}
        size = reserved * int(np.prod(shape[1:], dtype=np.int64)) * array.dtype.itemsize
        offset += -(-max(size, 1) // ALIGN) * ALIGN
    small = {n: zlib.crc32(np.ascontiguousarray(a).view(np.uint8).reshape(-1))
             for n, a in arrays.items() if n in meta.get("checked", ())}
    header = json.dumps({**meta, "format": FORMAT, "arrays": layout, "crc": small},
                        sort_keys=True).encode()
    start = -(-(len(MAGIC) + 8 + len(header) + 4) // ALIGN) * ALIGN
    make_private_dirs(path.parent)  # 0700, whatever the umask
    remove_abandoned(path.parent)
    # One temporary file per write: two threads of a process may save the same file at once
    # (the daemon's vector job and a search, each with its own MessageVectors).
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_native_id()}.tmp")
    try:
        with open(tmp, "wb", opener=private_opener) as out:  # 0600: vectors of the memory
            out.write(MAGIC + len(header).to_bytes(8, "little") + header
                      + zlib.crc32(header).to_bytes(4, "little"))
            for name, array in arrays.items():
                out.seek(start + layout[name]["offset"])
                flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
                for at in range(0, len(flat), WRITE_CHUNK):
                    out.write(memoryview(flat[at : at + WRITE_CHUNK]))
            out.truncate(start + offset)  # the room at the end: a hole, no disk
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return start + offset


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another OS user's process: alive
        return True
    return True


def remove_abandoned(directory: Path) -> int:
    """Remove the temporary files of writes whose process is gone (killed, out of memory, the
    machine stopped: :func:`save` never renamed them), each as large as a file; a running
    process's write is left alone. Returns how many."""
    removed = 0
    for tmp in Path(directory).glob(".*.vec.*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2].split("-")[0]  # .NAME.vec.PID-THREAD.tmp
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def _header(path: Path) -> tuple[dict[str, Any], int, int] | None:
    """(header, where the arrays start, the file's size); None when there is no file."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC) + 8)
            if len(head) < len(MAGIC) + 8 or head[: len(MAGIC)] != MAGIC:
                raise Unusable("not a vector file")
            length = int.from_bytes(head[len(MAGIC) :], "little")
            if length > 1 << 24:
                raise Unusable("header too long")
            header = f.read(length)
            crc = f.read(4)
            total = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unusable(f"unreadable ({exc})") from None
    if len(header) != length or zlib.crc32(header).to_bytes(4, "little") != crc:
        raise Unusable("header damaged")
    try:
        meta = json.loads(header)
    except ValueError:
        raise Unusable("header damaged") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise Unusable(f"format {meta.get('format') if isinstance(meta, dict) else '?'}, "
                       f"not {FORMAT}")
    return meta, -(-(len(MAGIC) + 8 + length + 4) // ALIGN) * ALIGN, total


def discard(directory: Path, user: str) -> int:
    """Remove every file of ``user``'s vectors (any kind and model) and any file that cannot
    be read; returns how many. For when the user's stored text was rewritten (``hermes
    sessions redact``): a copy of vectors the database dropped must not outlive them."""
    removed = remove_abandoned(Path(directory) / "vectors")  # they may hold the old vectors
    for path in sorted((Path(directory) / "vectors").glob("*.vec")):
        try:
            found = _header(path)
            if found is None or found[0].get("user") != user:
                continue
        except Unusable:
            pass
        path.unlink(missing_ok=True)
        removed += 1
    return removed


# A file used (mapped, saved, or searched by a process holding it) within this many seconds
# is another process's: two processes of one home with different embedding models (a daemon
# started before sessions.embedding_model changed, a command run with another config) would
# otherwise delete each other's file at every save, each costing the next process a rebuild
# (~11 s of CPU at 900k vectors). Its modification time is the lease (mark_used).
IN_USE = 86_400.0


def mark_used(path: Path, now: float) -> None:
    """Say that a process uses ``path`` at ``now`` (seconds since the epoch): its modification
    time, which :func:`remove_other_models` reads. A file gone or read-only is left as it is:
    the lease only keeps a file that another process could otherwise remove."""
    try:
        os.utime(path, (now, now))
    except OSError as exc:
        log.debug("could not mark %s as in use (%s)", path, exc)


def remove_other_models(directory: Path, kind: str, user: str, model: str, *,
                        now: float, idle: float = IN_USE) -> int:
    """Remove ``user``'s files of this kind for any model but ``model`` that no process used
    in the last ``idle`` seconds (called once the new model's file is saved or mapped: after
    ``sessions.embedding_model`` changes, the old model's file, ~430 MB at 900k messages, was
    never read again nor removed). Other users' files, files in use and files that cannot be
    read are left alone. Returns how many were removed."""
    removed = 0
    for path in sorted((Path(directory) / "vectors").glob(f"{kind}-*.vec")):
        try:
            found = _header(path)
            used = path.stat().st_mtime
        except (Unusable, OSError):
            continue
        if (found is not None and found[0].get("kind") == kind and found[0].get("user") == user
                and found[0].get("model") != model and used <= now - idle):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def load(path: Path, kind: str, user: str, model: str) -> Mapped | None:
    """The file's arrays, mapped; None when there is no file. Raises Unusable when it cannot
    be used for this kind, user and model (damaged, another format, model or user)."""
    np = _np()
    found = _header(path)
    if found is None:
        return None
    meta, start, total = found
    for field, want in (("kind", kind), ("user", user), ("model", model)):
        if meta.get(field) != want:
            raise Unusable(f"another {field}'s")
    arrays, room = {}, {}
    try:
        for name, spec in meta["arrays"].items():
            dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
            reserved = (int(spec["room"]),) + shape[1:]
            if reserved[0] < shape[0]:
                raise Unusable("layout damaged")
            size = int(np.prod(reserved, dtype=np.int64)) * dtype.itemsize
            at = start + int(spec["offset"])
            if at + size > total:
                raise Unusable("cut short")
            if size == 0:
                whole = np.zeros(reserved, dtype)
            else:
                whole = np.memmap(path, dtype=dtype, mode="c", offset=at, shape=reserved)
            # Plain arrays over the mapping (np.memmap's own slices cost a few µs each)
            arrays[name], room[name] = np.asarray(whole[: shape[0]]), np.asarray(whole)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise Unusable(f"layout damaged ({exc})") from None
    for name, want in meta.get("crc", {}).items():
        got = zlib.crc32(np.ascontiguousarray(arrays[name]).view(np.uint8).reshape(-1))
        if got != want:
            raise Unusable(f"{name} damaged")
    return Mapped(meta, arrays, room)
