"""The parser on a corpus of real-looking malformed model outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.learn.parse import CreateAction, DeleteAction, ParseError, UpdateAction, parse_actions

CORPUS = Path(__file__).parent / "data" / "extraction_outputs"
CATEGORIES = ["user_pref", "project", "tool", "general", "person", "event"]


def parse(name: str, known=(1, 2, 3), categories=CATEGORIES):
    raw = (CORPUS / name).read_text(encoding="utf-8")
    return parse_actions(raw, known_numbers=known, categories=categories)


def test_code_fence_with_prose_around_it():
    result = parse("fenced_with_prose.txt")
    assert result.skipped == []
    create, update = result.actions
    assert create == CreateAction(
        content="Ana Costa moved to Lisbon in November 2026.", kind="episodic", category="person",
        entities=("Ana Costa", "Lisbon"), tags=("family", "relocation"), importance=0.7,
    )
    assert update == UpdateAction(
        number=2, content="The user works at Acme Corp as a staff engineer."
    )


def test_actions_wrapper_with_trailing_commas_and_odd_values():
    result = parse("wrapper_object_trailing_commas.txt")
    create, delete = result.actions
    assert isinstance(create, CreateAction) and create.entities == ("penicillin",)
    assert create.importance == pytest.approx(0.9)  # a 1-10 scale, normalised
    assert delete == DeleteAction(number=1, reason="The user no longer lives in Porto.")


def test_single_object_instead_of_a_list():
    (create,) = parse("single_object.txt").actions
    assert create.content.startswith("The user's daughter Maya")
    assert create.importance == 0.8  # "high"


def test_python_literal_output():
    (create,) = parse("python_literal.txt").actions
    assert create.kind == "episodic" and create.entities == ("Jira", "Linear")
    assert create.importance is None


def test_truncated_json_is_a_clear_error_that_keeps_the_raw_output():
    raw = (CORPUS / "truncated.txt").read_text(encoding="utf-8")
    with pytest.raises(ParseError, match="truncated") as err:
        parse_actions(raw, known_numbers=[1])
    assert err.value.raw == raw


def test_unknown_actions_and_numbers_are_skipped_and_reported():
    result = parse("unknown_actions_and_numbers.txt", known=(1,))
    assert result.actions == [
        UpdateAction(number=1, content="The user lives in Berlin (moved in October 2026)."),
        CreateAction(content="The user drinks green tea instead of coffee.", kind="semantic",
                     category="general"),
    ]
    reasons = "\n".join(result.skipped)
    assert "unknown fact number 7" in reasons
    assert "unknown action 'merge'" in reasons
    assert "create without content" in reasons
    assert "delete without a fact number" in reasons
    assert "not an object" in reasons
    assert len(result.skipped) == 5  # "NONE" is a deliberate no-op, not a problem


def test_empty_list_after_prose_means_nothing_to_learn():
    result = parse("empty_list_with_prose.txt")
    assert result.actions == [] and result.skipped == []


@pytest.mark.parametrize("raw", ["", "   \n", (CORPUS / "no_json.txt").read_text("utf-8")])
def test_no_usable_json_is_a_parse_error(raw):
    with pytest.raises(ParseError):
        parse_actions(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('[{"action":"create","content":"  The user   likes\\ntea. "}]', "The user likes tea."),
        ('Output:\n[{"op":"ADD","text":"Sam is the user\'s partner."}]',
         "Sam is the user's partner."),
        ('[{"content": "The user is vegan."}]', "The user is vegan."),  # no action: a create
        ('[{"type": "episodic", "content": "The user ran 10 km on 2026-11-28."}]',
         "The user ran 10 km on 2026-11-28."),
        ('```\n[{"action": "create", "content": "Hermes runs on a NUC."}]\n```',
         "Hermes runs on a NUC."),
    ],
)
def test_variants_of_create(raw, expected):
    (action,) = parse_actions(raw).actions
    assert isinstance(action, CreateAction) and action.content == expected


def test_update_numbers_in_many_spellings():
    raw = """[{"action":"update","id":"3","content":"a"},
    {"action":"edit","fact":"#2","new_content":"b"},
    {"action":"replace","number":1.0,"content":"c"},
    {"action":"update","number":true,"content":"d"}]"""
    result = parse_actions(raw, known_numbers=[1, 2, 3])
    assert [(a.number, a.content) for a in result.actions] == [(3, "a"), (2, "b"), (1, "c")]
    assert len(result.skipped) == 1


def test_update_without_content_and_oversized_content_are_skipped():
    raw = '[{"action":"update","number":1},{"action":"create","content":"' + "x" * 600 + '"}]'
    result = parse_actions(raw, known_numbers=[1])
    assert result.actions == []
    assert len(result.skipped) == 2


def test_a_json_scalar_is_an_error():
    with pytest.raises(ParseError, match="not a list"):
        parse_actions('"just a string"')


def test_the_first_loadable_json_wins_over_braces_in_prose():
    raw = 'Facts {see below}: [{"action":"create","content":"The user owns a Pixel 8."}]'
    (action,) = parse_actions(raw).actions
    assert action.content == "The user owns a Pixel 8."
