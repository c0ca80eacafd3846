import pytest

from hermes.store.db import connect
from hermes.store.fts import build_match, like_pattern, search_with_fallback

HARD_STRINGS = [
    'alice@example.com', "https://example.com/a/b?x=1&y=2", "v2.3.1", "C++", "state-of-the-art",
    "snake_case_name", "dotted.module.name", '"unbalanced quote', "'single'", "a:b", "-leading",
    "NOT", "AND OR NEAR", "*", "^caret", "(parens)", "{braces}", "50%", "#tag", "$HOME", "?",
    "a,b", "x/y", "+plus", "'", '"', '""', "", "   ", "docker-compose.yml", "C#", "don't",
    "Ünïcödé café", "中文测试", "日本語のテキスト", "mixed 中文 text", "NEAR(a b)", "col:value",
]


@pytest.fixture
def fts_db(tmp_path):
    db = connect(tmp_path / "f.db")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
    for body in [
        "write to alice@example.com about the v2.3.1 release",
        "the state-of-the-art compiler for C++ and C#",
        "see https://example.com/a/b?x=1&y=2 for snake_case_name docs",
        "cafe notes and docker-compose.yml tweaks",
    ]:
        db.execute("INSERT INTO t(body) VALUES (?)", [body])
    return db


@pytest.mark.parametrize("query", HARD_STRINGS)
def test_hard_strings_never_raise(fts_db, query):
    plan = build_match(query)

    def run(expr):
        return fts_db.execute("SELECT rowid FROM t WHERE t MATCH ?", [expr]).fetchall()

    search_with_fallback(plan, run)  # must not raise


@pytest.mark.parametrize(
    ("query", "expected_row"),
    [
        ("alice@example.com", 1),
        ("v2.3.1", 1),
        ("state-of-the-art", 2),
        ("C++", 2),
        ("snake_case_name", 3),
        ("https://example.com/a/b?x=1&y=2", 3),
        ("Café", 4),
        ("docker-compose.yml", 4),
    ],
)
def test_hard_strings_find_their_row(fts_db, query, expected_row):
    plan = build_match(query)
    rows, _ = search_with_fallback(
        plan, lambda e: fts_db.execute("SELECT rowid FROM t WHERE t MATCH ?", [e]).fetchall()
    )
    assert (expected_row,) in rows


def test_strict_first_then_or_of_content_words(fts_db):
    plan = build_match("what is the compiler for rust")
    assert plan.strict is not None and plan.loose is not None
    assert "what" not in plan.loose and '"compiler"' in plan.loose
    rows, mode = search_with_fallback(
        plan, lambda e: fts_db.execute("SELECT rowid FROM t WHERE t MATCH ?", [e]).fetchall()
    )
    assert mode == "loose" and rows == [(2,)]
    rows, mode = search_with_fallback(
        build_match("compiler C++"),
        lambda e: fts_db.execute("SELECT rowid FROM t WHERE t MATCH ?", [e]).fetchall(),
    )
    assert mode == "strict"


def test_balanced_quotes_stay_phrases():
    plan = build_match('"release notes" alice')
    assert plan.strict == '"release notes" "alice"'
    # any-word also tries the phrase's words: a phrase the text lacks hides nothing
    assert plan.loose == '"release notes" OR "alice" OR "release" OR "notes"'
    assert build_match('"AND marmalade"').loose == '"AND marmalade" OR "marmalade"'


def test_cjk_is_split_out_for_like():
    plan = build_match("mixed 中文 text")
    assert plan.cjk == ("中文",)
    assert plan.strict == '"mixed" "text"'
    assert build_match("中文").empty is False and build_match("中文").strict is None


def test_like_pattern_escapes_wildcards():
    assert like_pattern("50%_x") == "%50\\%\\_x%"


def test_match_error_is_not_swallowed(fts_db):
    with pytest.raises(Exception, match="fts5"):
        search_with_fallback(
            build_match("x"),
            lambda e: fts_db.execute("SELECT rowid FROM t WHERE t MATCH ?", ['"x" AND']).fetchall(),
        )


def test_a_possessive_is_the_name_alone():
    assert build_match("Gina's dog").strict == '"Gina" "dog"'
    assert build_match("Gina\u2019s dog").strict == '"Gina" "dog"'
    # Only a final 's after an apostrophe: other joined words stay phrases.
    assert build_match("rock'n'roll").strict == '"rock n roll"'
    assert build_match("don't").strict == '"don t"'
    assert build_match('"Gina\'s dog"').strict == '"Gina s dog"'  # a quoted phrase is exact


def test_a_message_is_planned_once_per_text():
    # A turn plans the same message several times (embed or not, fact words, past-message
    # gate): the plan of a text asked for again is the one built before; a long paste is not
    # kept, and a plan from the cache equals one built afresh.
    from hermes.store import fts

    text = "what about the postgres migration we planned last week?"
    first = build_match(text)
    assert build_match(text) is first
    assert first == fts._build_match(text)
    paste = "word " * (fts.CACHED_CHARS // 5 + 1)
    assert build_match(paste) is not build_match(paste)
    assert build_match(paste) == fts._build_match(paste)
