"""ChatGPT and Claude exports: fixture exports written here, imported through the CLI and the
importer, re-imported, zipped, and damaged."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from hermes.memory.sessions import chat_exports
from hermes.memory.sessions.chat_exports import ExportError, import_export, load_export, read_export
from hermes.memory.sessions.store import SessionStore

T0 = 1_764_000_000  # 2025-11-24T16:00:00Z


def node(node_id, role, parts, *, parent, children=(), at=None, content_type="text",
         hidden=False, **content):
    message = None
    if role is not None:
        message = {
            "id": node_id, "author": {"role": role}, "create_time": at,
            "content": {"content_type": content_type, **({"parts": parts} if parts is not None
                                                          else {}), **content},
            "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {},
        }
    return node_id, {"id": node_id, "message": message, "parent": parent,
                     "children": list(children)}


def chatgpt_branching():
    """A conversation whose first question was edited: the old branch must not be imported."""
    mapping = dict([
        node("root", None, None, parent=None, children=["sys"]),
        node("sys", "system", [""], parent="root", children=["u1", "u1b"], hidden=True),
        node("u1", "user", ["Which port does Postgres use?"], parent="sys", children=["a1"],
             at=T0 + 10),
        node("a1", "assistant", ["5432 by default."], parent="u1", at=T0 + 11),
        # The edit: a sibling of u1, and the branch the user last saw.
        node("u1b", "user", ["Which port does Redis use? Here is my config:\n```\nport 6380\n```"],
             parent="sys", children=["tool1"], at=T0 + 20),
        node("tool1", "tool", ["search results"], parent="u1b", children=["code1"], at=T0 + 21),
        node("code1", "assistant", None, parent="tool1", children=["a2"], at=T0 + 22,
             content_type="code", language="python", text="print(6380)"),
        node("a2", "assistant", ["Yours listens on 6380.", {"content_type": "image_asset_pointer",
                                                            "asset_pointer": "file-1"}],
             parent="code1", children=["u2"], at=T0 + 23),
        node("u2", "user", ["thanks, see the attached notes"], parent="a2", children=["r1"],
             at=T0 + 30),
        node("r1", "assistant", None, parent="u2", at=T0 + 31, content_type="thoughts"),
    ])
    mapping["u2"]["message"]["metadata"] = {"attachments": [{"name": "notes.txt"}]}
    return {"id": "conv-1", "title": "Ports", "create_time": T0, "update_time": T0 + 31,
            "mapping": mapping, "current_node": "r1"}


def chatgpt_export():
    empty = {"id": "conv-empty", "title": "New chat", "create_time": T0,
             "mapping": dict([node("root", None, None, parent=None)]), "current_node": "root"}
    broken = {"id": "conv-broken", "title": "Broken", "create_time": T0, "mapping": "nope"}
    second = {"id": "conv-2", "title": "Garden", "create_time": T0 + 100, "mapping": dict([
        node("x", "user", ["My tomatoes are in the south bed."], parent=None, children=["y"],
             at=T0 + 100),
        node("y", "assistant", ["Good spot."], parent="x", at=T0 + 101),
    ]), "current_node": "y"}
    return [chatgpt_branching(), empty, broken, second]


def claude_export():
    return [
        {"uuid": "c-1", "name": "Trip to Lisbon", "created_at": "2025-10-01T08:00:00.000000Z",
         "updated_at": "2025-10-01T08:05:00Z", "chat_messages": [
             {"uuid": "m-1", "sender": "human", "text": "I fly to Lisbon on 12 October.",
              "created_at": "2025-10-01T08:00:00Z",
              "attachments": [{"file_name": "itinerary.txt",
                               "extracted_content": "Flight TP123 at 09:40"}]},
             {"uuid": "m-2", "sender": "assistant", "text": "",
              "content": [{"type": "text", "text": "Here is a packing list:"},
                          {"type": "tool_use", "name": "x", "input": {}},
                          {"type": "text", "text": "```\nshoes\n```"}],
              "created_at": "2025-10-01T08:01:00Z"},
         ]},
        {"uuid": "c-empty", "name": "", "created_at": "2025-10-02T08:00:00Z",
         "chat_messages": []},
        {"uuid": "c-bad", "name": "Bad", "created_at": "2025-10-03T08:00:00Z",
         "chat_messages": [{"uuid": "m-9", "sender": "robot", "text": "beep"}]},
        {"uuid": "c-2", "name": "Cats", "created_at": "not a time", "chat_messages": []},
    ]


def write(tmp_path: Path, data, name="conversations.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def spoken(store: SessionStore, session_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in store.messages("owner", session_id)]


def test_chatgpt_export_follows_the_branch_the_user_last_saw(cli, rt, tmp_path):
    path = write(tmp_path, chatgpt_export())
    result = cli("sessions", "import", str(path), "--format", "chatgpt", "--json")
    assert result.exit_code == 1  # one malformed conversation
    report = result.json()
    assert report["sessions_created"] == 2 and report["empty"] == 1
    assert report["errors"] == [{"conversation": 3,
                                 "error": "'mapping' must be an object of message nodes"}]
    store = rt.memory.sessions
    sessions = {s.title: s for s in store.list_sessions("owner")}
    ports = sessions["Ports"]
    assert ports.source == "import" and ports.external_id == "chatgpt:conv-1"
    assert ports.started_at == "2025-11-24T16:00:00.000000Z"
    assert ports.ended_at == "2025-11-24T16:00:30.000000Z"
    assert spoken(store, ports.id) == [
        ("user", "Which port does Redis use? Here is my config:\n```\nport 6380\n```"),
        ("assistant", "```python\nprint(6380)\n```"),
        ("assistant", "Yours listens on 6380.\n[image]"),
        ("user", "thanks, see the attached notes\n[file: notes.txt]"),
    ]
    assert store.messages("owner", ports.id)[0].created_at == "2025-11-24T16:00:20.000000Z"
    # The edited-away question is nowhere: neither stored nor found.
    assert not store.search("owner", "Postgres")
    assert store.search("owner", "tomatoes")[0].session.title == "Garden"


def test_a_chatgpt_export_without_current_node_takes_the_newest_leaf(rt):
    conversation = chatgpt_branching()
    del conversation["current_node"]
    store = rt.memory.sessions
    report = import_export(store, "owner", [conversation], "chatgpt")
    assert report.sessions_created == 1
    session = store.list_sessions("owner")[0]
    assert spoken(store, session.id)[0][1].startswith("Which port does Redis use?")


def test_claude_export_keeps_blocks_attachments_and_reports_bad_conversations(cli, rt, tmp_path):
    path = write(tmp_path, claude_export())
    result = cli("sessions", "import", str(path), "--format", "claude")
    assert result.exit_code == 1
    assert "Imported 1 new session(s) and 2 message(s)" in result.stdout
    assert "1 empty conversation(s)" in result.stdout
    assert "conversation 3: chat_messages[0].sender must be human or assistant" in result.stderr
    assert "conversation 4: 'created_at' is not an ISO 8601 time" in result.stderr
    store = rt.memory.sessions
    [session] = store.list_sessions("owner")
    assert (session.title, session.source, session.external_id) == (
        "Trip to Lisbon", "import", "claude:c-1")
    assert spoken(store, session.id) == [
        ("user", "I fly to Lisbon on 12 October.\n\n[attachment: itinerary.txt]\n"
                 "Flight TP123 at 09:40"),
        ("assistant", "Here is a packing list:\n\n```\nshoes\n```"),
    ]


def test_reimport_is_a_no_op_and_a_grown_conversation_adds_only_its_new_messages(rt):
    store = rt.memory.sessions
    export = claude_export()[:1]
    first = import_export(store, "owner", export, "claude")
    again = import_export(store, "owner", export, "claude")
    assert (first.sessions_created, first.messages_added) == (1, 2)
    assert (again.sessions_created, again.sessions_existing, again.messages_added) == (0, 1, 0)
    export[0]["chat_messages"].append({"uuid": "m-3", "sender": "human", "text": "And back on "
                                       "the 20th.", "created_at": "2025-10-01T09:00:00Z"})
    grown = import_export(store, "owner", export, "claude")
    assert (grown.sessions_existing, grown.messages_added, grown.messages_existing) == (1, 1, 2)
    assert len(store.list_sessions("owner")) == 1
    assert rt.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 3


def test_the_downloaded_zip_is_read_as_is(cli, rt, tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("chat.html", "<html></html>")
        z.writestr("conversations.json", json.dumps(chatgpt_export()[3:]))
    result = cli("sessions", "import", str(archive), "--format", "chatgpt", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["sessions_created"] == 1
    assert rt.memory.sessions.list_sessions("owner")[0].title == "Garden"


def test_a_file_that_is_not_an_export_is_one_line_and_imports_nothing(cli, rt, tmp_path):
    bad_json = tmp_path / "conversations.json"
    bad_json.write_text("[{", encoding="utf-8")
    result = cli("sessions", "import", str(bad_json), "--format", "claude")
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("Error: conversations.json: not valid JSON")
    deep = write(tmp_path, None, "deep.json")
    deep.write_text("[" * 100_000, encoding="utf-8")
    result = cli("sessions", "import", str(deep), "--format", "chatgpt")
    assert result.exit_code == 1 and "nested too deeply" in result.stderr
    empty_zip = tmp_path / "other.zip"
    with zipfile.ZipFile(empty_zip, "w") as z:
        z.writestr("notes.txt", "hi")
    result = cli("sessions", "import", str(empty_zip), "--format", "chatgpt")
    assert "the zip holds no conversations.json" in result.stderr
    export = write(tmp_path, claude_export(), "claude.json")
    result = cli("sessions", "import", str(export))  # --format forgotten
    assert result.exit_code == 1
    assert "looks like a Claude export, not JSON Lines: add --format claude." in result.stderr
    result = cli("sessions", "import", str(bad_json), "--format", "gemini")
    assert "--format: expected jsonl, chatgpt, claude" in result.stderr
    assert rt.memory.sessions.list_sessions("owner") == []


def test_a_wrong_format_names_the_right_one_and_imports_nothing(cli, rt, tmp_path):
    claude, chatgpt = write(tmp_path, claude_export(), "c.json"), \
        write(tmp_path, chatgpt_export(), "g.json")
    for path, given, right in ((claude, "chatgpt", "claude"), (chatgpt, "claude", "chatgpt")):
        result = cli("sessions", "import", str(path), "--format", given)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        assert f"use --format {right}. Nothing was imported." in result.stderr
        result = cli("sessions", "import", str(path))  # --format forgotten
        assert f"not JSON Lines: add --format {right}." in result.stderr
    transcripts = tmp_path / "t.jsonl"
    transcripts.write_text('{"source": "terminal", "started_at": "2026-11-01T00:00:00Z", '
                           '"messages": []}\n' * 2, encoding="utf-8")
    result = cli("sessions", "import", str(transcripts), "--format", "claude")
    assert result.exit_code == 1
    assert "it looks like JSON Lines (transcripts), not a Claude export: leave out --format" \
        in result.stderr
    cli("memory", "add", "Runs Debian 13")
    export = tmp_path / "owner.jsonl"
    assert cli("export", "-o", str(export)).exit_code == 0
    for extra in ((), ("--format", "chatgpt")):
        result = cli("sessions", "import", str(export), *extra)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        assert "is a `hermes export` file" in result.stderr
        assert f"`hermes import {export}` restores it" in result.stderr
    assert rt.memory.sessions.list_sessions("owner") == []


def test_an_import_is_scoped_to_the_importing_user(rt, tmp_path):
    store = rt.memory.sessions
    # (read_export: the conversations streamed from the file, as the command imports them)
    import_export(store, "alice", read_export(write(tmp_path, claude_export()[:1])), "claude")
    # Bob importing the same export gets his own session; alice's is untouched.
    report = import_export(store, "bob", claude_export()[:1], "claude")
    assert report.sessions_created == 1
    assert len(store.list_sessions("alice")) == 1 and len(store.list_sessions("bob")) == 1
    assert not store.search("carol", "Lisbon")


async def test_the_daemon_leaves_imported_sessions_alone(fake_model, clock, tmp_path):
    """Issue 11: after a large import the daemon's start-up work summarised every imported
    session and extracted imported terminal ones. Both are opt-in now: no model call."""
    from hermes.agent.llm import LLM
    from hermes.agent.summarize import close_idle
    from hermes.config import load_settings
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory.sessions.transcripts import import_sessions
    from hermes.runtime import Runtime

    rt = Runtime(load_settings(), clock=clock)
    store = rt.memory.sessions
    import_export(store, "owner", chatgpt_export(), "chatgpt")
    line = json.dumps({"source": "terminal", "started_at": "2026-11-01T00:00:00Z", "messages": [
        {"role": "user", "content": "I moved to Porto last spring and work at Acme.",
         "created_at": "2026-11-01T00:00:01Z"}]})
    import_sessions(store, "owner", [line])
    live = store.create("owner", "terminal")
    store.append("owner", live.id, "user", "I adopted a cat called Miso last week, a tabby.")
    clock.advance(days=2)
    fake_model.reply('{"title": "Miso", "summary": "A new cat."}')
    outcomes = await close_idle(rt.memory, LLM.from_settings(rt.settings, background=True))
    assert [o.session_id for o in outcomes] == [live.id]  # the live session only
    worker = ExtractionWorker(rt.memory)
    assert [t.get_name() for t in worker.catch_up()] == [f"extract:owner:{live.id}"]
    await worker.drain(0)
    rt.close()


def test_a_secret_in_an_export_is_redacted_like_any_recorded_message(rt):
    key = "sk-proj-" + "Zq8vX2mN4pL7tR1wY6bC3dF9" * 2
    export = claude_export()[:1]
    export[0]["chat_messages"][0]["text"] = f"My OpenAI key is {key}, keep it safe."
    store = rt.memory.sessions
    import_export(store, "owner", export, "claude")
    [session] = store.list_sessions("owner")
    stored = store.messages("owner", session.id)[0].content
    assert key not in stored and "[redacted" in stored
    assert not store.search("owner", key[8:30])
    again = import_export(store, "owner", export, "claude")  # still the same message
    assert (again.messages_added, again.messages_existing) == (0, 2)


def test_an_archive_that_unzips_past_the_limit_is_one_line_and_imports_nothing(
        cli, rt, tmp_path, monkeypatch):
    """The pass's zip: 510 KB holding 512 MiB of whitespace (1,083 MB peak). Refused by the
    member's stated size before a byte is unzipped; the limit is scaled down here."""
    from hermes.memory.sessions import chat_exports

    monkeypatch.setattr(chat_exports, "MAX_EXPORT_BYTES", 1024 * 1024)
    bomb = tmp_path / "export.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", "[" + " " * (3 * 1024 * 1024) + "]")
    assert bomb.stat().st_size < 10_000
    result = cli("sessions", "import", str(bomb), "--format", "chatgpt")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: export.zip (conversations.json): 3 MiB of conversations is over the import "
        "limit of 1 MiB; nothing was imported.")
    plain = tmp_path / "conversations.json"
    plain.write_text("[" + " " * (2 * 1024 * 1024) + "]", encoding="utf-8")
    result = cli("sessions", "import", str(plain), "--format", "chatgpt")
    assert result.exit_code == 1 and "over the import limit of 1 MiB" in result.stderr
    assert rt.memory.sessions.list_sessions("owner") == []


def test_a_damaged_member_of_the_zip_is_one_line(cli, rt, tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps(chatgpt_export()) * 20)
    data = bytearray(archive.read_bytes())
    start = data.index(b"conversations.json") + len("conversations.json")
    for offset in range(start + 40, start + 140):   # inside the deflated stream
        data[offset] ^= 0x5A
    archive.write_bytes(bytes(data))
    result = cli("sessions", "import", str(archive), "--format", "chatgpt")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: export.zip: cannot read the zip (")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert rt.memory.sessions.list_sessions("owner") == []


def test_a_zip_cut_short_is_said_to_be_one(cli, rt, tmp_path):
    """A download cut in half has a zip's start but not its directory: it was read as JSON and
    said "not valid JSON ... looks like JSON Lines: leave out --format" (review rev4)."""
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps(chatgpt_export()) * 20)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    result = cli("sessions", "import", str(archive), "--format", "chatgpt")
    assert (result.exit_code, result.stderr) == (1, (
        "Error: export.zip: a zip cut short or damaged (its directory at the end is missing); "
        "download the export again. Nothing was imported.\n"))
    guessed = cli("sessions", "import", str(archive))
    assert guessed.exit_code == 1 and "looks like a ChatGPT or Claude export" in guessed.stderr
    assert rt.memory.sessions.list_sessions("owner") == []


def test_a_lone_surrogate_in_a_chatgpt_message_keeps_its_conversation(rt, tmp_path):
    """Half an emoji ("\\ud83e") made the whole conversation unstorable; the JSONL importer
    already kept it with U+FFFD in its place."""
    raw = json.dumps(chatgpt_export()).replace("My tomatoes", "My \\ud83e tomatoes", 1)
    path = tmp_path / "conversations.json"
    path.write_text(raw, encoding="utf-8")
    report = import_export(rt.memory.sessions, "owner", load_export(path), "chatgpt")
    assert not any("could not be stored" in why for _, why in report.errors)
    texts = [m.content for s in rt.memory.sessions.list_sessions("owner")
             for m in rt.memory.sessions.messages("owner", s.id)]
    assert any(t.startswith("My \ufffd tomatoes") for t in texts)


def test_bytes_that_are_not_utf8_are_read_as_u_fffd_and_said_in_one_line(cli, rt, tmp_path):
    """Review item 9: an import file with bytes that are not UTF-8 is imported (nothing lost:
    each such sequence becomes U+FFFD), and the command says so in one line: which lines (a
    transcript) or how many sequences (a data export). A U+FFFD the file spelt itself is not
    counted; a clean file gets no note."""
    def transcript(said: bytes) -> bytes:
        head = json.dumps({"source": "import", "title": "T", "started_at":
                           "2025-11-24T16:00:00Z", "messages": [{"role": "user", "content":
                                                                 "PLACEHOLDER", "created_at":
                                                                 "2025-11-24T16:00:00Z"}]})
        return head.replace("PLACEHOLDER", "{}").encode().replace(b"{}", said, 1)

    path = tmp_path / "notes.jsonl"
    path.write_bytes(b"\n".join([
        transcript("caf\u00e9 au lait \ufffd as written".encode()),
        transcript(b"the tomato \xff\xfe seeds and \xe9t\xe9"),
        transcript(b"fine"),
        transcript(b"\xc3 half a letter"),
    ]) + b"\n")
    result = cli("sessions", "import", str(path))
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "not UTF-8" in line]
    assert notes == ["Note: 2 line(s) of notes.jsonl held bytes that are not UTF-8 (line 2, 4): "
                     "each such sequence (5 in all) was read as U+FFFD (\ufffd) and imported "
                     "with the rest of its line."]
    said = {m.content for s in rt.memory.sessions.list_sessions("owner")
            for m in rt.memory.sessions.messages("owner", s.id)}
    assert "the tomato \ufffd\ufffd seeds and \ufffdt\ufffd" in said
    assert "caf\u00e9 au lait \ufffd as written" in said  # (spelt by the file: not counted)

    export = tmp_path / "conversations.json"
    conversation = {"uuid": "c-1", "name": "Garden", "created_at": "2025-11-24T16:00:00Z",
                    "chat_messages": [{"uuid": "m-1", "sender": "human", "text": "PLACE",
                                       "created_at": "2025-11-24T16:00:00Z"}]}
    export.write_bytes(json.dumps([conversation]).encode().replace(b"PLACE", b"peas \x80 here"))
    result = cli("sessions", "import", str(export), "--format", "claude")
    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "not UTF-8" in line] == [
        "Note: conversations.json held 1 byte sequence(s) that are not UTF-8: each was read as "
        "U+FFFD (\ufffd) and imported with the rest."]
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(transcript("all good \u00e9".encode()) + b"\n")
    assert "not UTF-8" not in cli("sessions", "import", str(clean)).stderr


# -- issue 30: an export is read a conversation at a time ------------------------------------------

STREAMED = [
    json.dumps(chatgpt_export()), json.dumps(claude_export(), indent=2, ensure_ascii=False),
    '\ufeff [ 1 , 2.50e3 ,NaN,-Infinity, "a\\ud83eb", {"a":1,"a":2}, [], {} ,"\u00e9\u2603" ]',
    '{"meta": [1, "x\\"]"], "conversations": [{"a": 1}, 12345678901234567890, 1e400], "z": 0}',
    "[1.0, -0.0, 0.1]", "\n[\n]\n", '[{"text": "' + "a long string " * 30 + '"}, 2]',
]
BROKEN = ["[{", "[1,]", "[1 2]", '{"conversations": [1], }', "[1] x", "", "  ", '{"a" 1}',
          '[\n\n  {"a": tru}]', '["abc', '[1,\n2,\n{"x":\n  "y" z}]']


@pytest.mark.parametrize("window", [1, 3, 7, 4096])
def test_an_export_streamed_in_any_window_is_what_json_loads_reads(tmp_path, monkeypatch, window):
    """Each conversation is decoded by json itself from a window of the text: the same values
    (floats, NaN, lone surrogates, duplicate keys) and the same errors, at the same line and
    column, as json.loads of the whole file, wherever the window's edges fall."""
    monkeypatch.setattr(chat_exports, "_CHUNK", window)
    path = tmp_path / "conversations.json"
    for text in STREAMED:
        path.write_text(text, encoding="utf-8")
        whole = json.loads(text.lstrip("\ufeff"))
        whole = whole["conversations"] if isinstance(whole, dict) else whole
        assert json.dumps(load_export(path)) == json.dumps(whole), text
    for text in BROKEN:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(json.JSONDecodeError) as expected:
            json.loads(text)
        exc = expected.value
        with pytest.raises(ExportError) as got:
            load_export(path)
        assert str(got.value) == (f"conversations.json: not valid JSON ({exc.msg} at line "
                                  f"{exc.lineno}, column {exc.colno}).")
    path.write_text('{"conversations": "none"}', encoding="utf-8")
    with pytest.raises(ExportError, match="expected a JSON list of conversations"):
        load_export(path)


def test_a_streamed_import_stores_what_the_whole_list_stored(cli, rt, tmp_path, monkeypatch):
    """The rows of an export streamed through the command equal those of the same export
    imported from json.loads's list, column for column (but the user)."""
    monkeypatch.setattr(chat_exports, "_CHUNK", 5)
    for fmt, export in (("chatgpt", chatgpt_export()), ("claude", claude_export())):
        path = write(tmp_path, export, f"{fmt}.json")
        cli("sessions", "import", str(path), "--format", fmt)
        import_export(rt.memory.sessions, "whole", json.loads(path.read_text()), fmt)

    def rows(user):
        sessions = rt.db.execute("SELECT * FROM sessions WHERE user = ? ORDER BY id",
                                 [user]).fetchall()
        messages = rt.db.execute("SELECT * FROM messages WHERE user = ? ORDER BY id",
                                 [user]).fetchall()
        # (ids differ by how many rows came first; the rest must not)
        return [r[2:] for r in sessions], [r[3:] for r in messages]

    streamed, whole = rows("owner"), rows("whole")
    assert len(streamed[0]) == 3 and len(streamed[1]) == 8
    assert streamed == whole


def test_a_file_broken_after_its_first_conversations_imports_nothing(cli, rt, tmp_path):
    """The whole file is checked before the first conversation is written: a download cut
    short is one line, and nothing of it is imported (not its first conversations)."""
    from hermes.memory.sessions.transcripts import IMPORT_BATCH

    text = json.dumps([{**claude_export()[0], "uuid": f"c-{n}"} for n in range(IMPORT_BATCH + 2)])
    path = tmp_path / "conversations.json"
    path.write_text(text[:-30], encoding="utf-8")
    result = cli("sessions", "import", str(path), "--format", "claude")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: conversations.json: not valid JSON (")
    assert rt.memory.sessions.list_sessions("owner") == []


def test_one_huge_message_refuses_its_conversation_by_name_and_the_rest_imports(
        cli, rt, tmp_path):
    """Issue 30: the secret screen needs several times a text in memory, so a message over
    MAX_IMPORT_MESSAGE_CHARS refuses its conversation (one line naming it); a 2 MB attachment,
    as a Claude export holds, is under it and imports."""
    from hermes.memory.sessions.transcripts import MAX_IMPORT_MESSAGE_CHARS

    export = claude_export()[:1]
    export[0]["chat_messages"][0]["attachments"][0]["extracted_content"] = \
        "Flight TP123 at 09:40\n" + "seat 12A " * (2_000_000 // 9)
    huge = {"uuid": "c-huge", "name": "The log I pasted", "created_at": "2025-10-05T08:00:00Z",
            "chat_messages": [
                {"uuid": "h-1", "sender": "human", "text": "see below",
                 "created_at": "2025-10-05T08:00:00Z"},
                {"uuid": "h-2", "sender": "human", "text": "x" * (MAX_IMPORT_MESSAGE_CHARS + 1),
                 "created_at": "2025-10-05T08:01:00Z"}]}
    path = write(tmp_path, [huge, *export])
    result = cli("sessions", "import", str(path), "--format", "claude")
    assert result.exit_code == 1
    refused = [line for line in result.stderr.splitlines() if "over the import limit" in line]
    assert refused == [
        f"  conversation 1: 'The log I pasted': message 2 of 2 is "
        f"{MAX_IMPORT_MESSAGE_CHARS + 1:,} characters, over the import limit of "
        f"{MAX_IMPORT_MESSAGE_CHARS:,} a message; none of this session was imported."]
    store = rt.memory.sessions
    [session] = store.list_sessions("owner")
    assert session.external_id == "claude:c-1"
    assert len(store.messages("owner", session.id)[0].content) > 2_000_000
    assert rt.db.execute("SELECT count(*) FROM messages WHERE content = 'see below'"
                         ).fetchone()[0] == 0
