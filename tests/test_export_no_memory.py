"""`hermes export` of a user with no memory here says so (a misspelt --user)."""

from __future__ import annotations

import json


def _transcript(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"source": "terminal", "started_at": "2026-11-25T09:00:00Z",
                                "messages": [
        {"role": "user", "content": "Which Postgres?", "created_at": "2026-11-25T09:00:00Z"},
        {"role": "assistant", "content": "16.2.", "created_at": "2026-11-25T09:00:05Z"},
        {"role": "user", "content": "Thanks.", "created_at": "2026-11-25T09:00:09Z"}]}) + "\n",
        encoding="utf-8")
    return path


def test_exporting_a_user_with_no_memory_says_so(cli, tmp_path):
    """A misspelt --user would back up nothing and report success."""
    assert cli("memory", "add", "Owner's entry").exit_code == 0
    assert cli("memory", "add", "Bob's entry", "--user", "bob").exit_code == 0
    out = tmp_path / "nobody.jsonl"
    result = cli("export", "--user", "ownr", "-o", str(out))
    assert result.exit_code == 0 and result.stderr.splitlines() == [
        f"Exported for 'ownr' to {out}: nothing.",
        "Warning: 'ownr' has no memory in this home (users with memory here: bob, owner); "
        "the export holds no records."]
    to_stdout = cli("export", "--user", "ownr")
    assert to_stdout.stdout.count("\n") == 2 and "Warning: 'ownr' has no memory" in \
        to_stdout.stderr
    assert cli("export", "-o", str(out)).stderr == \
        f"Exported for 'owner' to {out}: 1 basic_memory.\n"


def test_export_says_rows_by_table_as_import_does(cli, tmp_path):
    """A session's line carries its messages: the summary counts rows, not lines, and names
    the tables the way `hermes import` does, so the two lines can be compared."""
    assert cli("memory", "add", "Owner's entry").exit_code == 0
    assert cli("sessions", "import", str(_transcript(tmp_path))).exit_code == 0
    out = tmp_path / "owner.jsonl"
    said = cli("export", "-o", str(out)).stderr.strip()
    assert said == f"Exported for 'owner' to {out}: 1 basic_memory, 3 messages, 1 sessions."
    restored = cli("--home", str(tmp_path / "restored"), "import", str(out))
    assert restored.stdout.strip() == "Imported for 'owner': 1 basic_memory, 3 messages, " \
        "1 sessions."
