"""`hermes import` (a restore from `hermes export`) that stopped part-way resumes: the same
command again keeps what was committed, adds the rest with every link as one run would make it,
and says so in one line; the same file once finished changes nothing; a different file, or
another user's unfinished import, is never taken for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes.clock import FakeClock
from hermes.config import Settings
from hermes.memory.basic import BasicMemory
from hermes.memory.transfer import export_user, import_user, restore
from hermes.runtime import Runtime
from tests.test_transfer_scope import seed


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """An export of every tier (facts with history and a newer version, entity links, a
    rated reply, an extraction run) plus sessions enough for several batches."""
    rt = Runtime(Settings(home=str(tmp_path / "source")), clock=FakeClock())
    seed(rt, "owner")
    sessions = rt.memory.sessions
    for n in range(6):
        session = sessions.create("owner", "terminal")
        for m in range(3):
            sessions.append("owner", session.id, "user" if m % 2 == 0 else "assistant",
                            f"session {n} message {m} about the garden")
    rt.memory.facts.add("owner", "The garden has three apple trees", entities=["garden"])
    path = tmp_path / "owner.jsonl"
    path.write_text("\n".join(export_user(rt.db, "owner")) + "\n", encoding="utf-8")
    rt.close()
    return path


def crowded_home(path: Path) -> Path:
    """A home where another user holds the low ids, so the import renumbers: a resumed run
    must link to the rows the first run created, not to the file's ids."""
    rt = Runtime(Settings(home=str(path)), clock=FakeClock())
    BasicMemory(rt.db, clock=rt.clock).add("bob", "Bob's entry")
    for n in range(3):
        rt.memory.facts.add("bob", f"Bob's fact number {n}", entities=[f"Thing{n}"])
    session = rt.memory.sessions.create("bob", "terminal")
    for n in range(5):
        rt.memory.sessions.append("bob", session.id, "user", f"bob says {n}")
    rt.close()
    return path


def export_of(cli, home: Path, user: str = "owner") -> str:
    result = cli("--home", str(home), "export", "--user", user)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def lines_of(dump: Path) -> list[str]:
    return dump.read_text(encoding="utf-8").splitlines()


def interrupt_at(monkeypatch, number: int, error: BaseException = KeyboardInterrupt()) -> None:
    real = restore._restore_line

    def stops(state, line_number, *args):
        if line_number == number:
            raise error
        return real(state, line_number, *args)

    monkeypatch.setattr(restore, "_restore_line", stops)


def test_an_interrupted_import_resumes_with_the_same_links_as_one_run(cli, tmp_path, dump,
                                                                       monkeypatch):
    whole = crowded_home(tmp_path / "whole")
    assert cli("--home", str(whole), "import", str(dump)).exit_code == 0
    expected = export_of(cli, whole)
    assert '"superseded_by":' in expected and "garden" in expected

    monkeypatch.setattr(restore, "BATCH_ROWS", 4)
    home = crowded_home(tmp_path / "home")
    stop = next(n for n, line in enumerate(lines_of(dump), 1) if "message 0 about" in line) + 2
    interrupt_at(monkeypatch, stop)
    first = cli("--home", str(home), "import", str(dump))
    assert first.exit_code == 130 and first.stdout == ""
    assert first.stderr == ("\nInterrupted: what was imported before is kept; run the same "
                            "command again to import the rest.\n")
    partial = export_of(cli, home)
    assert "session 0 message 0" in partial and "session 5 message" not in partial

    monkeypatch.undo()
    monkeypatch.setattr(restore, "BATCH_ROWS", 4)
    again = cli("--home", str(home), "import", str(dump))
    assert again.exit_code == 0, again.stderr
    resumed, imported, *rest = again.stdout.splitlines()
    assert resumed.startswith("Resuming the import of this file for 'owner' begun 20")
    assert resumed.endswith(f"UTC, which stopped after line {stop - 1:,}: that part is kept, "
                            "the rest is added.")
    assert imported.startswith("Imported for 'owner': 1 basic_memory, ")
    assert "got new ids" in rest[0]
    # Every row once, every reference (entity links, history, the newer version of a fact,
    # a message's session, the facts shown with a reply, ratings) as one run made them.
    assert export_of(cli, home) == expected
    assert export_of(cli, home, "bob") == export_of(cli, whole, "bob")


def test_a_crashed_import_resumes(cli, tmp_path, dump):
    """The process dies mid-batch (no rollback, no finally: os._exit): SQLite drops the
    unfinished batch, and the ledger says what the committed ones hold."""
    home = crowded_home(tmp_path / "home")
    stop = next(n for n, line in enumerate(lines_of(dump), 1) if "message 0 about" in line) + 3
    script = (
        "import os, sys\n"
        "from hermes.memory.transfer import restore\n"
        "restore.BATCH_ROWS = 5\n"
        "real = restore._restore_line\n"
        "def dies(state, number, *args):\n"
        f"    if number == {stop}:\n"
        "        os._exit(9)\n"
        "    return real(state, number, *args)\n"
        "restore._restore_line = dies\n"
        "from hermes.cli import main\n"
        f"sys.argv = ['hermes', '--home', {str(home)!r}, 'import', {str(dump)!r}]\n"
        "main()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    died = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert died.returncode == 9, died.stderr
    assert "session 0 message 0" in export_of(cli, home)
    again = cli("--home", str(home), "import", str(dump))
    assert again.exit_code == 0, again.stderr
    assert again.stdout.startswith("Resuming the import of this file for 'owner'")
    whole = crowded_home(tmp_path / "whole")
    cli("--home", str(whole), "import", str(dump))
    assert export_of(cli, home) == export_of(cli, whole)


def test_the_same_file_again_is_already_imported_and_another_file_is_refused(
        cli, tmp_path, dump, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setattr(restore, "BATCH_ROWS", 4)
    interrupt_at(monkeypatch, 12)
    assert cli("--home", str(home), "import", str(dump)).exit_code == 130
    # A different file (here the same records for another user's name) into this user's
    # memory is still refused, and leaves the unfinished import resumable.
    other = tmp_path / "other.jsonl"
    records = [json.loads(line) for line in lines_of(dump)[:-1]]
    records[0]["user"] = "someone"
    other.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    refused = cli("--home", str(home), "import", str(other), "--user", "owner",
                  "--allow-incomplete")
    assert refused.exit_code == 1 and refused.stderr.splitlines()[-1] == (
        "Error: Refused: user 'owner' already has memory in this home; `hermes import` restores "
        "into an empty one (or resumes the import of the same file that stopped part-way). "
        "Nothing was imported.")
    monkeypatch.undo()
    # A dry run of the resume writes nothing: the real one still resumes from the same line.
    dry = cli("--home", str(home), "import", str(dump), "--dry-run", "--json").json()
    assert 0 < dry["resumed_from_line"] < 12 and dry["dry_run"] is True
    done = cli("--home", str(home), "import", str(dump), "--json").json()
    assert done["resumed_from_line"] == dry["resumed_from_line"] and done["errors"] == []
    before = export_of(cli, home)
    again = cli("--home", str(home), "import", str(dump))
    assert again.exit_code == 0 and again.stderr == ""
    assert again.stdout.startswith("Already imported: this file was restored for 'owner' on ")
    assert again.stdout.endswith(" UTC; nothing was changed.\n")
    assert export_of(cli, home) == before


def test_another_users_unfinished_import_is_not_theirs_to_resume(cli, tmp_path, dump,
                                                                  monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setattr(restore, "BATCH_ROWS", 4)
    interrupt_at(monkeypatch, 12)
    assert cli("--home", str(home), "import", str(dump)).exit_code == 130
    monkeypatch.undo()
    # carol, with no memory, gets the whole file of her own (nothing of owner's run).
    carol = cli("--home", str(home), "import", str(dump), "--user", "carol", "--json").json()
    assert carol["resumed_from_line"] == 0 and carol["counts"]["sessions"] == 7
    # dave, who has memory, cannot take owner's unfinished import for his.
    cli("--home", str(home), "memory", "add", "Dave's own entry", "--user", "dave")
    dave = cli("--home", str(home), "import", str(dump), "--user", "dave")
    assert dave.exit_code == 1 and "'dave' already has memory" in dave.stderr
    owner = cli("--home", str(home), "import", str(dump), "--json").json()
    assert 0 < owner["resumed_from_line"] < 12
    # Each has the whole file once, in rows of their own (but a front-end's reference to a
    # message names one message of the home: carol's copy has it, so owner's is refused).
    assert len(export_of(cli, home, "carol").splitlines()) == len(lines_of(dump))
    assert [e["error"].split(" row ")[0] for e in owner["errors"]] == ["message_refs"]
    assert export_of(cli, home).count('"type":"sessions"') == 7
    assert "Dave's own entry" not in export_of(cli, home)


def test_a_second_import_of_the_same_file_takes_over_and_nothing_is_twice(tmp_path, dump,
                                                                          monkeypatch):
    """Two `hermes import` of the same file at once: the one that commits in between goes
    on, the other stops at its next batch with one line; every row is there once."""
    monkeypatch.setattr(restore, "BATCH_ROWS", 1)
    one = Runtime(Settings(home=str(tmp_path / "home")), clock=FakeClock())
    two = Runtime(Settings(home=str(tmp_path / "home")), clock=FakeClock())
    lines = lines_of(dump)
    passes = []

    def first_reader():
        passes.append(1)
        for number, line in enumerate(lines, 1):
            if len(passes) == 2 and number == 8:  # the first run, between two batches
                import_user(two.db, lines)
            yield line

    with pytest.raises(restore.HermesError) as stopped:
        import_user(one.db, first_reader)
    assert str(stopped.value) == (
        "Stopped at line 8: another `hermes import` of this file for 'owner' committed in the "
        "meantime and goes on from there; what was imported is kept.")
    whole = Runtime(Settings(home=str(tmp_path / "whole")), clock=FakeClock())
    import_user(whole.db, lines)
    assert list(export_user(one.db, "owner")) == list(export_user(whole.db, "owner"))
    for rt in (one, two, whole):
        rt.close()


def test_a_refused_record_before_the_stop_is_refused_again_not_linked(cli, tmp_path, dump,
                                                                      monkeypatch):
    """A session refused for one bad message deep inside, or for a bad watermark after all
    its rows were written, left no rows and no ids behind: the resumed run refuses each again
    by its line and reason, as one run would."""
    records = [json.loads(line) for line in lines_of(dump)[:-1]]
    bad = next(n for n, r in enumerate(records) if r["type"] == "sessions"
               and "session 0 message" in json.dumps(r))
    records[bad]["messages"][1]["role"] = {"not": "a role"}
    records[bad + 1]["row"]["extracted_through"] = "soon"
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    whole = crowded_home(tmp_path / "whole")
    one_run = cli("--home", str(whole), "import", str(damaged), "--allow-incomplete", "--json")
    assert [e["line"] for e in one_run.json()["errors"]] == [bad + 1, bad + 2]

    monkeypatch.setattr(restore, "BATCH_ROWS", 4)
    home = crowded_home(tmp_path / "home")
    interrupt_at(monkeypatch, bad + 5)
    assert cli("--home", str(home), "import", str(damaged), "--allow-incomplete").exit_code == 130
    monkeypatch.undo()
    resumed = cli("--home", str(home), "import", str(damaged), "--allow-incomplete", "--json")
    assert resumed.json()["resumed_from_line"] > bad + 2
    assert resumed.json()["errors"] == one_run.json()["errors"]
    assert export_of(cli, home) == export_of(cli, whole)


def test_an_import_stopped_after_its_entities_only_resumes(cli, tmp_path, dump, monkeypatch):
    """Entities come before facts and sessions: a first batch of entities alone is not
    "memory", yet starting again would write them twice."""
    records = [json.loads(line) for line in lines_of(dump)[:-1]]
    records = [r for r in records if r["type"] != "basic_memory"]
    no_basic = tmp_path / "no-basic.jsonl"
    no_basic.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    whole = tmp_path / "whole"
    assert cli("--home", str(whole), "import", str(no_basic), "--allow-incomplete").exit_code == 0

    monkeypatch.setattr(restore, "BATCH_ROWS", 1)
    first_fact = next(n for n, r in enumerate(records, 1) if r["type"] == "facts")
    interrupt_at(monkeypatch, first_fact)
    home = tmp_path / "home"
    assert cli("--home", str(home), "import", str(no_basic), "--allow-incomplete").exit_code == 130
    monkeypatch.undo()
    again = cli("--home", str(home), "import", str(no_basic), "--allow-incomplete", "--json")
    assert again.json()["resumed_from_line"] == first_fact - 1 and again.json()["errors"] == []
    assert export_of(cli, home) == export_of(cli, whole)

