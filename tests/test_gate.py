"""The gate on a golden set of labelled messages, and its non-text rules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from hermes.learn.gate import decide

GOLDEN = Path(__file__).parent / "data" / "gate_golden.tsv"


@dataclass
class Msg:
    role: str
    content: str


def _golden() -> list[tuple[str, str]]:
    rows = []
    for line in GOLDEN.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, text = line.split("\t", 1)
        rows.append((label, text))
    return rows


def test_golden_set_is_large_and_balanced():
    rows = _golden()
    assert len(rows) >= 60
    assert sum(1 for label, _ in rows if label == "run") >= 25
    assert sum(1 for label, _ in rows if label == "skip") >= 25


@pytest.mark.parametrize(("label", "text"), _golden())
def test_golden_gate(label, text):
    turn = [Msg("user", text), Msg("assistant", "Sure! Here you go.")]
    decision = decide(turn)
    assert decision.run == (label == "run"), (text, decision)
    if label == "skip":
        assert decision.reason in {"small_talk", "no_statement"}


def test_skip_reasons_are_named():
    assert decide([Msg("user", "thanks!")]).reason == "small_talk"
    assert decide([Msg("user", "What's the capital of Peru?")]).reason == "no_statement"
    assert decide([Msg("assistant", "hello")]).reason == "no_user_message"


def test_memory_written_by_tools_skips():
    decision = decide([Msg("user", "My sister Ana moved to Lisbon.")], memory_written=True)
    assert (decision.run, decision.reason) == (False, "memory_written")


def test_cron_sessions_skip_unless_included():
    turn = [Msg("user", "Our release train leaves every second Tuesday.")]
    assert decide(turn, source="cron").reason == "cron"
    assert decide(turn, source="cron", include_cron=True).run


def test_disabled_skips():
    assert decide([Msg("user", "I'm vegan")], enabled=False).reason == "disabled"


def test_fully_fast_laned_message_costs_no_model_call():
    decision = decide([Msg("user", "Remember that my passport expires in March 2027.")])
    assert (decision.run, decision.reason) == (False, "fast_lane")
    # ...but what follows the remember-request is still judged on its own.
    assert decide([Msg("user", "Remember that I'm vegan. My partner Sam is not.")]).run


def test_short_answer_to_the_assistants_question_runs():
    turn = [Msg("user", "Berlin"), Msg("assistant", "Nice, Berlin is lovely.")]
    assert not decide(turn).run
    decision = decide(turn, prior_assistant="Where do you live these days?")
    assert (decision.run, decision.reason) == (True, "answer")
    # "thanks" after a question is still small talk
    assert not decide([Msg("user", "thanks")], prior_assistant="Anything else?").run


def test_min_chars_only_skips_short_messages_without_self_reference():
    assert not decide([Msg("user", "Rust rocks")], min_chars=12).run
    assert decide([Msg("user", "I'm vegan")], min_chars=12).run


def test_any_substantive_message_in_the_range_runs():
    turn = [Msg("user", "hi"), Msg("assistant", "Hi!"), Msg("user", "I work at Acme now.")]
    assert decide(turn).run
