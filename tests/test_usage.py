"""What a conversation costs: model calls counted per user and source, cache marks for Claude."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from hermes.agent.turn import Agent
from hermes.clock import to_ts
from hermes.config import load_settings
from hermes.runtime import Runtime
from hermes.store import usage
from tests.fakellm import FakeRequest, set_context_window


def caching_usage(request: FakeRequest) -> dict[str, Any]:
    """Like a caching provider: 100 tokens per message, the first two served from the cache."""
    prompt = 100 * len(request.messages)
    return {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7,
            "prompt_tokens_details": {"cached_tokens": 200}}


def test_a_turn_is_counted_and_shown_by_stats(cli, fake_model):
    fake_model.usage_for = caching_usage
    fake_model.reply("Hello.")
    assert cli("ask", "hi there").exit_code == 0
    data = cli("stats", "--json").json()["model_usage"]
    chat = data["sources"]["chat"]
    assert chat["calls"] == 1 and chat["prompt_tokens"] == 200 and chat["cached_tokens"] == 200
    assert chat["cached_share"] == 1.0 and chat["completion_tokens"] == 7
    assert data["total"]["calls"] == 1
    shown = cli("stats")
    assert "Model calls for owner" in shown.stdout and "chat" in shown.stdout
    assert "100%" in shown.stdout
    # scoped to the user
    assert cli("stats", "--user", "bob", "--json").json()["model_usage"]["sources"] == {}


def test_since_limits_the_period(cli, rt):
    call = usage.Call("fake/scripted", 1000, 800, None, 10, 0.01)
    usage.record(rt.db, call, "2026-01-01T00:00:00.000000Z", usage.Scope("owner", "chat"))
    usage.record(rt.db, call, to_ts(rt.clock.now()), usage.Scope("owner", "extraction"))
    usage.record(rt.db, call, to_ts(rt.clock.now()), usage.Scope("bob", "chat"))
    everything = cli("stats", "--json").json()["model_usage"]
    assert set(everything["sources"]) == {"chat", "extraction"}
    assert everything["total"]["cost"] == pytest.approx(0.02)
    recent = cli("stats", "--since", "7d", "--json").json()["model_usage"]
    assert set(recent["sources"]) == {"extraction"} and recent["since"]
    assert cli("stats", "--since", "soon").exit_code != 0


async def test_a_model_that_reports_no_usage_still_works(fake_model, rt):
    fake_model.usage_for = lambda request: None
    fake_model.reply("Fine.")
    session = rt.memory.sessions.create("owner", "terminal")
    result = await Agent(rt.memory).turn("owner", session.id, "hello").run()
    assert result.text == "Fine." and result.error is None
    totals = usage.totals(rt.db, "owner")
    assert [s.source for s in totals.sources] == ["chat"] and totals.total.calls == 1


async def test_a_compression_is_counted_as_its_own_source(fake_model, rt):
    set_context_window(3000)
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    for i in range(40):
        store.append("owner", session.id, "user" if i % 2 == 0 else "assistant",
                     f"message {i}: " + "a long sentence about the home network " * 8)
    fake_model.reply("Earlier: networks.").reply("ok")
    result = await Agent(rt.memory).turn("owner", session.id, "and now?").run()
    assert result.compressed
    sources = {s.source: s.calls for s in usage.totals(rt.db, "owner").sources}
    assert sources == {"chat": 1, "compression": 1}


# -- cache_control, as litellm sends it over HTTP ----------------------------------------------

def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        body = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {body}\n\n")
    return "".join(out).encode()


ANTHROPIC_STREAM = _sse([
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 12, "cache_read_input_tokens": 3000,
                  "cache_creation_input_tokens": 40, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "Hi."}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 3}}),
    ("message_stop", {"type": "message_stop"}),
])

ANTHROPIC_MESSAGE = {
    "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "The user said hello several times."}],
    "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 900, "output_tokens": 9}}

OPENAI_STREAM = _sse([
    (None, {"id": "c1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {
                "role": "assistant", "content": "Hi."}, "finish_reason": None}]}),
    (None, {"id": "c1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {},
                                                  "finish_reason": "stop"}]}),
    (None, {"id": "c1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4.1-mini", "choices": [], "usage": {
                "prompt_tokens": 3052, "completion_tokens": 3, "total_tokens": 3055,
                "prompt_tokens_details": {"cached_tokens": 3000}}}),
    (None, "[DONE]"),
])


@pytest.fixture
def provider(monkeypatch):
    """The provider's HTTP endpoint, below litellm: records each request body, streams back."""
    from hermes.agent.llm import load_litellm

    load_litellm()
    bodies: list[dict[str, Any]] = []

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        bodies.append(body)
        if "anthropic" in str(request.url) and not body.get("stream"):
            return httpx.Response(200, json=ANTHROPIC_MESSAGE, request=request)
        stream = ANTHROPIC_STREAM if "anthropic" in str(request.url) else OPENAI_STREAM
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=stream, request=request)

    monkeypatch.setattr(httpx.AsyncClient, "send", send)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return bodies


def _marks(value: Any) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(_marks(v) for v in value)
    return 0


async def _two_turns(model: str, clock, monkeypatch, cache: str = "auto") -> Runtime:
    monkeypatch.setenv("HERMES_MODEL__NAME", model)
    monkeypatch.setenv("HERMES_MODEL__PROMPT_CACHE", cache)
    rt = Runtime(load_settings(), clock=clock)
    agent = Agent(rt.memory)
    session = rt.memory.sessions.create("owner", "terminal")
    for text in ("hello", "and again"):
        result = await agent.turn("owner", session.id, text).run()
        assert result.error is None and result.text == "Hi.", result.error
    return rt


async def test_claude_requests_carry_cache_marks(provider, clock, monkeypatch):
    rt = await _two_turns("anthropic/claude-sonnet-4-5", clock, monkeypatch)
    first, second = provider
    # The front is two marked blocks: the persona (the same for every session, so a new
    # session reads the tools and the persona from the cache) and the rest of the front. The
    # newest message is marked; later also the previous request's last user message, where
    # the cache written then is read. Anthropic takes at most four marks.
    persona, rest = first["system"]
    assert persona["text"].startswith("<persona>") and persona["text"].endswith("</persona>")
    assert rest["text"].startswith("\n\n<basic_memory>")
    # (the conversation's first request: entries of an hour; the next, right after: 5 minutes)
    assert persona["cache_control"] == rest["cache_control"] == {"type": "ephemeral",
                                                                 "ttl": "1h"}
    assert _marks(first["messages"][-1]) == 1
    assert _marks(second) == 4 and _marks(second["messages"][0]) == 1
    assert [b["text"] for b in second["system"]] == [persona["text"], rest["text"]]
    assert second["system"][0]["cache_control"] == {"type": "ephemeral"}
    calls = usage.totals(rt.db, "owner").sources[0]
    assert calls.cached_tokens == 6000 and calls.cache_write_tokens == 80
    rt.close()


def _ttls(value: Any) -> set[str]:
    """The lifetimes of the cache marks in a request body (Anthropic's default: 5m)."""
    if isinstance(value, dict):
        own = {value["cache_control"].get("ttl", "5m")} if "cache_control" in value else set()
        return own.union(*(_ttls(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_ttls(v) for v in value))
    return set()


@pytest.mark.parametrize(("setting", "expected"), [
    ("auto", ["1h", "5m", "1h", "5m"]), ("5m", ["5m"] * 4), ("1h", ["1h"] * 4)])
async def test_cache_entries_live_an_hour_after_a_pause(provider, clock, monkeypatch, setting,
                                                        expected):
    # auto: a conversation's first request, and its first after a pause of five minutes or
    # more, write entries of an hour (2x once, then read by every message within the hour);
    # quick turns write five-minute ones (1.25x)
    monkeypatch.setenv("HERMES_MODEL__NAME", "anthropic/claude-sonnet-4-5")
    monkeypatch.setenv("HERMES_MODEL__PROMPT_CACHE", setting)
    rt = Runtime(load_settings(), clock=clock)
    agent = Agent(rt.memory)
    session = rt.memory.sessions.create("owner", "terminal")
    for minutes in (0, 2, 6, 4):   # the wait before each turn
        clock.advance(minutes=minutes)
        assert (await agent.turn("owner", session.id, "hello").run()).error is None
    assert [_ttls(body) for body in provider] == [{ttl} for ttl in expected]
    rt.close()


async def test_a_compression_summary_is_sent_without_marks(provider, clock, monkeypatch):
    # Sent once, so a mark would only cost (a cache write is 1.25x the input price).
    monkeypatch.setenv("HERMES_MODEL__NAME", "anthropic/claude-sonnet-4-5")
    monkeypatch.setenv("HERMES_AGENT__COMPRESS_AT", "0.005")   # 1,000 of 200k tokens
    rt = Runtime(load_settings(), clock=clock)
    agent = Agent(rt.memory)
    session = rt.memory.sessions.create("owner", "terminal")
    # over the budget from the second turn on; the third is the first with an older turn to
    # fold (fewer than keep_recent messages over budget: fewer are kept), and each turn after
    # it is over again
    results = [await agent.turn("owner", session.id, f"hello {n} " + "and more " * 60).run()
               for n in range(5)]
    assert all(r.error is None for r in results), results
    assert [r.compressed for r in results] == [False, False, True, True, True]
    summary = [b for b in provider if not b.get("stream")]
    assert summary and all("Condense" in str(b["system"]) for b in summary)
    assert _marks(summary) == 0
    assert _marks(provider[-1]) == 4   # the chat request after it is marked as always
    # and goes on at the conversation's pace: turns a moment apart, five-minute entries
    assert _ttls(provider[-1]) == {"5m"}
    rt.close()


async def test_openai_requests_carry_no_marks(provider, clock, monkeypatch):
    rt = await _two_turns("openai/gpt-4.1-mini", clock, monkeypatch)
    assert len(provider) == 2 and _marks(provider) == 0
    assert provider[0]["stream_options"] == {"include_usage": True}
    calls = usage.totals(rt.db, "owner").sources[0]
    assert calls.prompt_tokens == 2 * 3052 and calls.cached_tokens == 6000
    rt.close()


async def test_prompt_cache_off_sends_no_marks(provider, clock, monkeypatch):
    rt = await _two_turns("anthropic/claude-sonnet-4-5", clock, monkeypatch, cache="off")
    assert _marks(provider) == 0
    rt.close()


async def test_extraction_is_counted_for_its_user(fake_model, rt):
    from hermes.learn.worker import ExtractionWorker

    fake_model.usage_for = caching_usage
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    store.append("owner", session.id, "user", "I moved to Lisbon in March.")
    store.append("owner", session.id, "assistant", "Noted!")
    fake_model.reply(json.dumps([{"action": "create", "content": "The user lives in Lisbon.",
                                  "type": "semantic", "category": "general", "entities": [],
                                  "tags": []}]))
    worker = ExtractionWorker(rt.memory)
    run = await worker.run_session("owner", session.id)
    await worker.drain()
    assert run.status == "done"
    (extraction,) = usage.totals(rt.db, "owner").sources
    assert (extraction.source, extraction.calls, extraction.cached_tokens) == ("extraction", 1,
                                                                               200)
    assert usage.totals(rt.db, "bob").sources == []
