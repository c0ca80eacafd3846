"""Hostile or unusual input never crashes and never loses the rest (issue 11, part 2).

Long CJK or pasted pages (the query plan is bounded for every language), lone surrogates and
bytes that are not UTF-8 at every edge, deeply nested JSON, a query that starts with "-".
"""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from hermes.agent.llm import ToolCall
from hermes.learn.parse import ParseError, parse_actions
from hermes.memory.sessions.transcripts import import_sessions
from hermes.store import fts
from hermes.store.fts import build_match

KANA = "日本語東京大阪漢字ひらがなカタカナ"


def japanese(runs: int, seed: int = 1) -> str:
    """``runs`` CJK runs split by 、 (about 9,000 characters for 2,200 runs)."""
    rng = random.Random(seed)
    return "、".join("".join(rng.choice(KANA) for _ in range(3)) for _ in range(runs))


def words(count: int) -> str:
    return " ".join(f"word{i}" for i in range(count))


# -- the query plan is bounded -------------------------------------------------------------------

def test_the_plan_is_bounded_for_every_language_and_says_so():
    cut = build_match(japanese(2200))
    assert len(cut.cjk) == fts.MAX_CJK_RUNS + fts.MAX_CJK_BIGRAMS and "CJK runs" in cut.notes[0]
    many = build_match(words(3000))
    assert len(many.terms) == fts.MAX_TERMS and "64 of its 3000 words" in many.notes[0]
    phrase = build_match('"' + words(500) + '"')
    assert len(phrase.terms[0].tokens) == fts.MAX_PHRASE_TOKENS
    assert build_match("a normal question").notes == []


def test_content_words_are_kept_before_stopwords_when_cutting():
    plan = build_match(" ".join(["the"] * 1 + [f"w{i}" for i in range(100)] + ["and", "of"]))
    assert all(not t.is_stopword for t in plan.terms)


def test_long_cjk_and_long_text_search_facts_and_sessions_without_error(rt):
    facts = rt.memory.facts
    facts.add("owner", "東京 is where the office is", entities=["Tokyo"])
    facts.add("owner", "word5 is a stored word")
    sessions = rt.memory.sessions
    session = sessions.create("owner", "terminal")
    sessions.append("owner", session.id, "user", "東京 に 行きます word7")
    text = "東京、" + japanese(2200)
    assert [f.content for f in facts.search("owner", text, limit=5)] == [
        "東京 is where the office is"]
    assert sessions.search("owner", text)[0].session.id == session.id
    assert sessions.search_messages("owner", text)
    assert facts.search("owner", words(3000), limit=5)[0].content == "word5 is a stored word"
    assert sessions.search("owner", words(3000))[0].session.id == session.id


def test_a_cjk_word_inside_a_clause_is_found(rt):
    """"東京タワーに行きたい" is one CJK run: its bigrams find "東京タワー" (it was a silent
    empty: LIKE '%東京タワーに行きたい%' matches nothing)."""
    facts = rt.memory.facts
    facts.add("owner", "東京タワー is 333 m tall", entities=["Tokyo Tower"])
    facts.add("owner", "大阪城 is in Osaka", entities=["Osaka"])
    sessions = rt.memory.sessions
    session = sessions.create("owner", "terminal")
    sessions.append("owner", session.id, "user", "北京烤鸭 was great")
    assert [f.content for f in facts.search("owner", "東京タワーに行きたい", limit=3)][:1] == [
        "東京タワー is 333 m tall"]
    assert sessions.search("owner", "北京烤鸭怎么走")[0].session.id == session.id
    assert facts.search("owner", "東京タワー", limit=3)[0].content.startswith("東京タワー")


def test_ask_on_nine_thousand_characters_of_japanese_answers_and_records(cli, fake_model):
    cli("facts", "add", "東京 の 事務所")
    fake_model.reply("はい。")
    fake_model.reply("[]")  # extraction
    question = "東京、" + japanese(2300)
    assert len(question) > 9000
    result = cli("ask", question)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("はい。")
    # per-turn recall ran on the bounded plan and found the stored fact
    sent = json.dumps(fake_model.requests[0].messages, ensure_ascii=False)
    assert "東京 の 事務所" in sent


def test_cli_search_of_a_pasted_page_notes_the_cut_and_echoes_only_its_start(cli):
    result = cli("sessions", "search", words(3000))
    assert result.exit_code == 0
    assert "Note: the query was cut to 64 of its 3000 words." in result.stderr
    assert len(result.stdout) < 200
    facts = cli("facts", "search", japanese(2000))
    assert facts.exit_code == 0 and "CJK runs" in facts.stderr


# -- lone surrogates and bytes that are not UTF-8 --------------------------------------------

def test_command_line_arguments_that_are_not_utf8_are_replaced_never_a_crash(cli):
    # `hermes facts add $'do\xffcker runs on Atlas'`: Python hands the byte over as \udcff.
    added = cli("facts", "add", "do\udcffcker runs on Atlas", "--json")
    assert added.exit_code == 0, added.stderr
    assert cli("facts", "probe", "do\udcffcker").exit_code == 0
    assert cli("facts", "reason", "do\udcffcker", "Atlas").exit_code == 0
    assert cli("facts", "search", "do\udcffcker").exit_code == 0
    assert cli("memory", "add", "likes caf\udce9").exit_code == 0
    shown = cli("memory", "show", "--json").json()
    assert "likes caf\ufffd" in json.dumps(shown, ensure_ascii=False)
    fact = cli("facts", "show", str(added.json()["id"]), "--json").json()
    assert fact["content"] == "do\ufffdcker runs on Atlas"


def test_chat_fed_latin1_keeps_every_line(fake_model):
    from hermes.cli import app

    fake_model.reply("one").reply("two")
    result = CliRunner().invoke(app, ["chat"], input="caf\xe9 au lait\nsecond line\n".encode(
        "latin-1"), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["one", "two"]
    from hermes.agent.prompt import without_tail

    sent = [without_tail(m["content"]) for m in fake_model.requests[1].messages
            if m["role"] == "user"]
    assert sent == ["caf\ufffd au lait", "second line"]


async def test_a_reply_with_half_an_emoji_is_recorded(fake_model, clock):
    from hermes.agent.turn import Agent
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    fake_model.reply("Sure \ud83e thing", chunk_size=100)
    rt = Runtime(load_settings(), clock=clock)
    sessions = rt.memory.sessions
    session = sessions.create("owner", "terminal")
    result = await Agent(rt.memory).turn("owner", session.id, "hi").run()
    stored = [m.content for m in sessions.messages("owner", session.id)]
    rt.close()
    assert result.error is None
    assert stored == ["hi", "Sure \ufffd thing"]


def test_search_probe_and_reason_take_lone_surrogates_from_any_caller(rt):
    """The CLI scrubs its arguments; the tools, the MCP server and the web panel call the
    stores directly with whatever JSON decoded to."""
    facts = rt.memory.facts
    facts.add("owner", "Atlas runs on kumquat hosts", entities=["Atlas", "Kumquat"])
    assert facts.probe("owner", "\ud800 Atlas") == []
    assert facts.reason("owner", ["Atlas\udfff", "Kumquat"]).unknown == ["Atlas\ufffd"]
    assert facts.search("owner", "\ud83e kumquat", limit=3)
    sessions = rt.memory.sessions
    assert sessions.search("owner", "\ud800 kumquat") == []
    assert sessions.search_messages("owner", "kumquat \udfff") == []


def test_a_message_with_a_lone_surrogate_is_stored_with_the_rest(rt):
    sessions = rt.memory.sessions
    session = sessions.create("owner", "terminal")
    message = sessions.append("owner", session.id, "user", "a \ud800 b", speaker="x\udfff")
    assert message.content == "a \ufffd b"
    assert sessions.messages("owner", session.id)[0].speaker == "x\ufffd"


def test_an_extraction_output_with_a_surrogate_escape_keeps_its_actions():
    raw = json.dumps([{"action": "create", "content": "Likes \ud800 tea", "entities": ["T\ud800"]},
                      {"action": "create", "content": "Lives in Porto"}])
    actions = parse_actions(raw).actions
    assert [a.content for a in actions] == ["Likes \ufffd tea", "Lives in Porto"]
    assert actions[0].entities == ("T\ufffd",)


# -- deeply nested JSON -----------------------------------------------------------------------

def test_nested_json_in_a_sessions_import_rejects_that_line_and_keeps_the_rest(rt):
    store = rt.memory.sessions
    good = [json.dumps({"source": "terminal", "started_at": "2026-11-01T00:00:00Z",
                        "external_id": f"s{i}", "messages": [
                            {"role": "user", "content": f"hello {i}",
                             "created_at": "2026-11-01T00:00:01Z"}]}) for i in range(3)]
    report = import_sessions(store, "owner", [good[0], "[" * 50_000, good[1], good[2]])
    assert report.sessions_created == 3 and report.messages_added == 3
    assert report.errors == [(2, "JSON nested too deeply to read")]


def test_nested_json_in_an_export_is_one_line_naming_it(cli, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"hermes-export","version":1,"user":"owner"}\n' + "[" * 50_000
                    + "\n", encoding="utf-8")
    result = cli("import", str(path))
    assert result.exit_code != 0 and "line 2" in result.stderr and "nested" in result.stderr
    assert "Traceback" not in result.stderr


def test_nested_tool_call_arguments_are_an_error_for_the_model():
    with pytest.raises(ValueError, match="nested too deeply"):
        ToolCall("c1", "facts", '{"a":' + "[" * 50_000 + "}").args()
    assert ToolCall("c1", "facts", '{"query": "x\\ud83e"}').args() == {"query": "x\ufffd"}


def test_nested_extraction_output_fails_the_run_quickly_with_its_reason():
    with pytest.raises(ParseError, match="deeper than"):
        parse_actions("[" * 50_000)
    with pytest.raises(ParseError, match="deeper than"):
        parse_actions("[" * 50_000 + "]" * 50_000)
    # brackets inside a string do not count
    assert parse_actions('[{"action": "create", "content": "a [[[[[[[[ b"}]').actions


# -- a query that starts with "-" -------------------------------------------------------------

def test_a_query_starting_with_a_dash_says_to_use_double_dash(cli):
    from hermes.cli import app

    result = CliRunner().invoke(app, ["facts", "search", "-x"], prog_name="hermes")
    assert result.exit_code == 2
    flat = " ".join(result.output.replace("│", " ").split())  # the error box wraps the line
    assert "put -- before it: `hermes facts search -- -x`" in flat
    assert cli("facts", "search", "--", "-x").exit_code == 0
    assert cli("sessions", "search", "--", "-docker").exit_code == 0


def test_the_double_dash_hint_quotes_the_whole_word(cli):
    from hermes.cli import app

    # Click reports only '-V' of '-Vaultwarden*'; the hint must give back what was typed.
    result = CliRunner().invoke(app, ["facts", "probe", "-Vaultwarden*"], prog_name="hermes")
    assert result.exit_code == 2
    flat = " ".join(result.output.replace("│", " ").split())
    assert "`hermes facts probe -- '-Vaultwarden*'`" in flat


def test_memory_edit_saved_as_latin1_keeps_every_entry(cli, tmp_path, monkeypatch):
    import sys
    import textwrap

    cli("memory", "add", "Keep me")
    script = tmp_path / "latin1_editor.py"
    script.write_text(textwrap.dedent("""
        import sys
        with open(sys.argv[1], "ab") as handle:
            handle.write("Likes caf\\u00e9\\n".encode("latin-1"))
    """))
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    result = cli("memory", "edit")
    assert result.exit_code == 0, result.stderr
    texts = [e["text"] for e in cli("memory", "show", "--json").json()["entries"]]
    assert texts == ["Keep me", "Likes caf\ufffd"]


def test_a_latin1_persona_or_context_file_never_fails_the_prompt(rt, tmp_path, config_file):
    from hermes.memory import context

    path = context.path_for(rt, "owner")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("Notes about caf\xe9 visits\n".encode("latin-1"))
    assert context.read(rt, "owner") == "Notes about caf\ufffd visits\n"
    persona = tmp_path / "persona.md"
    persona.write_bytes("You are Herm\xe8s.".encode("latin-1"))
    config_file.write_text(f"agent:\n  persona_file: {persona}\n", encoding="utf-8")
    from hermes.agent.prompt import PromptBuilder
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    other = Runtime(load_settings())
    try:
        assert PromptBuilder(other.memory).persona() == "You are Herm\ufffds."
    finally:
        other.close()


async def test_an_extraction_run_whose_output_holds_a_lone_surrogate_is_kept(fake_model, clock):
    from hermes.config import load_settings
    from hermes.learn.worker import ExtractionWorker
    from hermes.runtime import Runtime

    rt = Runtime(load_settings(), clock=clock)
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    store.append("owner", session.id, "user", "My sister Ana Costa just moved to Lisbon.")
    store.append("owner", session.id, "assistant", "How exciting!")
    # a raw lone surrogate in the text (not an escape), and an escaped one
    fake_model.reply('[{"action": "create", "content": "Ana Costa moved to Lisbon \ud800", '
                     '"entities": ["Ana Costa"]}, {"action": "create", "content": '
                     '"Ana Costa is the sister \\udfff of the user"}]')
    run = await ExtractionWorker(rt.memory).run_session("owner", session.id)
    contents = sorted(f.content for f in rt.memory.facts.probe("owner", "Ana Costa"))
    rt.close()
    assert (run.status, run.created) == ("done", 2)
    assert contents == ["Ana Costa is the sister \ufffd of the user",
                        "Ana Costa moved to Lisbon \ufffd"]


async def test_a_tool_call_with_nested_arguments_goes_back_to_the_model(fake_model, clock):
    from hermes.agent.turn import Agent
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    rt = Runtime(load_settings(), clock=clock)
    # in 50 pieces (8 characters each were 6,250 chunks through litellm's stream wrapper)
    fake_model.tool_call("facts", "[" * 50_000, chunk_size=1000)
    fake_model.reply("Sorry, let me answer directly.")
    session = rt.memory.sessions.create("owner", "terminal")
    result = await Agent(rt.memory).turn("owner", session.id, "what do you know?").run()
    sent = json.dumps(fake_model.requests[1].messages)
    rt.close()
    assert result.error is None and result.text == "Sorry, let me answer directly."
    assert "nested too deeply" in sent
