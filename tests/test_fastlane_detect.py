"""Fast-lane detection and the first-person rewrite (the hook itself: tests/test_learning.py)."""

from __future__ import annotations

import pytest

from hermes.learn.fastlane import detect, remainder, to_statement


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Remember that my sister Ana lives in Porto.", ["The user's sister Ana lives in Porto"]),
        ("remember I am allergic to peanuts", ["The user is allergic to peanuts"]),
        ("/remember I prefer dark mode in every editor",
         ["The user prefers dark mode in every editor"]),
        ("Please note that the deploy window is Thursday 14:00 UTC.",
         ["The deploy window is Thursday 14:00 UTC"]),
        ("Don't forget that I'm on call next week", ["The user is on call next week"]),
        ("Don't forget to call the dentist on Monday",
         ["The user needs to call the dentist on Monday"]),
        ("Can you remember that I usually go running at 7am?",
         ["The user usually goes running at 7am"]),
        ("note: my passport expires in March 2027", ["The user's passport expires in March 2027"]),
        ("Hey Hermes, keep in mind that I hate cilantro. What should I cook tonight?",
         ["The user hates cilantro"]),
        ("Make a note that our wifi router is in the attic", ["Our wifi router is in the attic"]),
        ("Do you remember what I said about Ana?", []),
        ("I remember when we went to Rome.", []),
        ("Remember me?", []),
        ("Remember when we talked about Rust?", []),
        ("I don't want to forget my keys again", []),
    ],
)
def test_detect(text, expected):
    assert [r.content for r in detect(text)] == expected


def test_remainder_keeps_what_else_was_said():
    text = "Remember that I'm vegan. What should I cook tonight?"
    assert remainder(text, detect(text)) == "What should I cook tonight?"


def test_speaker_name_makes_the_fact_self_contained():
    assert to_statement("I really like Thai food and my cat is called Miso", "Alice") == (
        "Alice really likes Thai food and Alice's cat is called Miso"
    )
    assert to_statement("I have two kids", "James") == "James has two kids"
