"""What a turn's fact recall costs at scale, and that it stays true and scoped: the narrow index
that keeps a word's matches to the user's active facts (m024), and the scan of a clustered
user's fact vectors (hermes.memory.facts.vectors.FACT_SCAN_ROWS): approximate candidates,
exact cosines by id, another user's vectors never scanned. Toy sizes: thresholds shrunk."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from hermes.config import FactsConfig  # noqa: E402
from hermes.memory.facts import vectors as fact_vectors  # noqa: E402
from hermes.memory.facts.recall import FactRecall  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.memory.facts.vectors import FactVectors  # noqa: E402
from hermes.memory.vectors import cells as vector_cells  # noqa: E402
from tests.test_fact_vectors import ToyEmbedder  # noqa: E402

TOPICS = ["my car", "the automobile", "a tesla", "the puppy", "my dog", "a pet", "the rain",
          "an umbrella", "the bank", "some money"]


def statements_of(db, action):
    """The SQL statements ``action`` runs on ``db`` (parameters bound)."""
    seen: list[str] = []
    db.conn.set_trace_callback(seen.append)
    try:
        result = action()
    finally:
        db.conn.set_trace_callback(None)
    return result, seen


def test_recall_keeps_a_words_matches_to_the_users_active_facts_through_the_narrow_index(
        db, clock):
    facts = FactStore(db, FactsConfig(), clock)
    mine = facts.add("owner", "A kestrel nests on the old water tower").fact
    gone = facts.add("owner", "A kestrel once nested in the barn").fact
    facts.forget("owner", gone.id)
    facts.add("bob", "Bob watches a kestrel from the tower")
    recall = FactRecall(facts, clock)
    found, seen = statements_of(
        db, lambda: recall.ranked("owner", "where does the kestrel nest?", limit=5))
    assert [f.id for f in found] == [mine.id]  # not bob's, not the forgotten one
    joined = [sql for sql in seen if "facts_fts CROSS JOIN facts f" in sql]
    counts = [sql for sql in joined if sql.startswith("SELECT count(*)")]
    # The ranking reads the rows of the best bm25 matches by id (search._best_matches), and
    # the user's highest trust through m027's index.
    ranking = [sql for sql in seen if "f.id IN (" in sql and "f.trust >= " in sql]
    highest = [sql for sql in seen if sql.startswith("SELECT max(f.trust)")]
    assert counts and ranking and highest  # the word's count among my facts, and the ranking
    # (The partial index names no state column: SQLite's plan calls it "USING INDEX", and its
    # deferred seek never reads the table row, since the index's WHERE implies the query's.)
    for sql, index in [*((c, "USING INDEX idx_facts_active_user") for c in counts),
                       *((r, "COVERING INDEX idx_facts_scope") for r in ranking),
                       *((h, "USING INDEX idx_facts_active_trust (user=?)") for h in highest)]:
        plan = " ".join(str(row[-1]) for row in db.execute("EXPLAIN QUERY PLAN " + sql))
        assert index in plan, (sql, plan)


def test_a_words_count_among_my_active_facts_leaves_out_others_and_forgotten_ones(db, clock):
    """The count runs through m026's partial index (active facts only): another user's facts
    and my forgotten or replaced ones are never counted, so they never decide my words."""
    from hermes.store.fts import build_match

    facts = FactStore(db, FactsConfig(), clock)
    for i in range(3):
        facts.add("owner", f"A kestrel sighting number {i} on the tower")
    gone = facts.add("owner", "A kestrel in the barn, long ago").fact
    facts.forget("owner", gone.id)
    old = facts.add("owner", "The kestrel box is green").fact
    facts.update("owner", old.id, "The nesting box is blue")
    for i in range(5):
        facts.add("bob", f"Bob's kestrel photo {i}")
    kestrel = build_match("kestrel").terms[0]
    assert FactRecall(facts, clock).doc_count("owner", kestrel) == 3
    assert FactRecall(facts, clock).doc_count("bob", kestrel) == 5
    facts.restore("owner", gone.id)  # active again: counted again (a fresh count, below 50)
    assert FactRecall(facts, clock).doc_count("owner", kestrel) == 4


def test_the_newest_facts_holding_common_words_are_scoped_through_the_same_index(db, clock):
    facts = FactStore(db, FactsConfig(), clock)
    mine = facts.add("owner", "The kestrel tower was repainted").fact
    facts.add("bob", "Bob's kestrel tower is taller")
    found, seen = statements_of(db, lambda: facts.searcher.newest("owner", "kestrel tower",
                                                                  limit=5, floor=0.0))
    assert [f.id for f in found] == [mine.id]
    sql = next(s for s in seen if "facts_fts CROSS JOIN facts f" in s)
    plan = " ".join(str(row[-1]) for row in db.execute("EXPLAIN QUERY PLAN " + sql))
    assert "idx_facts_scope" in plan


@pytest.fixture
def clustered(db, clock, monkeypatch):
    """Owner's facts clustered into cells (a 'long' history at toy size), bob's too."""
    monkeypatch.setattr(vector_cells, "IVF_MIN", 8)
    monkeypatch.setattr(vector_cells, "SCAN_ROWS", 100)
    facts = FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, ToyEmbedder()))
    mine = {t: [facts.add("owner", f"Note {i}: {t} ({i})").fact.id for i in range(3)]
            for t in TOPICS}
    bobs = [facts.add("bob", f"Bob's note {i} about the car and the dog").fact.id
            for i in range(12)]
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    assert vector_cells.version(db, "fact", "owner", "toy") == 1
    return facts, mine, bobs


def scanned_ids(similarity) -> set[int]:
    return set(similarity._matrix.ids[similarity._rows].tolist())


def test_facts_scan_their_own_budget_of_rows_in_the_nearest_cells(clustered, monkeypatch):
    facts, mine, bobs = clustered
    everything = {f for ids in mine.values() for f in ids}
    monkeypatch.setattr(fact_vectors, "FACT_SCAN_ROWS", 4)
    narrow = scanned_ids(facts.vectors.similarity("owner", "which car?"))
    # the nearest cells only (the car's), not all of them
    assert narrow == {*mine["my car"], *mine["the automobile"], *mine["a tesla"]}
    monkeypatch.setattr(fact_vectors, "FACT_SCAN_ROWS", 1000)
    assert scanned_ids(facts.vectors.similarity("owner", "which car?")) == everything
    assert not narrow & set(bobs)


def test_the_nearest_facts_of_a_rounded_scan_are_the_exact_nearest_with_exact_cosines(
        clustered, monkeypatch):
    """The cells are scanned with the query rounded to int8 (candidates only): the nearest
    facts and their cosines are the exact float scan's."""
    facts, mine, bobs = clustered
    monkeypatch.setattr(fact_vectors, "FACT_SCAN_ROWS", 1000)  # every cell
    similarity = facts.vectors.similarity("owner", "which car or automobile?")
    matrix = similarity._matrix
    rows = np.arange(len(matrix.ids))
    exact = matrix.cosines_at(similarity._query, rows)
    cosine = {int(i): float(c) for i, c in zip(matrix.ids, exact, strict=True)}
    for k in (1, 5, 12):
        got = similarity.nearest(k)
        # the k best cosines (ties may pick either fact), each the fact's exact cosine
        assert sorted(got.values(), reverse=True) == pytest.approx(
            sorted(exact, reverse=True)[:k], abs=1e-6)
        assert got == pytest.approx({i: cosine[i] for i in got}, abs=1e-6)
        assert not set(got) & set(bobs)


def test_a_fact_found_by_words_outside_the_scanned_cells_gets_its_exact_cosine(
        clustered, monkeypatch):
    facts, mine, bobs = clustered
    monkeypatch.setattr(fact_vectors, "FACT_SCAN_ROWS", 4)
    umbrella = facts.add("owner", "Ziggurat is the name of my umbrella").fact
    facts.vectors.index("owner")
    query = "which car is called ziggurat?"
    similarity = facts.vectors.similarity("owner", query)
    assert umbrella.id not in scanned_ids(similarity)  # by meaning it is far from the query
    found = facts.search("owner", query, explain=True, limit=40)
    by_id = {f.id: f for f in found}
    assert umbrella.id in by_id  # found by its word
    toy = ToyEmbedder()
    exact = float(toy.embed_query(query) @ toy._vectors([umbrella.content])[0])
    assert by_id[umbrella.id].explain["cosine"] == pytest.approx(exact, abs=0.01)
    assert not set(by_id) & set(bobs)


def test_a_frequent_words_count_is_remembered_without_asking_the_index_again(
        db, clock, monkeypatch):
    from hermes.memory.facts import recall as fact_recall
    from hermes.store.fts import build_match

    monkeypatch.setattr(fact_recall, "FRESH_COUNT", 1)  # two facts make a word frequent
    facts = FactStore(db, FactsConfig(), clock)
    for n in range(3):
        facts.add("owner", f"Kestrel sighting number {n}")
    facts.add("bob", "Bob saw a kestrel too")
    recall = FactRecall(facts, clock)
    term = build_match("kestrel").terms[0]
    assert recall.doc_count("owner", term) == 3
    assert recall.doc_count("bob", term) == 1  # remembered per user
    facts.add("owner", "Kestrel sighting number 4")
    count, seen = statements_of(db, lambda: recall.doc_count("owner", term))
    assert (count, seen) == (3, [])  # remembered: no statement at all
    clock.advance(seconds=fact_recall.DF_CACHE_SECONDS + 1)
    assert recall.doc_count("owner", term) == 4  # counted again once it is old


def test_a_word_in_fewer_than_common_facts_of_anyone_is_not_counted_in_mine(
        db, clock, monkeypatch):
    """FactRecall.rarity: a word that fewer than COMMON_TERM_DOCS facts of anyone hold is
    searchable once one of MY active facts holds it; counting mine (a row read a match) is
    skipped. Another user's facts and my forgotten ones never make a word searchable, and a
    word common overall is still counted in mine."""
    from hermes.memory.facts import recall as fact_recall
    from hermes.store.fts import build_match

    monkeypatch.setattr(fact_recall, "FRESH_COUNT", 1)
    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 6)
    facts = FactStore(db, FactsConfig(), clock)
    for i in range(2):
        facts.add("owner", f"A kestrel sighting number {i}")
        facts.add("bob", f"Bob's kestrel photo {i}")
    gone = facts.add("owner", "A heron by the pond").fact
    facts.forget("owner", gone.id)
    for i in range(3):
        facts.add("bob", f"Bob's heron picture {i}")
    for i in range(6):
        facts.add("bob", f"Bob's falcon drawing {i}")
    facts.add("owner", "A falcon over the field")
    term = {w: build_match(w).terms[0] for w in ("kestrel", "heron", "falcon")}
    recall = FactRecall(facts, clock)
    assert recall.rarity("owner", term["kestrel"]) is None  # mine hold it; not counted
    assert recall.doc_count("owner", term["kestrel"]) == 2  # the count, when asked
    assert recall.rarity("owner", term["heron"]) == 0  # bob's and my forgotten one only
    assert recall.rarity("bob", term["heron"]) is None
    assert recall.rarity("owner", term["falcon"]) == 1  # 7 of anyone: mine counted
    assert recall.rarity("bob", term["falcon"]) == 6  # common among bob's facts


def test_more_searchable_words_than_recall_terms_are_counted_in_my_facts_for_the_rarest(
        db, clock, monkeypatch):
    from hermes.memory.facts import recall as fact_recall

    monkeypatch.setattr(fact_recall, "FRESH_COUNT", 1)
    monkeypatch.setattr(fact_recall, "RECALL_TERMS", 2)
    facts = FactStore(db, FactsConfig(), clock)
    for word, n in (("alpha", 4), ("beta", 2), ("gamma", 3)):
        for i in range(n):
            facts.add("owner", f"The {word} note number {i}")
    for i in range(10):  # beta is frequent overall, rare among my facts
        facts.add("bob", f"Bob's beta note {i}")
    recall = FactRecall(facts, clock)
    assert recall.selective_query("owner", "alpha beta gamma") == '"beta" "gamma"'
    # Two words or fewer are all searched, in the message's order.
    assert recall.selective_query("owner", "gamma beta") == '"gamma" "beta"'
