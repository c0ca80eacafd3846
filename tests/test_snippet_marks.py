"""Only the query's words are marked in a hit's snippet (review rev6): a line's own markdown
("**Kyoto**", an assistant's bold) is not a match, and a CJK word found inside its run is marked
in the web panel as it is in the snippet."""

from rich.text import Text

from hermes.cli.sessions import _highlight
from hermes.frontends.web.app import marked
from hermes.memory.sessions.bm25 import HIGHLIGHT, manual_snippet
from hermes.memory.sessions.records import SearchHit
from hermes.memory.sessions.store import SessionStore
from hermes.store.fts import build_match
from tests.test_web import panel  # noqa: F401 - the logged-in panel fixture


def test_a_lines_own_bold_is_not_a_match_in_a_snippet_cut_by_hand():
    """A line found by meaning holds no word of the query: nothing in its snippet is marked,
    and the web panel lights nothing in it."""
    line = "Here is your plan: **Kyoto** on day one, then **Nara**"
    snippet = manual_snippet(line, build_match("holiday"))
    assert HIGHLIGHT[0] not in snippet
    assert "<mark>" not in marked(line, snippet)
    # a word of the query is marked, the line's own bold is not
    snippet = manual_snippet(line, build_match("nara"))
    assert "<mark>Nara</mark>" in marked(line, snippet)
    assert "<mark>Kyoto</mark>" not in marked(line, snippet)


def test_a_lines_own_bold_is_not_a_match_in_fts5s_snippet(db, clock):
    store = SessionStore(db, clock=clock)
    session = store.create("owner", "terminal")
    store.append("owner", session.id, "assistant", "Plant **cherry** tomatoes in **May**")
    (hit,) = store.search("owner", "tomatoes")
    assert "<mark>tomatoes</mark>" in marked(hit.match.content, hit.snippet)
    assert "<mark>cherry</mark>" not in marked(hit.match.content, hit.snippet)
    assert "<mark>May</mark>" not in marked(hit.match.content, hit.snippet)
    # the CLI bolds the match only and shows the line's asterisks as written
    assert _highlight(hit.snippet) == "Plant **cherry** [bold]tomatoes[/bold] in **May**"


def test_a_cjk_word_found_inside_its_run_is_marked_in_the_web_panel():
    line = "私は東京に住んでいます"
    snippet = manual_snippet(line, build_match("東京"))
    assert snippet == "私は**東京**に住んでいます"
    assert str(marked(line, snippet)) == "私は<mark>東京</mark>に住んでいます"


def test_a_word_is_marked_beside_an_underscore_as_fts5_matched_it():
    """FTS5's tokens end at an underscore ("foo_bar" holds "foo"): the mark does too."""
    assert str(marked("see foo_bar now", "see **foo**_bar now")) == \
        "see <mark>foo</mark>_bar now"


async def test_the_panel_escapes_a_matched_line_and_marks_only_the_query(panel, rt):  # noqa: F811
    sessions = rt.memory.sessions
    sid = sessions.create("owner", "web").id
    sessions.append("owner", sid, "user",
                    'I grow **<img src=x onerror=alert(1)>** tomatoes & <b>basil</b>')
    page = await panel.get("/sessions", params={"q": "tomatoes"})
    assert "<img src=x" not in page.text and "<b>basil" not in page.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.text
    assert "<mark>tomatoes</mark>" in page.text and page.text.count("<mark>") == 1


def test_a_backslash_before_a_match_is_the_lines_own(db, clock):
    """A Windows path: the match right after a backslash is still marked, the backslash kept."""
    store = SessionStore(db, clock=clock)
    session = store.create("owner", "terminal")
    store.append("owner", session.id, "user", "open C:\\projects\\tomato\\notes.txt please")
    (hit,) = store.search("owner", "tomato")
    shown = Text.from_markup(_highlight(hit.snippet))
    assert shown.plain == "open C:\\projects\\tomato\\notes.txt please"
    assert [shown.plain[span.start:span.end] for span in shown.spans] == ["tomato"]
    assert "<mark>tomato</mark>" in marked(hit.match.content, hit.snippet)


def test_a_turn_lifted_by_a_fact_says_so_though_it_holds_bold(db, clock):
    """found_by's "through a fact" (no word of the query in the shown turn) is not fooled by the
    turn's own "**"."""
    store = SessionStore(db, clock=clock)
    session = store.create("owner", "terminal")
    said = store.append("owner", session.id, "assistant", "Noted: **Brompton**, blue")
    snippet = manual_snippet(said.content, build_match("bike"))
    hit = SearchHit(store.get("owner", session.id), 1.0, said, snippet, [said], "strict",
                    ["messages", "facts"], [], "words")
    assert hit.found_by == "through a fact"
