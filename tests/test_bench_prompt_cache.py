"""The prompt-cache benchmark's model of Anthropic's cache: its figures are as honest as this."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_prompt_cache as bench  # noqa: E402

from hermes.agent.prompt_cache import mark_cache  # noqa: E402

FRONT = ("<persona>\n" + "p" * 5000 + "\n</persona>\n\n<basic_memory>\n" + "b" * 2000
         + "\n</basic_memory>")
TOOLS = [{"type": "function", "function": {"name": "facts", "parameters": {}}}]


def conversation(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": FRONT}]
    for n in range(turns):
        messages.append({"role": "user", "content": f"question {n} " + "q" * 400})
        if n < turns - 1:
            messages.append({"role": "assistant", "content": f"answer {n} " + "a" * 400})
    return messages


def charge(cache: bench.AnthropicCache, messages: list[dict], at: float, *, marks: bool = True,
           ttl: str = "5m") -> bench.Charge:
    sent = mark_cache(messages, ttl) if marks else messages
    return cache.charge(bench.anthropic_blocks(sent, TOOLS), at, ttl)


def test_a_request_that_extends_a_marked_one_reads_it_and_writes_only_what_is_new():
    cache = bench.AnthropicCache()
    first = charge(cache, conversation(1), 0.0)
    assert first.read == 0 and first.written == first.total and first.plain == 0
    second = charge(cache, conversation(2), 60.0)
    assert second.read == first.total
    assert second.written == second.total - first.total
    assert second.cost < 0.25 * second.total


def test_without_marks_nothing_is_cached_and_every_token_costs_the_base_price():
    cache = bench.AnthropicCache()
    charge(cache, conversation(1), 0.0, marks=False)
    later = charge(cache, conversation(2), 60.0, marks=False)
    assert later.read == later.written == 0 and later.cost == later.total


def test_entries_expire_five_minutes_after_their_last_use_and_an_hour_for_1h():
    for ttl, gap, hit in (("5m", 299, True), ("5m", 301, False), ("1h", 3599, True),
                          ("1h", 3601, False)):
        cache = bench.AnthropicCache()
        first = charge(cache, conversation(1), 0.0, ttl=ttl)
        later = charge(cache, conversation(2), float(gap), ttl=ttl)
        assert (later.read == first.total) is hit, (ttl, gap)
    hour = charge(bench.AnthropicCache(), conversation(1), 0.0, ttl="1h")
    assert hour.written_hour == hour.total and hour.cost == 2.0 * hour.total


def test_a_changed_front_reads_nothing_but_the_tools_and_persona_block():
    cache = bench.AnthropicCache()
    charge(cache, conversation(3), 0.0)
    changed = conversation(3)
    changed[0] = {"role": "system", "content": FRONT.replace("bbbb", "cccc", 1)}
    again = charge(cache, changed, 60.0)
    persona = FRONT.index("</persona>") + len("</persona>")
    tools = bench.anthropic_blocks([], TOOLS)[0].tokens
    assert again.read == tools + bench.tokens(FRONT[:persona])
    assert again.written == again.total - again.read


def test_nothing_under_1024_tokens_is_cached():
    cache = bench.AnthropicCache()
    small = [{"role": "system", "content": "short"}, {"role": "user", "content": "hi"}]
    first = cache.charge(bench.anthropic_blocks(mark_cache(small), None), 0.0)
    assert first.written == 0 and first.plain == first.total
    again = cache.charge(bench.anthropic_blocks(mark_cache(small), None), 1.0)
    assert again.read == 0


def test_the_lookback_reaches_20_blocks_before_a_mark_and_no_further():
    def chat(extra: int) -> list[dict]:
        messages = conversation(1)
        for n in range(extra):
            messages += [{"role": "assistant", "content": f"a{n}"}, {"role": "user",
                                                                    "content": f"u{n}"}]
        return messages

    front = bench.anthropic_blocks([], TOOLS)[0].tokens + bench.tokens(FRONT)
    for extra, hit in ((10, True), (11, False)):   # 20, then 22 new blocks after the mark
        cache = bench.AnthropicCache()
        first = charge(cache, conversation(1), 0.0)
        # without the mark on the previous request's last user message: only the lookback
        # from the last message can find where the earlier request ended
        plain = chat(extra)
        sent = mark_cache(plain)
        sent[-3] = plain[-3]   # the previous user message, unmarked
        later = cache.charge(bench.anthropic_blocks(sent, TOOLS), 1.0)
        assert later.read == (first.total if hit else front), extra


def test_a_read_keeps_an_entry_alive_for_another_five_minutes():
    cache = bench.AnthropicCache()
    first = charge(cache, conversation(1), 0.0)
    assert charge(cache, conversation(1), 200.0).read == first.total
    assert charge(cache, conversation(1), 450.0).read == first.total   # 250 s after the read
    assert charge(cache, conversation(1), 800.0).read == 0             # 350 s after it
