"""hermes.safe_text.cut and one_line: the one way a shown text is cut."""

from hermes.safe_text import cut, one_line


def test_a_text_that_fits_is_whole_and_a_longer_one_ends_in_an_ellipsis() -> None:
    assert cut("twelve chars", 12) == "twelve chars"
    assert cut("thirteen char", 12) == "thirteen ch…"
    assert len(cut("x" * 500, 80)) == 80


def test_one_line_folds_white_space_before_the_cut() -> None:
    assert one_line("  a\n\tb   c ", 80) == "a b c"
    assert one_line("first line\nsecond line", 12) == "first line …"
    assert one_line(None, 10) == ""
