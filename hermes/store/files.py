"""Writing a file so that it is either complete or absent: a temp file beside it, then a rename.

A full disk, a damaged database or Ctrl-C part-way through an export, a backup or the context
file leaves the old file (or none) and no partial one. The temp file lives in the target's
directory so the rename stays on one file system and is atomic.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from hermes.home import make_private_dirs


def temp_path_beside(path: Path) -> Path:
    """A fresh, not yet existing name in ``path``'s directory (for writers that create it)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(name)
    return Path(name)


def publish(tmp: Path, path: Path, *, replace: bool) -> None:
    """Move the finished ``tmp`` to ``path``; without ``replace``, never over an existing file."""
    if replace:
        os.replace(tmp, path)
        return
    # link() fails if ``path`` exists, so a file created meanwhile is never overwritten.
    os.link(tmp, path)
    tmp.unlink()


def discard(tmp: Path) -> None:
    for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


@contextlib.contextmanager
def atomic_text_file(path: Path, *, replace: bool = True) -> Iterator[TextIO]:
    """A UTF-8 handle whose text appears at ``path`` only once the block ends without error.

    An OSError (a full disk: ENOSPC, EFBIG) names ``path``, so the one line a person sees says
    which file could not be written.
    """
    make_private_dirs(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        publish(tmp, path, replace=replace)
    except OSError as exc:
        discard(tmp)
        if exc.filename is None:
            exc.filename = str(path)
        raise
    except BaseException:
        discard(tmp)
        raise
