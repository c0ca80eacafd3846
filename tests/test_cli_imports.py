"""A memory command loads only what it uses: no model layer, no scheduler, no rich, no numpy.

Whole-process CPU figures are in scripts/bench_cli.py; this checks the cause, not the clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "rich", "numpy", "pandas", "apscheduler", "prompt_toolkit", "discord",
         "starlette", "hermes.agent", "hermes.frontends", "click")

PROBE = """
import json, sys
from hermes.cli import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] if not m.startswith("hermes.") else ".".join(m.split(".")[:2])
                for m in sys.modules if m.startswith(tuple(json.loads(HEAVY)))})
print(json.dumps(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["memory", "show"], ["facts", "search", "redis"]])
def test_a_memory_command_imports_nothing_heavy(args, hermes_home):
    probe = PROBE.replace("json.loads(HEAVY)", repr(list(HEAVY)))
    done = subprocess.run([sys.executable, "-c", probe, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    # click is sqlite-utils' dependency, imported by it; the rest would be ours.
    assert [m for m in loaded if m != "click"] == []


def test_every_command_module_is_in_the_lazy_table():
    """A sub-app added under hermes/cli/ must be in COMMANDS, or `hermes` never shows it."""
    import ast

    from hermes.cli import COMMANDS

    registered = {module for module, _ in COMMANDS.values()}
    for path in (REPO / "hermes" / "cli").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        has_app = any(isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "app" for t in node.targets)
            for node in tree.body)
        if has_app and path.stem != "__init__":
            assert f"hermes.cli.{path.stem}" in registered, path.name
