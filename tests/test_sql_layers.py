"""SQL lives in the store and memory layers (and cron's own store), nowhere else (README,
"Architecture"): the learning pipeline, the agent, the front-ends and the CLI call their methods."""

from __future__ import annotations

import ast
from pathlib import Path

import hermes

ROOT = Path(hermes.__file__).parent
ALLOWED = ("store/", "memory/", "cron/store.py")
SQL_CALLS = {"execute", "executemany", "executescript", "query"}


def sql_calls(source: str) -> list[int]:
    """Lines where a statement given as a literal (plain or f-string) is run."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SQL_CALLS and node.args
                and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))):
            lines.append(node.lineno)
    return lines


def test_the_finder_sees_plain_and_formatted_statements() -> None:
    assert sql_calls('db.execute("SELECT 1")\ndb.execute(f"SELECT {x}")\n'
                     'db.executemany(\n  """INSERT"""\n, [])\n') == [1, 2, 3]
    assert sql_calls("await self.execute(job, due)\n") == []


def test_no_sql_outside_the_store_and_memory_layers() -> None:
    found = {}
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(ALLOWED):
            continue
        if lines := sql_calls(path.read_text(encoding="utf-8")):
            found[relative] = lines
    assert found == {}, f"SQL outside store/ and memory/: {found}"
