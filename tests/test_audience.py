"""Where a memory may go (hermes.memory.audience): places on every stored item, the migration
that placed the rows stored before places, and the stores' reads for a shared place."""

from __future__ import annotations

import pytest
import sqlite_utils

from hermes.errors import NotFound
from hermes.memory.audience import Audience, adopt_place, place_of_channel
from hermes.memory.place import PRIVATE, Place
from hermes.store.migrations import migrations

HERE = Place.discord_channel(10, 20)
THERE = Place.discord_channel(10, 30)


# --------------------------------------------------------------------------- the rule
@pytest.mark.parametrize(("policy", "place", "shared", "seen"), [
    # a shared place: what was learned there, and what was marked shareable
    ("place_only", HERE.key, None, True), ("place_only", THERE.key, None, False),
    ("place_only", "private", None, False), ("place_only", "private", 1, True),
    # marked private: not even where it was learned
    ("place_only", HERE.key, 0, False),
    ("shareable", THERE.key, None, True), ("shareable", "private", None, False),
    ("shareable", "private", 1, True), ("shareable", HERE.key, 0, False),
    ("everything", "private", None, True), ("everything", "private", 0, False),
])
def test_the_rule_in_python_and_in_sql_agree(db, policy, place, shared, seen):
    audience = Audience(policy)
    db.execute("INSERT INTO basic_memory (user, text, created_at, updated_at, place, shared) "
               "VALUES ('u', 'x', '', '', ?, ?)", [place, shared])
    sql, params = audience.items(HERE, "b")
    found = db.execute(f"SELECT count(*) FROM basic_memory b WHERE {sql}", params).fetchone()[0]
    assert bool(found) == seen == audience.sees_item(HERE, place, shared)
    # a private place sees everything, marked or not: no condition at all
    assert audience.items(PRIVATE, "b") == ("", [])
    assert audience.sees_item(PRIVATE, place, shared)


def test_an_unknown_policy_is_one_clear_error():
    with pytest.raises(ValueError, match="privacy.shared_places must be one of"):
        Audience("public")  # type: ignore[arg-type]


def test_a_config_with_a_bad_policy_is_refused(config_file, monkeypatch):
    from hermes.config import load_settings
    from hermes.errors import ConfigError

    config_file.write_text("privacy:\n  shared_places: all\n")
    with pytest.raises(ConfigError, match="shared_places"):
        load_settings(config_file)


@pytest.mark.parametrize(("source", "key", "place"), [
    ("discord", "discord:dm:5", PRIVATE),
    ("discord", "discord:channel:77:user:5", Place("discord:?:77")),
    ("discord", "discord:thread:88", Place("discord:?:thread:88")),
    ("terminal", "terminal:root", PRIVATE), ("web", "web:abc", PRIVATE),
    ("cron", "cron:digest", PRIVATE), ("import", None, PRIVATE),
])
def test_a_session_opened_without_a_place_is_placed_by_its_channel(source, key, place):
    assert place_of_channel(source, key) == place


# --------------------------------------------------------------------------- the migration
def _old_home(path):
    """A database as it was before m033, with rows of every kind of place."""
    db = sqlite_utils.Database(path)
    migrations.apply(db, stop_before="m033_places")
    rows = [  # (id, user, source, channel_key)
        (1, "alice", "discord", "discord:dm:501"),
        (2, "alice", "discord", "discord:channel:777:user:9"),
        (3, "alice", "discord", "discord:thread:888"),
        (4, "alice", "terminal", "terminal:root"),
        (5, "alice", "cron", "cron:news"),
        (6, "alice", "cron", "cron:diary"),
        (7, "alice", "import", None),
        (8, "alice", "discord", "discord:channel:oops:user:9"),
        (9, "bob", "discord", "discord:channel:777:user:10"),
    ]
    for sid, user, source, key in rows:
        db.execute("INSERT INTO sessions (id, user, source, channel_key, started_at, "
                   "last_active_at) VALUES (?, ?, ?, ?, '2026-01-01', '2026-01-01')",
                   [sid, user, source, key])
    db.execute("INSERT INTO cron_jobs (name, user, schedule, prompt, deliver, created_at) "
               "VALUES ('news', 'alice', 'every 6h', 'news', 'discord:4242', '')")
    db.execute("INSERT INTO cron_jobs (name, user, schedule, prompt, deliver, created_at) "
               "VALUES ('diary', 'alice', 'every 6h', 'diary', 'file:diary.md', '')")
    for fid, user, session in [(1, "alice", 1), (2, "alice", 2), (3, "alice", 3),
                               (4, "alice", 7), (5, "alice", None), (6, "bob", 2),
                               (7, "bob", 9)]:
        db.execute("INSERT INTO facts (id, user, content, content_key, created_at, updated_at, "
                   "source_session_id) VALUES (?, ?, ?, ?, '', '', ?)",
                   [fid, user, f"fact {fid}", f"fact {fid}", session])
    db.execute("INSERT INTO basic_memory (user, text, created_at, updated_at) "
               "VALUES ('alice', 'likes tea', '', '')")
    db.conn.commit()
    return db


def test_the_migration_places_existing_rows_from_their_sessions(tmp_path):
    db = _old_home(tmp_path / "old.db")
    migrations.apply(db)
    places = dict(db.execute("SELECT id, place FROM sessions").fetchall())
    assert places == {
        1: "private",                   # a DM
        2: "discord:?:777",             # a server channel (its server was never recorded)
        3: "discord:?:thread:888",      # a thread (its parent neither)
        4: "private", 7: "private",     # the terminal, an import
        5: "discord:?:4242",            # a cron job delivered into a channel
        6: "private",                   # a cron job written to a file
        8: "private",                   # a key it cannot read: private
        9: "discord:?:777",
    }
    facts = {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, place, source FROM facts")}
    assert facts == {
        1: ("private", "said"), 2: ("discord:?:777", "said"),
        3: ("discord:?:thread:888", "said"), 4: ("private", "import"),
        5: ("private", "said"),
        # bob's fact naming alice's session is not placed by it (another user's session)
        6: ("private", "said"), 7: ("discord:?:777", "said"),
    }
    assert db.execute("SELECT place, shared FROM basic_memory").fetchall() == [("private", None)]


def test_the_channel_adopts_its_rows_when_its_server_is_known(tmp_path):
    db = _old_home(tmp_path / "old.db")
    migrations.apply(db)
    full = Place.discord_channel(1234, 777)
    moved = adopt_place(db, full, channel_id=777, thread_id=888)
    assert moved == 3 + 3  # sessions 2, 3, 9 and facts 2, 3, 7 (every user's)
    assert db.execute("SELECT count(*) FROM sessions WHERE place = ?",
                      [full.key]).fetchone()[0] == 3
    assert db.execute("SELECT count(*) FROM facts WHERE place LIKE 'discord:?%'").fetchone() \
        == (0,)


# --------------------------------------------------------------------------- the stores
@pytest.fixture
def memory(rt):
    return rt.memory


def test_a_fact_learned_in_a_channel_is_placed_there(memory):
    session = memory.sessions.create("alice", "discord", channel_key="k", place=HERE)
    added = memory.facts.add("alice", "The user deploys on Thursdays",
                             source_session_id=session.id)
    assert added.fact.place == HERE.key and added.fact.source == "said"
    assert memory.facts.add("alice", "The user likes Lisbon").fact.place == "private"


def test_a_shared_place_reads_only_what_its_readers_may_see(memory):
    private = memory.facts.add("alice", "The user's salary is ninety").fact
    here = memory.facts.add("alice", "The user's salary talk happens here", place=HERE).fact
    there = memory.facts.add("alice", "The user's salary is a secret there", place=THERE).fact
    marked = memory.facts.add("alice", "The user's salary band is public", shared=1).fact
    hidden = memory.facts.add("alice", "The user's salary here is private", place=HERE,
                              shared=0).fact
    facts = memory.facts
    mine = {f.id for f in facts.search("alice", "salary", limit=20)}
    assert mine == {private.id, here.id, there.id, marked.id, hidden.id}
    shown = {f.id for f in facts.search("alice", "salary", limit=20, place=HERE)}
    assert shown == {here.id, marked.id}
    assert {f.id for f in facts.list_facts("alice", place=HERE)} == {here.id, marked.id}
    assert {f.id for f in facts.recent("alice", "", place=HERE)} == {here.id, marked.id}
    with pytest.raises(NotFound):
        facts.get("alice", private.id, place=HERE)
    assert facts.get("alice", here.id, place=HERE).id == here.id
    # another user's reads never reach alice's facts, wherever they are read
    assert facts.search("bob", "salary", place=HERE) == []


def test_probe_and_reason_in_a_shared_place(memory):
    facts = memory.facts
    secret = facts.add("alice", "Quentin owes Ravel money", entities=["Quentin", "Ravel"]).fact
    public = facts.add("alice", "Quentin plays chess with Ravel", entities=["Quentin", "Ravel"],
                       place=HERE).fact
    assert {f.id for f in facts.probe("alice", "Quentin")} == {secret.id, public.id}
    assert [f.id for f in facts.probe("alice", "Quentin", place=HERE)] == [public.id]
    assert [f.id for f in facts.reason("alice", ["Quentin", "Ravel"], place=HERE).facts] == \
        [public.id]
    assert facts.probe("alice", "Quentin", place=THERE) == []


def test_a_chain_through_a_private_fact_is_not_shown_in_a_shared_place(memory):
    facts = memory.facts
    facts.add("alice", "Ada works with Boris", entities=["Ada", "Boris"], shared=1)
    facts.add("alice", "Boris is married to Clara", entities=["Boris", "Clara"])
    chain = facts.reason("alice", ["Ada", "Clara"])
    assert chain.path and len(chain.facts) == 2
    assert facts.reason("alice", ["Ada", "Clara"], place=HERE).facts == []


def test_basic_memory_in_a_shared_place(memory):
    basic = memory.basic
    basic.add("alice", "Lives at 12 Elm Street")
    basic.add("alice", "Team standup is at nine", place=HERE)
    assert [e.text for e in basic.entries("alice", place=HERE)] == ["Team standup is at nine"]
    assert "Elm" not in basic.render("alice", place=HERE)
    assert "Elm" in basic.render("alice")
    # an op in a shared place can only name what its readers see
    with pytest.raises(NotFound):
        basic.remove("alice", "Elm", place=HERE)
    assert [e.text for e in basic.entries("alice")][0] == "Lives at 12 Elm Street"


def test_a_refused_basic_write_in_a_shared_place_lists_only_what_it_may_show(rt):
    from hermes.memory.basic import BasicMemory, OverCapError

    basic = BasicMemory(rt.db, limit=80, audience=rt.memory.audience)
    basic.add("alice", "Private: passport in the blue drawer")
    basic.add("alice", "Standup at nine", place=HERE)
    with pytest.raises(OverCapError) as refused:
        basic.add("alice", "x" * 60, place=HERE)
    assert "blue drawer" not in str(refused.value) and "Standup" in str(refused.value)
    assert "1 private entry" in str(refused.value)


def test_marking_an_entry_shareable(memory):
    basic = memory.basic
    basic.add("alice", "Favourite editor: helix")
    assert basic.entries("alice", place=HERE) == []
    basic.mark("alice", "helix", 1)
    assert [e.mark for e in basic.entries("alice", place=HERE)] == ["shareable"]


def test_an_edited_entry_keeps_its_place_and_mark(memory):
    """`hermes memory edit` / the web panel's edit: a line changed where it stood is that
    entry, changed (id, place and mark kept); a new line is a new private entry."""
    from hermes.memory.operations import MemoryOperations, Scope

    basic = memory.basic
    standup = basic.add("alice", "Standup at nine", place=HERE).entry
    editor = basic.add("alice", "Favourite editor: helix").entry
    basic.mark("alice", "helix", 1)
    drawer = basic.add("alice", "Passport in the blue drawer", place=HERE).entry
    basic.mark("alice", "drawer", 0)
    assert standup and editor and drawer
    ops = MemoryOperations(memory)
    before = ops.basic_entries(Scope("alice"))
    ops.basic_edit(Scope("alice"), before, ["Standup at ten", "Favourite editor: kakoune",
                                            "Passport in the red drawer", "Likes green tea"])
    after = {e.text: e for e in basic.entries("alice")}
    assert (after["Standup at ten"].id, after["Standup at ten"].place) == (standup.id, HERE.key)
    assert (after["Favourite editor: kakoune"].id, after["Favourite editor: kakoune"].mark) \
        == (editor.id, "shareable")
    assert (after["Passport in the red drawer"].id, after["Passport in the red drawer"].mark) \
        == (drawer.id, "private")
    assert after["Likes green tea"].place == "private"
    assert [e.text for e in basic.entries("alice", place=HERE)] == \
        ["Standup at ten", "Favourite editor: kakoune"]


def test_sessions_in_a_shared_place(memory):
    store = memory.sessions
    dm = store.create("alice", "discord", channel_key="discord:dm:1")
    store.append("alice", dm.id, "user", "my landlord Wexford raised the rent")
    here = store.create("alice", "discord", channel_key="c", place=HERE)
    store.append("alice", here.id, "user", "the rent of the office is due")
    assert {s.id for s in store.list_sessions("alice")} == {dm.id, here.id}
    assert [s.id for s in store.list_sessions("alice", place=HERE)] == [here.id]
    assert [h.session.id for h in store.search("alice", "rent", place=HERE)] == [here.id]
    assert {h.session.id for h in store.search("alice", "rent")} == {dm.id, here.id}
    hits = store.search_messages("alice", "rent", place=HERE)
    assert [h.session.id for h in hits] == [here.id]
    with pytest.raises(NotFound):
        store.get("alice", dm.id, place=HERE)
    with pytest.raises(NotFound):
        store.messages("alice", dm.id, place=HERE)
    assert store.place_of("alice", here.id) == HERE


def test_a_channel_finds_its_conversations_under_a_long_private_history(memory):
    """The channel's one conversation about the kiln ranks below 60 private ones: the search
    for the channel asks deeper until it has it (or the search has no more)."""
    store = memory.sessions
    for n in range(60):
        dm = store.create("alice", "terminal")
        store.append("alice", dm.id, "user", f"the kiln glaze kiln firing kiln schedule {n}")
        store.close("alice", dm.id)
    here = store.create("alice", "discord", channel_key="c", place=HERE)
    store.append("alice", here.id, "user", "we talked about the kiln once, and about many "
                 "other things: the rota, the library, the garden, the bins, the stairs")
    store.close("alice", here.id)
    assert [h.session.id for h in store.search("alice", "kiln", limit=3, place=HERE)] == \
        [here.id]
    assert [h.session.id for h in store.search_messages("alice", "kiln", limit=3,
                                                         place=HERE)] == [here.id]
    assert here.id not in [h.session.id for h in store.search("alice", "kiln", limit=3)]


def test_recall_by_meaning_alone_and_by_common_words_in_a_shared_place(memory, rt):
    """FactRecall.nearest (session search's fact evidence by meaning) and the newest facts for
    common words (recall without vectors) read for the place too."""
    from hermes.config import FactsConfig
    from hermes.memory.facts.recall import FactRecall
    from hermes.memory.facts.store import FactStore
    from hermes.memory.facts.vectors import FactVectors
    from tests.test_embeddings import ToyEmbedder

    facts = FactStore(rt.db, FactsConfig(), rt.clock, vectors=FactVectors(rt.db, ToyEmbedder()))
    secret = facts.add("alice", "The user's garden shed holds the spare garden key").fact
    public = facts.add("alice", "The user's garden club meets in the garden", place=HERE).fact
    assert facts.vectors is not None
    facts.vectors.index("alice")
    # fused with meaning too (hybrid search: the nearest facts pass the same filters)
    assert [f.id for f in facts.search("alice", "garden", place=HERE)] == [public.id]
    assert secret.id not in {f.id for f in facts.search("alice", "spare key shed", place=HERE)}
    assert secret.id in {f.id for f in facts.search("alice", "spare key shed")}
    mine = FactRecall(facts, rt.clock).nearest("alice", "garden", limit=5, floor=0.0)
    assert mine is not None and {f.id for f in mine} == {secret.id, public.id}
    here = FactRecall(facts, rt.clock, HERE).nearest("alice", "garden", limit=5, floor=0.0)
    assert here is not None and [f.id for f in here] == [public.id]
    newest = facts.searcher.newest("alice", "garden", limit=5, floor=0.0,
                                   visible=facts.audience.items(HERE, "f"))
    assert [f.id for f in newest] == [public.id]
    assert len(facts.searcher.newest("alice", "garden", limit=5, floor=0.0)) == 2


def test_what_a_conversation_taught_is_shown_only_if_its_readers_may_see_it(memory):
    """A session search hit names the facts learned in that conversation that lifted it
    (``learned``): in a shared place only those its readers may see, whoever found them."""
    store, facts = memory.sessions, memory.facts
    here = store.create("alice", "discord", channel_key="c", place=HERE)
    said = store.append("alice", here.id, "user", "my Tesla keys are in the blue bowl")
    hidden = facts.add("alice", "The user keeps the Tesla keys in the blue bowl",
                       source_session_id=here.id, source_message_ids=[said.id], shared=0).fact
    shown = facts.add("alice", "The user drives a Tesla", source_session_id=here.id,
                      source_message_ids=[said.id]).fact
    hits = [facts.get("alice", hidden.id), facts.get("alice", shown.id)]
    for fact in hits:
        fact.score = 1.0
    mine = store.search("alice", "Tesla garage", facts=hits)
    assert {i for i, _ in mine[0].learned} == {hidden.id, shown.id}
    there = store.search("alice", "Tesla garage", facts=hits, place=HERE)
    assert [i for i, _ in there[0].learned] == [shown.id]
