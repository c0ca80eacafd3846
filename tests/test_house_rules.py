"""The house's rules, each enforced by reading the code (as tests/test_sql_layers.py does for
SQL): the Runtime stays at the entry points, and every store comes from the home's Memory."""

from __future__ import annotations

import ast
from pathlib import Path

import hermes

ROOT = Path(hermes.__file__).parent

# The composition root and the entry points that build it: everything below them receives the
# home's Memory (hermes.memory.Memory) and, where it needs one, the agent.
RUNTIME_ALLOWED = ("cli/", "daemon.py", "runtime.py", "assembly.py")

# Each store, and where it may be built: the Memory of a home (memory/__init__.py) builds one of
# each; a store builds the parts it owns; the cron store is the composition root's.
STORE_BUILDERS = {
    "BasicMemory": {"memory/__init__.py"},
    "FactStore": {"memory/__init__.py"},
    "SessionStore": {"memory/__init__.py"},
    "ReplyRatings": {"memory/__init__.py"},
    "MessageRefs": {"memory/__init__.py"},
    "MessageVectors": {"memory/__init__.py", "memory/sessions/vectors.py"},
    "FactVectors": {"memory/__init__.py", "memory/facts/vectors.py"},
    "EntityStore": {"memory/facts/store.py"},
    "FactRecall": {"memory/facts/store.py"},
    "SessionSearch": {"memory/sessions/store.py"},
    "CronStore": {"assembly.py"},
}


def modules() -> list[tuple[str, ast.Module]]:
    return [(path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(ROOT.rglob("*.py"))]


def imported(tree: ast.Module) -> set[str]:
    """Every module an import anywhere in ``tree`` names (a function-local one, one under
    TYPE_CHECKING), with each name imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def built(tree: ast.Module) -> set[str]:
    """The names called in ``tree`` (``Name(...)`` and ``module.Name(...)``)."""
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                calls.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                calls.add(node.func.attr)
    return calls


def test_the_finders_see_local_and_type_checking_imports_and_calls() -> None:
    tree = ast.parse("if TYPE_CHECKING:\n    from hermes.runtime import Runtime\n"
                     "def f():\n    import hermes.runtime\n    return stores.FactStore(db)\n")
    assert {"hermes.runtime", "hermes.runtime.Runtime"} <= imported(tree)
    assert "FactStore" in built(tree)


def test_the_runtime_stays_at_the_entry_points() -> None:
    found = [name for name, tree in modules()
             if not name.startswith(RUNTIME_ALLOWED) and "hermes.runtime" in imported(tree)]
    assert found == [], f"the Runtime is named below the entry points in {found}"


def test_every_store_comes_from_the_homes_memory() -> None:
    found = {}
    for name, tree in modules():
        wrong = sorted(store for store in built(tree) & STORE_BUILDERS.keys()
                       if name not in STORE_BUILDERS[store])
        if wrong:
            found[name] = wrong
    assert found == {}, f"stores built outside hermes.memory.Memory: {found}"


# memory/'s root: the façade (Memory, and the Place/Scope records its operations take), basic
# memory and the context file; every other idea is a package of its own.
MEMORY_ROOT = {"__init__.py", "place.py", "basic.py", "context.py"}

# What the tiers stand on: each other's? never. What is below both (the embedding engine, the
# stored vectors, the words of a text), text safety, the store, and the small floor modules.
TIER_FLOOR = ("hermes.memory.embeddings", "hermes.memory.vectors", "hermes.memory.words",
              "hermes.safety", "hermes.store", "hermes.clock", "hermes.errors", "hermes.config",
              "hermes.safe_text")


def test_memorys_root_holds_the_facade_basic_memory_the_context_file_and_packages() -> None:
    root = ROOT / "memory"
    assert {p.name for p in root.glob("*.py")} == MEMORY_ROOT
    assert all((p / "__init__.py").exists() for p in root.iterdir()
               if p.is_dir() and p.name != "__pycache__")


def test_facts_and_sessions_import_neither_each_other_nor_anything_above_them() -> None:
    found = {}
    for name, tree in modules():
        for tier in ("facts", "sessions"):
            if not name.startswith(f"memory/{tier}/"):
                continue
            own = f"hermes.memory.{tier}"
            wrong = sorted(m for m in imported(tree) if m.startswith("hermes")
                           and not m.startswith((own, *TIER_FLOOR)))
            if wrong:
                found[name] = wrong
    assert found == {}, f"a tier imports beside or above itself: {found}"
