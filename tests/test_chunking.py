"""Splitting replies for Discord: under the limit, breaks at natural points, code blocks intact."""

from __future__ import annotations

import re

import pytest

from hermes.frontends.chunking import DISCORD_LIMIT, chunk_message


def fences_balanced(piece: str) -> bool:
    return len(re.findall(r"^```", piece, flags=re.MULTILINE)) % 2 == 0


def test_short_text_is_one_piece():
    assert chunk_message("Hello there.") == ["Hello there."]
    assert chunk_message("   \n") == []


def test_long_prose_splits_at_paragraphs_under_the_limit():
    paragraphs = [f"Paragraph {i}. " + "word " * 150 for i in range(8)]
    pieces = chunk_message("\n\n".join(p.strip() for p in paragraphs))
    assert len(pieces) > 1 and all(len(p) <= DISCORD_LIMIT for p in pieces)
    assert all(p.startswith("Paragraph") for p in pieces)          # no paragraph cut in two
    assert " ".join(" ".join(pieces).split()) == " ".join(" ".join(paragraphs).split())


def test_a_code_block_split_across_pieces_is_closed_and_reopened_with_its_language():
    code = "\n".join(f"print({i})  # line {i}" for i in range(200))
    text = "Here is the script:\n\n```python\n" + code + "\n```\n\nRun it with python."
    pieces = chunk_message(text)
    assert len(pieces) >= 3
    for piece in pieces:
        assert len(piece) <= DISCORD_LIMIT and fences_balanced(piece)
    assert all(p.startswith("```python\n") for p in pieces[1:-1])
    lines = [line for p in pieces for line in p.splitlines() if line.startswith("print(")]
    assert lines == code.splitlines()                               # every line, once, in order
    assert pieces[-1].endswith("Run it with python.")


def test_a_run_without_breaks_is_cut_hard():
    pieces = chunk_message("x" * 4500)
    assert [len(p) for p in pieces] == [len(pieces[0]), len(pieces[1]), 4500 - len(pieces[0])
                                        - len(pieces[1])]
    assert "".join(pieces) == "x" * 4500 and all(len(p) <= DISCORD_LIMIT for p in pieces)


def test_a_small_limit_is_refused():
    with pytest.raises(ValueError):
        chunk_message("text", limit=10)


@pytest.mark.parametrize("limit", [100, 333, 2000])
def test_every_piece_fits_for_mixed_content(limit):
    text = ("Intro line\n" + "```js\n" + "let a = 1;\n" * 60 + "```\n" + "tail " * 300
            + "\n~~~\nraw\n~~~\n")
    pieces = chunk_message(text, limit=limit)
    assert all(len(p) <= limit for p in pieces) and all(fences_balanced(p) for p in pieces)
