"""`hermes export` of a user with no memory here says so (a misspelt --user)."""

from __future__ import annotations


def test_exporting_a_user_with_no_memory_says_so(cli, tmp_path):
    """A misspelt --user would back up nothing and report success."""
    assert cli("memory", "add", "Owner's entry").exit_code == 0
    assert cli("memory", "add", "Bob's entry", "--user", "bob").exit_code == 0
    out = tmp_path / "nobody.jsonl"
    result = cli("export", "--user", "ownr", "-o", str(out))
    assert result.exit_code == 0 and result.stderr.splitlines() == [
        f"Exported 0 records of 'ownr' to {out}.",
        "Warning: 'ownr' has no memory in this home (users with memory here: bob, owner); "
        "the export holds no records."]
    to_stdout = cli("export", "--user", "ownr")
    assert to_stdout.stdout.count("\n") == 2 and "Warning: 'ownr' has no memory" in \
        to_stdout.stderr
    assert cli("export", "-o", str(out)).stderr == f"Exported 1 records of 'owner' to {out}.\n"
