"""An interrupted `hermes sessions import` of a chat export (Ctrl-C, or the process killed):
what was committed stays, one line says how to go on, and the same command again finishes it
without a duplicate session or message (matched by the export's own conversation and message
ids)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes.memory.sessions import transcripts


def claude_conversation(number: int) -> dict:
    uuid = f"conv-{number}"
    return {"uuid": uuid, "name": f"Chat {number}", "created_at": "2025-10-01T08:00:00Z",
            "chat_messages": [
                {"uuid": f"{uuid}-{i}", "sender": "human" if i % 2 == 0 else "assistant",
                 "text": f"Message {i} of conversation {number} about topic{number}",
                 "created_at": f"2025-10-01T08:0{i}:00Z"} for i in range(3)]}


@pytest.fixture
def export(tmp_path: Path) -> Path:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([claude_conversation(n) for n in range(10)]), encoding="utf-8")
    return path


def stored(rt) -> tuple[list[str], list[str]]:
    sessions = [r[0] for r in rt.db.execute(
        "SELECT external_id FROM sessions WHERE user = 'owner' ORDER BY external_id")]
    messages = [r[0] for r in rt.db.execute(
        "SELECT external_id FROM messages WHERE user = 'owner' ORDER BY external_id")]
    return sessions, messages


def test_an_interrupted_import_keeps_its_batches_and_the_rerun_adds_the_rest_once(
        cli, rt, export, monkeypatch):
    monkeypatch.setattr(transcripts, "IMPORT_BATCH", 4)
    real = transcripts._import_line
    seen: list[int] = []

    def interrupted(db, user, number, *args, **kwargs):
        seen.append(number)
        if number == 7:                   # Ctrl-C in the middle of the second batch
            raise KeyboardInterrupt
        return real(db, user, number, *args, **kwargs)

    monkeypatch.setattr(transcripts, "_import_line", interrupted)
    first = cli("sessions", "import", str(export), "--format", "claude")
    assert first.exit_code == 130 and first.stdout == ""
    assert first.stderr == ("\nInterrupted: what was imported before is kept; run the same "
                            "command again to import the rest (what is there is skipped).\n")
    sessions, messages = stored(rt)
    assert sessions == [f"claude:conv-{n}" for n in range(4)]   # the first batch, whole
    assert len(messages) == 12

    monkeypatch.setattr(transcripts, "_import_line", real)
    again = cli("sessions", "import", str(export), "--format", "claude", "--json").json()
    assert (again["sessions_created"], again["sessions_existing"]) == (6, 4)
    assert (again["messages_added"], again["messages_existing"]) == (18, 12)
    sessions, messages = stored(rt)
    assert sessions == sorted(f"claude:conv-{n}" for n in range(10))
    assert len(messages) == len(set(messages)) == 30
    # A third run finds everything there.
    third = cli("sessions", "import", str(export), "--format", "claude", "--json").json()
    assert (third["sessions_created"], third["messages_added"]) == (0, 0)
    assert stored(rt) == (sessions, messages)


def test_a_killed_import_leaves_whole_conversations_only(cli, rt, export, monkeypatch):
    """A process killed mid-batch (the batch's transaction never commits, as with SIGKILL)
    leaves no half conversation: each is one savepoint inside its batch."""
    monkeypatch.setattr(transcripts, "IMPORT_BATCH", 4)
    real = transcripts._import_line

    def dies(db, user, number, item, *args, **kwargs):
        real(db, user, number, item, *args, **kwargs)
        if number == 6:
            raise SystemExit(137)          # after conversation 6 was written, before the commit

    monkeypatch.setattr(transcripts, "_import_line", dies)
    assert cli("sessions", "import", str(export), "--format", "claude").exit_code == 137
    sessions, messages = stored(rt)
    assert len(sessions) == 4 and len(messages) == 12
    monkeypatch.setattr(transcripts, "_import_line", real)
    assert cli("sessions", "import", str(export), "--format", "claude").exit_code == 0
    sessions, messages = stored(rt)
    assert len(sessions) == 10 and len(messages) == len(set(messages)) == 30
