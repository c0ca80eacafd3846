"""The model layer, through litellm with the scripted provider behind it."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from hermes.agent.llm import (
    LLM,
    ContextTooLong,
    ModelNotConfigured,
    ModelUnavailable,
    load_env_file,
)
from hermes.config import ModelConfig, load_settings
from tests.fakellm import (
    bad_request,
    context_window_exceeded,
    http_error,
    internal_server,
    rate_limit,
    service_unavailable,
)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "facts", "description": "d",
                                            "parameters": {"type": "object", "properties": {}}}}]


def make_llm(fake_model, **config) -> LLM:
    return LLM.from_settings(load_settings().model_copy(
        update={"model": ModelConfig(name="fake/scripted", **config)}))


async def collect(llm: LLM, messages=MESSAGES, tools=None):
    texts, final = [], None
    async for chunk in llm.stream(messages, tools):
        if chunk.final:
            final = chunk.final
        else:
            texts.append(chunk.text)
    return texts, final


async def test_stream_yields_text_chunks_then_the_completion(fake_model):
    fake_model.reply("Hello there, world", chunk_size=5)
    texts, final = await collect(make_llm(fake_model, temperature=0.2))
    assert len(texts) > 1 and "".join(texts) == "Hello there, world"
    assert final.text == "Hello there, world" and final.tool_calls == []
    assert final.prompt_tokens == 10 and final.completion_tokens == 5
    request = fake_model.last
    assert request.stream and request.messages == MESSAGES
    assert request.optional_params["temperature"] == 0.2


async def test_stream_assembles_tool_calls_from_fragments(fake_model):
    fake_model.tool_calls(("facts", {"action": "search", "query": "postgres version"}),
                          ("memory", {"action": "add", "text": "x"}), text="Checking.")
    texts, final = await collect(make_llm(fake_model), tools=TOOLS)
    assert "".join(texts) == "Checking."
    assert [c.name for c in final.tool_calls] == ["facts", "memory"]
    assert final.tool_calls[0].args() == {"action": "search", "query": "postgres version"}
    assert final.finish_reason == "tool_calls"
    assert fake_model.last.tool_names == ["facts"]
    message = final.assistant_message()
    assert message["tool_calls"][1]["function"]["name"] == "memory"


async def test_complete_returns_text_tool_calls_and_cost(fake_model):
    fake_model.tool_call("facts", '{"action": "probe", "entity": "Bob"}')
    result = await make_llm(fake_model).complete(MESSAGES, TOOLS)
    assert result.tool_calls[0].args() == {"action": "probe", "entity": "Bob"}
    assert result.cost == 0.0
    assert not fake_model.last.stream


async def test_rate_limits_and_server_errors_are_retried_with_backoff(fake_model):
    fake_model.error(rate_limit()).error(http_error(503)).error(internal_server()).reply("ok")
    texts, final = await collect(make_llm(fake_model, retries=3))
    assert final.text == "ok" and final.attempts == 4
    assert fake_model.sleeps == [1.0, 2.0, 4.0]
    assert len(fake_model.requests) == 4


async def test_complete_retries_too(fake_model):
    fake_model.error(service_unavailable()).reply("fine")
    result = await make_llm(fake_model).complete(MESSAGES)
    assert result.text == "fine" and fake_model.sleeps == [1.0]


async def test_a_provider_that_stays_down_is_one_clear_line(fake_model):
    for _ in range(3):
        fake_model.error(service_unavailable("upstream overloaded"))
    with pytest.raises(ModelUnavailable) as err:
        await collect(make_llm(fake_model, retries=2))
    message = str(err.value)
    assert "\n" not in message and "fake/scripted is unavailable after 3 attempts" in message
    assert "upstream overloaded" in message and err.value.retryable
    assert len(fake_model.requests) == 3 and fake_model.sleeps == [1.0, 2.0]


async def test_a_bad_request_is_not_retried(fake_model):
    fake_model.error(bad_request("unsupported parameter"))
    with pytest.raises(ModelUnavailable, match="refused the request") as err:
        await make_llm(fake_model).complete(MESSAGES)
    assert not err.value.retryable and fake_model.sleeps == []


async def test_context_window_exceeded_is_its_own_error(fake_model):
    fake_model.error(context_window_exceeded())
    with pytest.raises(ContextTooLong):
        await collect(make_llm(fake_model))
    assert fake_model.sleeps == []


async def test_a_stream_cut_off_after_text_is_not_retried(fake_model):
    fake_model.error(internal_server("reset"), partial_text="Hello wor").reply("never sent")
    llm = make_llm(fake_model)
    seen: list[str] = []
    with pytest.raises(ModelUnavailable, match="cut off"):
        async for chunk in llm.stream(MESSAGES):
            seen.append(chunk.text)
    assert "".join(seen) == "Hello wor" and fake_model.pending == 1


async def test_a_blocked_call_waits_for_the_test(fake_model):
    gate = fake_model.block()
    fake_model.reply("released")
    task = asyncio.create_task(collect(make_llm(fake_model)))
    await asyncio.wait_for(fake_model.reached.wait(), 5)
    assert not task.done()
    gate.set()
    texts, final = await asyncio.wait_for(task, 5)
    assert final.text == "released"


async def test_no_model_configured_says_what_to_set():
    llm = LLM.from_settings(load_settings())
    assert not llm.configured
    with pytest.raises(ModelNotConfigured) as err:
        await llm.complete(MESSAGES)
    message = str(err.value)
    assert "HERMES_MODEL__NAME=openai/gpt-4.1-mini" in message and "model.name" in message
    assert "OPENAI_API_KEY" in message and ".env" in message


async def test_a_missing_provider_key_says_which_variable(monkeypatch, hermes_home):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("HERMES_MODEL__NAME", "openai/gpt-4.1-mini")
    with pytest.raises(ModelNotConfigured, match="needs OPENAI_API_KEY"):
        await LLM.from_settings(load_settings()).complete(MESSAGES)


def test_keys_come_from_the_homes_env_file_without_overriding(tmp_path, monkeypatch):
    env = tmp_path / ".env"
    env.write_text("HERMES_TEST_KEY_A=from-file\nHERMES_TEST_KEY_B=from-file\n")
    monkeypatch.setenv("HERMES_TEST_KEY_B", "from-env")
    monkeypatch.delenv("HERMES_TEST_KEY_A", raising=False)
    assert load_env_file(env) == ["HERMES_TEST_KEY_A"]
    import os
    assert os.environ["HERMES_TEST_KEY_A"] == "from-file"
    assert os.environ["HERMES_TEST_KEY_B"] == "from-env"
    monkeypatch.delenv("HERMES_TEST_KEY_A")
    assert load_env_file(tmp_path / "missing.env") == []


async def test_api_base_and_timeout_reach_the_provider(fake_model):
    fake_model.reply("ok")
    await make_llm(fake_model, api_base="http://localhost:11434", timeout=12).complete(MESSAGES)
    assert fake_model.last.api_base == "http://localhost:11434"
    assert fake_model.last.timeout == 12


def test_context_window_from_model_info_or_fallback(fake_model):
    assert make_llm(fake_model).context_window() == 32768
    unknown = LLM(ModelConfig(name="openai/no-such-model-xyz", context_window_fallback=5000))
    assert unknown.context_window() == 5000
    assert make_llm(fake_model).count_tokens(MESSAGES) > 0


def test_token_counts_match_litellm_and_a_grown_conversation_counts_only_the_new_message(
        fake_model, monkeypatch):
    import litellm

    llm = make_llm(fake_model)
    tools = [{"type": "function", "function": {
        "name": "facts", "description": "Store a fact about the user.",
        "parameters": {"type": "object", "properties": {"content": {"type": "string"}}}}}]
    history = [
        {"role": "system", "content": "You are Hermes. Known: the user lives in Lisbon."},
        {"role": "user", "content": "I started at Acme Corp as a staff engineer."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "facts", "arguments": '{"content": "works at Acme"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "facts", "content": "stored #12"},
        {"role": "assistant", "content": "Congratulations on the new job! 日本語も"},
    ]
    for count in range(1, len(history) + 1):
        for with_tools in (None, tools):
            assert llm.count_tokens(history[:count], with_tools) == litellm.token_counter(
                model=llm.name, messages=history[:count], tools=with_tools)
    counted = []
    real = litellm.token_counter
    monkeypatch.setattr(litellm, "token_counter",
                        lambda **kw: counted.append(kw["messages"]) or real(**kw))
    grown = [*history, {"role": "user", "content": "And I moved to Porto last week."}]
    assert llm.count_tokens(grown, tools) == real(model=llm.name, messages=grown, tools=tools)
    assert counted == [[grown[-1]]]


async def test_a_long_message_is_counted_off_the_loop_and_then_remembered(fake_model,
                                                                        monkeypatch):
    import threading

    import litellm

    llm = make_llm(fake_model)
    llm.count_tokens(MESSAGES)  # the tokenizer loaded: later short counts stay on the loop
    where: list[tuple[int, int]] = []  # (thread, characters) of each count litellm made
    real = litellm.token_counter

    def counter(**kw):
        where.append((threading.get_ident(),
                      sum(len(str(m.get("content") or "")) for m in kw["messages"])))
        return real(**kw)

    monkeypatch.setattr(litellm, "token_counter", counter)
    loop = threading.get_ident()
    long = [*MESSAGES, {"role": "user", "content": "the seeds came from Omar. " * 800}]
    assert await llm.count_tokens_off_loop(long) == real(model=llm.name, messages=long)
    assert [thread != loop for thread, chars in where if chars > 4_000] == [True]
    where.clear()
    grown = [*long, {"role": "assistant", "content": "Noted."}]
    assert await llm.count_tokens_off_loop(grown) == real(model=llm.name, messages=grown)
    assert where == [(loop, len("Noted."))]  # the long one remembered; the new one counted here


async def test_the_first_count_loads_the_tokenizer_off_the_loop(fake_model, monkeypatch):
    import threading

    import litellm

    threads = []
    real = litellm.token_counter
    monkeypatch.setattr(litellm, "token_counter",
                        lambda **kw: threads.append(threading.get_ident()) or real(**kw))
    assert await make_llm(fake_model).count_tokens_off_loop(MESSAGES) > 0
    assert threads and threading.get_ident() not in threads


def test_importing_the_agent_layer_does_not_load_litellm():
    code = ("import sys, hermes.agent.llm, hermes.cli; "
            "print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


async def test_a_computed_step_may_use_the_event_loop_and_block(fake_model):
    release = asyncio.Event()

    def held(request):
        asyncio.get_running_loop()  # litellm may call the provider from a thread
        from tests.fakellm import Block
        return Block(release)

    fake_model.respond(held).reply("after the hold")
    task = asyncio.create_task(collect(make_llm(fake_model)))
    await asyncio.wait_for(fake_model.reached.wait(), 5)
    assert not task.done()
    release.set()
    texts, final = await asyncio.wait_for(task, 5)
    assert final.text == "after the hold"


async def test_a_call_waits_for_a_background_import_without_blocking_the_loop(fake_model,
                                                                            monkeypatch):
    """The daemon is ready before litellm is imported (~3 s); a reply asked for meanwhile
    waits for the import in a worker thread while the event loop serves everything else."""
    import threading

    from hermes.agent import llm as llm_module

    imported, gate = llm_module._litellm, threading.Event()
    calls = []

    def slow_import():
        calls.append(threading.current_thread().name)
        assert gate.wait(10)
        monkeypatch.setattr(llm_module, "_litellm", imported)
        return imported

    monkeypatch.setattr(llm_module, "_litellm", None)
    monkeypatch.setattr(llm_module, "_preload", None)
    monkeypatch.setattr(llm_module, "load_litellm", slow_import)
    llm_module.preload_litellm()                          # what `hermes run` does once it is up
    fake_model.reply("Hello")
    reply = asyncio.create_task(collect(make_llm(fake_model)))
    ticks = 0
    while not calls or ticks < 50:                        # the loop keeps turning meanwhile
        await asyncio.sleep(0)
        ticks += 1
    assert not reply.done() and fake_model.requests == []
    gate.set()
    texts, final = await asyncio.wait_for(reply, 10)
    assert final.text == "Hello" and calls[0] == "hermes-litellm-import"
