"""Session transcripts: recording, browse and search (tier 3)."""

import json
import sqlite3

import pytest

from hermes.errors import NotFound, QueryError, RefusedWrite
from hermes.memory.sessions.store import SessionStore


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock)


def conversation(store, clock, user, lines, *, source="terminal", title=None, minutes=1):
    """A session whose messages alternate user/assistant, one minute apart."""
    session = store.create(user, source, title=title)
    for i, line in enumerate(lines):
        clock.advance(minutes=minutes)
        store.append(user, session.id, "user" if i % 2 == 0 else "assistant", line,
                     speaker=user if i % 2 == 0 else "hermes")
    return store.get(user, session.id)


# -- recording ------------------------------------------------------------------------------


def test_append_keeps_count_and_last_activity(store, clock):
    session = store.create("owner", "terminal", channel_key="terminal:me")
    assert session.message_count == 0 and session.ended_at is None
    clock.advance(minutes=5)
    message = store.append("owner", session.id, "user", "hello there", speaker="me")
    after = store.get("owner", session.id)
    assert after.message_count == 1
    assert after.last_active_at == message.created_at > session.started_at
    assert [m.content for m in store.messages("owner", session.id)] == ["hello there"]


def test_open_for_reuses_the_open_session_until_closed(store, clock):
    first = store.open_for("owner", "discord", "thread:1")
    assert store.open_for("owner", "discord", "thread:1").id == first.id
    assert store.open_for("owner", "discord", "thread:2").id != first.id
    assert store.open_for("bob", "discord", "thread:1").id != first.id
    closed = store.close("owner", first.id)
    assert closed.ended_at is not None
    assert store.open_for("owner", "discord", "thread:1").id != first.id


def test_bad_writes_are_refused_and_unknown_ids_not_found(store):
    session = store.create("owner", "terminal")
    with pytest.raises(RefusedWrite, match="role"):
        store.append("owner", session.id, "robot", "beep")
    with pytest.raises(NotFound):
        store.append("owner", 999, "user", "x")
    with pytest.raises(NotFound):
        store.append("bob", session.id, "user", "not yours")
    assert store.get("owner", session.id).message_count == 0


def test_messages_after_id_and_window(store, clock):
    s = conversation(store, clock, "owner", [f"line {i}" for i in range(10)])
    msgs = store.messages("owner", s.id)
    assert [m.content for m in store.messages("owner", s.id, after_id=msgs[6].id)] == [
        "line 7", "line 8", "line 9"]
    assert len(store.messages("owner", s.id, limit=3)) == 3
    window = store.window("owner", s.id, msgs[5].id, context=2)
    assert [m.content for m in window] == ["line 3", "line 4", "line 5", "line 6", "line 7"]
    edge = store.window("owner", s.id, msgs[0].id, context=2)
    assert [m.content for m in edge] == ["line 0", "line 1", "line 2"]
    with pytest.raises(NotFound):
        store.window("owner", s.id, 10_000)


def test_summary_idle_and_users(store, clock):
    a = conversation(store, clock, "owner", ["one"])
    clock.advance(hours=3)
    b = conversation(store, clock, "owner", ["two"])
    conversation(store, clock, "bob", ["three"])
    store.set_summary("owner", a.id, title="Docker fix", summary="We fixed the bridge network.")
    got = store.get("owner", a.id)
    assert (got.title, got.summary) == ("Docker fix", "We fixed the bridge network.")
    store.set_summary("owner", a.id, status="failed")  # keeps the text
    assert store.get("owner", a.id).summary == "We fixed the bridge network."
    idle = store.idle("owner", b.last_active_at)
    assert [s.id for s in idle] == [a.id]
    assert store.users() == ["bob", "owner"]
    with pytest.raises(NotFound):
        store.set_summary("bob", a.id, summary="hijack")


def test_sessions_needing_a_summary_are_this_users_only(store, clock):
    ended = conversation(store, clock, "owner", ["one"])
    store.close("owner", ended.id)
    conversation(store, clock, "owner", ["still open"])
    imported = store.create("owner", "import", external_id="chatgpt:1")
    tried = conversation(store, clock, "owner", ["three"])
    store.close("owner", tried.id)
    store.set_summary("owner", tried.id, status="failed")
    theirs = conversation(store, clock, "bob", ["bob's"])
    store.close("bob", theirs.id)
    assert store.needing_summary("owner", max_attempts=3) == [ended.id, tried.id]
    assert store.needing_summary("owner", max_attempts=1) == [ended.id]
    assert store.needing_summary("bob", max_attempts=3) == [theirs.id]
    assert store.needing_summary("carol", max_attempts=3) == []
    assert store.summary_backlog("owner", max_attempts=3) == [ended.id, imported.id, tried.id]
    assert store.summary_backlog("owner", max_attempts=3, source="import") == [imported.id]
    assert store.summary_backlog("owner", max_attempts=3,
                                 since=tried.last_active_at) == [tried.id]
    assert store.summary_backlog("bob", max_attempts=3) == [theirs.id]
    assert store.summary_backlog("carol", max_attempts=3) == []
    store.set_summary("owner", ended.id, title="Done", summary="Done.")
    assert ended.id not in store.needing_summary("owner", max_attempts=3)


def test_extraction_watermarks_are_this_users_only(store, clock):
    mine = conversation(store, clock, "owner", ["one", "reply one", "two", "reply two"])
    theirs = conversation(store, clock, "bob", ["bob's", "bob's reply"])
    first, reply, second, _ = [m.id for m in store.messages("owner", mine.id)]
    assert store.extracted_through("owner", mine.id) == 0
    store.advance_extracted("owner", mine.id, second)
    store.advance_extracted("owner", mine.id, first)            # never back
    assert store.extracted_through("owner", mine.id) == second
    store.advance_extracted("bob", mine.id, 999)               # not bob's session: no change
    assert store.extracted_through("owner", mine.id) == second
    assert store.extracted_through("bob", mine.id) == 0
    assert store.last_reply_before("owner", mine.id, second) == "reply one"
    assert store.last_reply_before("owner", mine.id, first) is None
    assert store.last_reply_before("bob", mine.id, second) is None
    assert store.extracted_through("bob", theirs.id) == 0


def test_the_learning_backlog_is_this_users_only(store, clock):
    behind = conversation(store, clock, "owner", ["learn me"])
    done = conversation(store, clock, "owner", ["learned", "ok"])
    store.advance_extracted("owner", done.id, store.messages("owner", done.id)[-1].id)
    imported = store.create("owner", "import", external_id="chatgpt:1")
    store.append("owner", imported.id, "user", "imported line")
    theirs = conversation(store, clock, "bob", ["bob's"])
    assert [s.id for s in store.learning_backlog("owner")] == [behind.id, imported.id]
    assert [s.id for s in store.learning_backlog("owner", also=[done.id])] == [
        behind.id, done.id, imported.id]
    assert [s.id for s in store.learning_backlog("owner", source="import")] == [imported.id]
    assert [s.id for s in store.learning_backlog("owner", also=[theirs.id])] == [
        behind.id, imported.id]                                 # bob's session stays out
    assert [s.id for s in store.learning_backlog("bob")] == [theirs.id]
    assert store.learning_backlog("carol", also=[behind.id]) == []
    # The worker's catch-up is the one reader for everyone: live sessions, newest first.
    assert store.live_behind_extraction(limit=10) == [("bob", theirs.id), ("owner", behind.id)]
    assert store.live_behind_extraction(limit=1) == [("bob", theirs.id)]


# -- browse ---------------------------------------------------------------------------------


def test_list_newest_activity_first_with_title_or_first_user_line(store, clock):
    old = conversation(store, clock, "owner", ["How do I rotate nginx logs?", "Use logrotate."])
    clock.advance(hours=1)
    titled = conversation(store, clock, "owner", ["hi"], title="Planning the trip")
    clock.advance(hours=1)
    # Activity, not start time, orders the list: the old session comes back to the top.
    store.append("owner", old.id, "user", "and compress them?")
    sessions = store.list_sessions("owner")
    assert [s.id for s in sessions] == [old.id, titled.id]
    assert sessions[0].display_title == "How do I rotate nginx logs?"
    assert sessions[1].display_title == "Planning the trip"


def test_list_filters_source_since_limit(store, clock):
    cron = conversation(store, clock, "owner", ["daily digest"], source="cron")
    clock.advance(days=2)
    since = store.get("owner", cron.id).last_active_at
    recent = [conversation(store, clock, "owner", [f"talk {i}"]) for i in range(3)]
    assert [s.id for s in store.list_sessions("owner", source="cron")] == [cron.id]
    since_ids = {s.id for s in store.list_sessions("owner", since=since)}
    assert since_ids == {s.id for s in recent} | {cron.id}
    later = store.get("owner", recent[0].id).last_active_at
    assert cron.id not in {s.id for s in store.list_sessions("owner", since=later)}
    assert len(store.list_sessions("owner", limit=2)) == 2
    assert store.list_sessions("nobody") == []


# -- search ---------------------------------------------------------------------------------

HARD = [
    ("alice@example.com", "Send the invoice to alice@example.com tomorrow."),
    ("https://example.com/a/b?x=1&y=2", "The docs are at https://example.com/a/b?x=1&y=2 now."),
    ("v2.3.1", "We pinned the library to v2.3.1 after the regression."),
    ("/etc/nginx/nginx.conf", "Edit /etc/nginx/nginx.conf and reload."),
    ("C++", "The extension is written in C++ with pybind."),
    ("state-of-the-art", "It is a state-of-the-art tokenizer."),
    ('"bridge network"', "Docker's default bridge network drops the packets."),
    ("網絡", "我們修好了 Docker 的網絡問題。"),
    ("docker 網絡", "我們修好了 Docker 的網絡問題。"),
]


@pytest.mark.parametrize(("query", "text"), HARD)
def test_hard_strings_find_their_message(store, clock, query, text):
    conversation(store, clock, "owner", ["unrelated chatter about lunch", "fine"])
    target = conversation(store, clock, "owner", ["intro", text, "ok"])
    hits = store.search("owner", query)
    assert hits and hits[0].session.id == target.id
    assert hits[0].match.content == text
    assert "**" in hits[0].snippet


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "NOT", "AND OR NEAR", "a:b", "-flag", "(x", "foo - bar", "x^2",
     "NEAR(a b)", "col:value", "50%", "don't", "C#", "what's up?"],
)
def test_odd_queries_never_raise(store, clock, query):
    conversation(store, clock, "owner", ["some text about a:b and x^2 at 50% load"])
    store.search("owner", query)


@pytest.mark.parametrize("query", ["?!", "*", "", "  ", '""'])
def test_query_without_words_is_a_clear_error(store, query):
    with pytest.raises(QueryError, match="Nothing to search"):
        store.search("owner", query)


def test_match_error_propagates(store, clock, monkeypatch):
    conversation(store, clock, "owner", ["anything"])
    from hermes.memory.sessions import search as module
    from hermes.store.fts import MatchPlan, Term

    monkeypatch.setattr(module, "build_match",
                        lambda q: MatchPlan(terms=(Term(("x",)),), strict='"x" AND (', loose=None))
    with pytest.raises(sqlite3.OperationalError):
        store.search("owner", "x")


def test_any_word_round_fills_below_the_all_words_one(store, clock):
    both = conversation(store, clock, "owner", ["the docker network was flaky"])
    one = conversation(store, clock, "owner", ["docker compose is installed"])
    hits = store.search("owner", "docker network")
    assert [(h.session.id, h.mode) for h in hits] == [(both.id, "strict"), (one.id, "loose")]
    # as many as asked for from the all-words round: no second round
    assert [(h.session.id, h.mode) for h in store.search("owner", "docker network", limit=1)] \
        == [(both.id, "strict")]
    hits = store.search("owner", "how did we fix the docker networking issue?")
    assert hits[0].mode == "loose"
    assert {h.session.id for h in hits} == {both.id, one.id}
    # Stemming: "networking" found "network"; the better match ranks first.
    assert hits[0].session.id == both.id


def test_cron_sessions_demoted_below_conversations(store, clock):
    cron = conversation(store, clock, "owner",
                        ["backup backup backup report: backup finished"], source="cron")
    talk = conversation(store, clock, "owner", ["did the backup run last night? it was slow"])
    hits = store.search("owner", "backup")
    assert [h.session.id for h in hits] == [talk.id, cron.id]


def test_grouped_by_session_with_context_window(store, clock):
    lines = [f"filler line {i}" for i in range(10)]
    lines[5] = "the postgres vacuum finished"
    lines[8] = "postgres again, vacuum tuned"
    s = conversation(store, clock, "owner", lines)
    other = conversation(store, clock, "owner", ["postgres vacuum is slow", "yes"])
    hits = store.search("owner", "postgres vacuum", context=1)
    assert sorted(h.session.id for h in hits) == sorted([s.id, other.id])  # one hit per session
    hit = next(h for h in hits if h.session.id == s.id)
    assert hit.match.content in {lines[5], lines[8]}
    contents = [m.content for m in hit.context]
    index = lines.index(hit.match.content)
    assert contents == lines[index - 1 : index + 2]
    assert store.search("owner", "postgres vacuum", limit=1, context=0)[0].context == [
        store.search("owner", "postgres vacuum", limit=1)[0].match]


def test_title_and_summary_hits_count(store, clock):
    plain = conversation(store, clock, "owner", ["we looked at the kubernetes ingress"])
    summarised = conversation(store, clock, "owner", ["kubernetes ingress again", "yes"])
    store.set_summary("owner", summarised.id, title="Kubernetes ingress fix",
                      summary="Fixed the kubernetes ingress TLS certificate.")
    only_summary = conversation(store, clock, "owner", ["hello", "hi"])
    store.set_summary("owner", only_summary.id, summary="Talked about certificate renewal.")
    hits = store.search("owner", "kubernetes ingress")
    assert hits[0].session.id == summarised.id
    assert hits[0].session.summary == "Fixed the kubernetes ingress TLS certificate."
    assert plain.id in {h.session.id for h in hits}
    hits = store.search("owner", "certificate renewal")
    # the summary holding both words first; the one holding "certificate" fills below it
    assert [(h.session.id, h.mode) for h in hits] == [(only_summary.id, "strict"),
                                                      (summarised.id, "loose")]
    assert hits[0].matched_in == ["title/summary"] and "**" in hits[0].snippet
    assert hits[0].match.content == "hello"


def test_external_ids_come_back_in_results(store, clock):
    s = store.create("owner", "import", external_id="conv-7")
    store.append("owner", s.id, "user", "the lighthouse keeper", external_id="conv-7:m3")
    hit = store.search("owner", "lighthouse")[0]
    assert hit.session.external_id == "conv-7" and hit.match.external_id == "conv-7:m3"
    assert hit.to_json()["match"]["external_id"] == "conv-7:m3"


def test_users_are_isolated_in_every_read(store, clock):
    mine = conversation(store, clock, "owner", ["my secret project zephyr"])
    theirs = conversation(store, clock, "bob", ["bob's project zephyr notes"])
    assert [s.id for s in store.list_sessions("owner")] == [mine.id]
    assert [h.session.id for h in store.search("owner", "zephyr")] == [mine.id]
    assert [h.session.id for h in store.search("bob", "zephyr")] == [theirs.id]
    for call in (
        lambda: store.get("owner", theirs.id),
        lambda: store.messages("owner", theirs.id),
        lambda: store.window("owner", theirs.id, 1),
        lambda: store.close("owner", theirs.id),
    ):
        with pytest.raises(NotFound):
            call()
    assert store.idle("owner", "9999") == [store.get("owner", mine.id)]


def test_many_other_user_matches_do_not_crowd_out_mine(store, clock, monkeypatch):
    from hermes.memory.sessions import search as module

    monkeypatch.setattr(module, "SCORE_CAP", 2)
    monkeypatch.setattr(module, "FTS_RANKED_MATCHES", 0)  # the bounded path
    for _ in range(4):
        conversation(store, clock, "bob", ["zephyr zephyr zephyr"] * 3)
    mine = conversation(store, clock, "owner", ["a long message that mentions zephyr once"])
    assert [h.session.id for h in store.search("owner", "zephyr")] == [mine.id]


def test_source_filter(store, clock):
    cron = conversation(store, clock, "owner", ["disk usage report"], source="cron")
    conversation(store, clock, "owner", ["disk usage is high"], source="discord")
    assert [h.session.id for h in store.search("owner", "disk usage", source="cron")] == [cron.id]


def test_past_the_score_cap_old_messages_with_more_words_still_win(store, clock, monkeypatch):
    from hermes.memory.sessions import search as module

    monkeypatch.setattr(module, "SCORE_CAP", 3)
    monkeypatch.setattr(module, "FTS_RANKED_MATCHES", 0)  # the bounded path
    old_both = conversation(store, clock, "owner", ["the tomato blight came back", "ok"])
    old_rare = conversation(store, clock, "owner", ["the greenhouse vent is stuck", "ok"])
    for _ in range(6):  # newer messages with one common word each: more than the cap
        conversation(store, clock, "owner", ["tomato salad again", "blight? no"])
    hits = store.search("owner", "what happened to the tomato blight in the greenhouse?")
    ids = [h.session.id for h in hits]
    # Only the three newest matches fit under the cap; the old ones come in through the pairs
    # (two of the words together) and the rare word (all of its matches are scored).
    assert old_both.id in ids and old_rare.id in ids


def test_ranking_counts_word_forms_like_the_index():
    from hermes.memory.sessions.bm25 import Bm25, term_pattern
    from hermes.store.fts import Term

    def count(token: str, text: str) -> int:
        literal, pattern = term_pattern(Term((token,)))
        folded = text.lower()
        return folded.count(literal) if pattern is None else len(pattern.findall(folded))

    assert count("fix", "we fixed it; fixes and fixing follow") == 3
    assert count("networking", "network networks networking") == 3
    assert count("c", "c and c++ but not cat") == 2
    assert Bm25([term_pattern(Term(("cafe",)))], [1.0], [1]).score("Café au lait", 3) > 0


def test_session_without_messages_found_by_its_summary(store, clock):
    empty = store.create("owner", "terminal")
    store.set_summary("owner", empty.id, title="Greenhouse plans",
                      summary="Planning the greenhouse heating.")
    hits = store.search("owner", "greenhouse heating")
    assert [h.session.id for h in hits] == [empty.id]
    assert hits[0].match is None and hits[0].context == []
    assert "**" in hits[0].snippet and hits[0].matched_in == ["title/summary"]
    assert json.loads(json.dumps(hits[0].to_json()))["match"] is None


def test_past_the_score_cap_the_best_strict_match_is_not_hidden_by_age(store, clock,
                                                                       monkeypatch):
    from hermes.memory.sessions import search as module

    monkeypatch.setattr(module, "SCORE_CAP", 3)
    monkeypatch.setattr(module, "FTS_RANKED_MATCHES", 0)  # the bounded path
    old = conversation(store, clock, "owner", ["docker docker docker docker", "ok"])
    for i in range(8):  # newer, weaker matches: more than the cap
        conversation(store, clock, "owner", [f"we talked about docker once, item {i}", "ok"])
    hits = store.search("owner", "docker", limit=3)
    assert hits[0].session.id == old.id and hits[0].mode == "strict"


def test_small_histories_are_ranked_by_fts5_and_agree_with_the_bounded_path(store, clock,
                                                                            monkeypatch):
    # Under FTS_RANKED_MATCHES matches, FTS5's own bm25 ranks them (the fast path); past it,
    # the bounded Python scorer does. Same formula, same column weights: same order.
    from hermes.memory.sessions import search as module

    lines = [
        "the docker network broke again after the upgrade",
        "I fixed the docker bridge network with a restart",
        "lunch was a tomato salad",
        "the network printer is out of toner",
        "docker compose file lives in ~/infra",
        "we should upgrade the router firmware",
    ]
    for i in range(3):
        conversation(store, clock, "owner", [f"{line} ({i})" for line in lines])
    conversation(store, clock, "bob", ["docker network docker network"] * 5)
    query = "how did we fix the docker network?"
    fast = [(h.message.id, h.session.id) for h in store.search_messages("owner", query, limit=5)]
    monkeypatch.setattr(module, "FTS_RANKED_MATCHES", 0)
    bounded = [(h.message.id, h.session.id) for h in store.search_messages("owner", query,
                                                                           limit=5)]
    assert fast == bounded
    assert store.db.execute("SELECT content FROM messages WHERE id = ?",
                            [fast[0][0]]).fetchone()[0].startswith("I fixed the docker bridge")
    assert all(store.get("owner", sid).user == "owner" for _, sid in fast)
