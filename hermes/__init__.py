"""Hermes: a personal assistant daemon that never starts a conversation with amnesia."""

import sys as _sys
from importlib.machinery import ModuleSpec as _ModuleSpec
from types import ModuleType as _ModuleType
from typing import Any as _Any

# (Plain classes, not importlib.abc's: that module imports importlib.resources, ~20 ms.)


class _WithoutNumpy:
    """sqlite-utils imports pandas and numpy when they are installed (about 0.1 s of CPU on
    every command) to convert their types in its insert helpers, which Hermes never uses: it
    runs SQL and migrations only. This loader hides them while sqlite-utils itself is executed;
    importing them afterwards (hybrid recall's embeddings) works as usual."""

    def __init__(self, loader: _Any) -> None:
        self.loader = loader

    def create_module(self, spec: _ModuleSpec) -> _ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: _ModuleType) -> None:
        hidden = [name for name in ("numpy", "pandas") if name not in _sys.modules]
        for name in hidden:
            _sys.modules[name] = None  # type: ignore[assignment]
        try:
            self.loader.exec_module(module)
        finally:
            for name in hidden:
                if _sys.modules.get(name, False) is None:
                    del _sys.modules[name]

    def __getattr__(self, name: str) -> _Any:  # get_data, get_resource_reader, ...
        return getattr(self.loader, name)


class _SqliteUtilsFinder:
    """Puts :class:`_WithoutNumpy` in front of sqlite-utils' own loader when something first
    imports it. (It used to be imported here, by every ``import hermes...``: 0.1-0.25 s of CPU
    that a command answered by the daemon never needs.)"""

    def find_spec(self, fullname: str, path: _Any = None,
                  target: _ModuleType | None = None) -> _ModuleSpec | None:
        if fullname != "sqlite_utils":
            return None
        for finder in _sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _WithoutNumpy(spec.loader)  # type: ignore[assignment]
                return spec
        return None


if "sqlite_utils" not in _sys.modules and not any(
        isinstance(f, _SqliteUtilsFinder) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _SqliteUtilsFinder())

__version__ = "0.1.0"
