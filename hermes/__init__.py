"""Hermes: a personal assistant daemon that never starts a conversation with amnesia."""

import sys as _sys


def _import_sqlite_utils_without_numpy() -> None:
    """sqlite-utils imports pandas and numpy when they are installed (about 0.1 s of CPU on
    every command) to convert their types in its insert helpers, which Hermes never uses: it
    runs SQL and migrations only. Hide them for that one import; importing them afterwards
    (hybrid recall's embeddings) works as usual."""
    if "sqlite_utils" in _sys.modules:
        return
    hidden = [name for name in ("numpy", "pandas") if name not in _sys.modules]
    for name in hidden:
        _sys.modules[name] = None  # type: ignore[assignment]
    try:
        import sqlite_utils  # noqa: F401
    finally:
        for name in hidden:
            if _sys.modules.get(name, False) is None:
                del _sys.modules[name]


_import_sqlite_utils_without_numpy()

__version__ = "0.1.0"
