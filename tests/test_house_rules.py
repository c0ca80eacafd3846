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
              "hermes.safe_text",
              # how a file or folder of the home is made private (imports nothing of hermes)
              "hermes.home",
              # where a memory was learned and who may read it: the records every read for a
              # reply takes, and the one rule the tiers' SQL asks for (i32)
              "hermes.memory.place", "hermes.memory.audience")


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


def runtime_imports(tree: ast.Module, name: str) -> set[str]:
    """The modules of hermes ``name``'s module imports when it runs: at the top or inside a
    function (a function-local import is still an edge), not under TYPE_CHECKING."""
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                for n in ast.walk(node)}
    package = name.rsplit(".", 1)[0] if not name.endswith("__init__") else name
    found = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("hermes"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the module's own package
                module = ".".join([*package.split(".")[: len(package.split(".")) - node.level
                                                       + 1], *([module] if module else [])])
            if module.startswith("hermes"):
                # `from package import module` depends on the module; anything else, on the
                # module it names (a name in it)
                found.update(f"{module}.{a.name}" for a in node.names)
                found.add(module)
    return found


def import_graph() -> dict[str, set[str]]:
    names = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in names.items():
        imported = runtime_imports(ast.parse(path.read_text(encoding="utf-8")), name)
        # a package named only as the way to one of its modules is not a dependency of its own
        through = {m.rsplit(".", 1)[0] for m in imported if m in names and "." in m}
        graph[name] = {m for m in imported if m in names and m != name
                       and not (m in through and not _names_from(m, imported, names))}
    return graph


def _names_from(package: str, imported: set[str], names: dict[str, Path]) -> bool:
    """Whether ``imported`` takes a name from ``package`` itself (not only its modules)."""
    return any(m.rsplit(".", 1)[0] == package and m not in names for m in imported)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_sees_a_function_local_import() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    tree = ast.parse("def f():\n    from hermes.x import y\nif TYPE_CHECKING:\n"
                     "    import hermes.z\n")
    assert runtime_imports(tree, "hermes.w") == {"hermes.x", "hermes.x.y"}
    graph = import_graph()
    assert "hermes.frontends.web.routes_chat" in graph["hermes.frontends.web.site"]


def test_no_import_cycle_even_behind_a_function_local_import() -> None:
    assert cycles(import_graph()) == []


def ellipsis_cuts(tree: ast.Module) -> list[int]:
    """The lines where ``tree`` cuts a text by hand: ``text[:n] + "…"``."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
            and isinstance(node.left, ast.Subscript) and isinstance(node.left.slice, ast.Slice)
            and isinstance(node.right, ast.Constant) and node.right.value == "…"]


def test_a_shown_text_is_cut_in_one_place() -> None:
    assert ellipsis_cuts(ast.parse('x = text[: width - 1] + "…"')) == [1]
    found = {name: lines for name, tree in modules()
             if name != "safe_text.py" and (lines := ellipsis_cuts(tree))}
    assert found == {}, f"cut with hermes.safe_text.cut/one_line instead: {found}"
