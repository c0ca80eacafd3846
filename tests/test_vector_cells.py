"""The coarse index over a long history (hermes.memory.vectors.cells): clustered by the
background vector pass, scanned cell by cell by a search, scoped by user, and true to edits.
Thresholds are shrunk so that a few toy messages make a "long" history."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from hermes.config import FactsConfig  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.memory.facts.vectors import FactVectors  # noqa: E402
from hermes.memory.sessions import semantic  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from hermes.memory.vectors import cells as vector_cells  # noqa: E402
from tests.test_embeddings import ToyEmbedder, say  # noqa: E402

TOPICS = ["my automobile", "the car again", "a puppy", "my dog", "rain all day",
          "an umbrella", "the bank", "bank fees"]


@pytest.fixture(autouse=True)
def small(monkeypatch):
    monkeypatch.setattr(vector_cells, "IVF_MIN", 8)
    monkeypatch.setattr(vector_cells, "SCAN_ROWS", 4)


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()),
                        redact_secrets=False)


def history(store, user, copies=2):
    return say(store, store.clock, user, *(TOPICS * copies))


def test_the_background_pass_clusters_and_a_search_scans_only_the_nearest_cells(store, db):
    ids = history(store, "owner")
    few = MessageVectors(db, store.vectors.embedder)
    assert few.nearest("owner", "car", 2) and few.matrix("owner").cells is None  # inline only
    store.vectors.index("owner")  # the background pass: 16 vectors >= IVF_MIN
    assert vector_cells.version(db, "message", "owner", "toy") == 1
    cells = db.execute("SELECT cell FROM message_vectors WHERE user = 'owner'").fetchall()
    assert all(c is not None for (c,) in cells)
    matrix = store.vectors.matrix("owner")  # this process reloads: the centroids are new
    assert matrix.cells is not None
    scanned, _ = matrix.cells.scan(store.vectors.embedder.embed_query("car"))
    assert 0 < len(scanned) < len(ids)
    cars = {ids[0], ids[1], ids[8], ids[9]}
    assert {m for m, _ in store.vectors.nearest("owner", "car", 4)} == cars
    sims = semantic.similarities(store.vectors, "owner", "car")
    assert set(sims.nearest(4)) >= cars
    message, window = sims.of([ids[0], ids[2], 10**9])
    exact = matrix.id_rows().cosines(store.vectors.embedder.embed_query("car"),
                                     np.searchsorted(matrix.ids, [ids[0], ids[2]]))
    assert np.allclose(message[:2], exact) and np.isnan(message[2]) and np.isnan(window[2])
    assert store.search_messages("owner", "what about the vehicle?")[0].message.id in cars


def test_cells_never_reach_another_users_vectors(store, db):
    mine = history(store, "owner")
    bobs = say(store, store.clock, "bob", *(["car car"] * 10))
    store.vectors.index("owner")
    store.vectors.index("bob")
    assert vector_cells.version(db, "message", "bob", "toy") == 1
    matrix = store.vectors.matrix("owner")
    assert set(matrix.ids.tolist()) == set(mine)
    found = [m for m, _ in store.vectors.nearest("owner", "car", 10)]
    assert found and not set(found) & set(bobs)
    assert not set(semantic.similarities(store.vectors, "owner", "car").nearest(10)) & set(bobs)


def test_an_edit_reaches_a_clustered_history_and_new_vectors_get_their_cell(store, db):
    ids = history(store, "owner")
    store.vectors.index("owner")
    held = MessageVectors(db, store.vectors.embedder)
    assert ids[0] in [m for m, _ in held.nearest("owner", "car", 4)]
    db.execute("UPDATE messages SET content = 'bank fees' WHERE id = ?", [ids[0]])
    assert ids[0] not in [m for m, c in held.nearest("owner", "car", 4) if c > 0.5]
    (cell,) = db.execute("SELECT cell FROM message_vectors WHERE message_id = ?",
                         [ids[0]]).fetchone()  # re-embedded by that search, with its cell
    assert cell is not None
    (late,) = say(store, store.clock, "owner", "a new automobile")
    assert late in [m for m, _ in held.nearest("owner", "car", 5)]


def test_vectors_of_older_centroids_are_scanned_until_clustered_again(store, db, monkeypatch):
    ids = history(store, "owner")
    store.vectors.index("owner")
    db.execute("UPDATE message_vectors SET cell = NULL WHERE message_id = ?", [ids[1]])
    fresh = MessageVectors(db, store.vectors.embedder)
    matrix = fresh.matrix("owner")
    row = int(np.searchsorted(matrix.ids, ids[1]))
    assert matrix.cells.cell[row] == -1 and matrix.cells.pos[row] < matrix.cells.first
    assert ids[1] in [m for m, _ in fresh.nearest("owner", "car", 4)]
    monkeypatch.setattr(vector_cells, "GROWTH", 1)
    assert vector_cells.maybe_cluster(db, "message", "owner", "toy",
                                      lambda rows: np.stack([np.frombuffer(
                                          r[1], np.float16).astype(np.float32) for r in rows]))
    assert vector_cells.version(db, "message", "owner", "toy") == 2
    assert fresh.matrix("owner").cells.centroids.version == 2  # reloaded


def test_fact_cells_find_by_meaning_and_stay_in_their_users_facts(db, clock):
    toy = ToyEmbedder()
    facts = FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, toy))
    mine = [facts.add("owner", f"The user mentioned {t} ({i})").fact.id
            for i, t in enumerate(TOPICS * 2)]
    bobs = [facts.add("bob", f"Bob said car {i}").fact.id for i in range(10)]
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    assert vector_cells.version(db, "fact", "owner", "toy") == 1
    similarity = facts.vectors.similarity("owner", "which vehicle?")
    assert similarity._rows is not None and len(similarity._rows) < len(mine)
    near = similarity.nearest(4)
    assert set(near) == {mine[0], mine[1], mine[8], mine[9]}
    assert not set(similarity.nearest(20)) & set(bobs)
    assert set(similarity.of([mine[2], bobs[0]])) == {mine[2]}
    assert facts.search("owner", "which vehicle?")[0].id in near


def test_appending_rows_keeps_every_older_view_and_the_cell_index_rebuilds_past_its_tail():
    from hermes.memory.vectors.matrix import Int8Rows

    rng = np.random.default_rng(0)
    unit = rng.standard_normal((40, 8)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    first = Int8Rows.quantized(unit[:10])
    second = first.appended(Int8Rows.quantized(unit[10:20]))
    third = second.appended(Int8Rows.quantized(unit[20:30]))  # into second's spare room
    fork = second.appended(Int8Rows.quantized(unit[30:40]))  # second's room is taken: a copy
    assert (len(first), len(second), len(third), len(fork)) == (10, 20, 30, 30)
    assert np.allclose(third.dequantized(slice(20, 30)), unit[20:30], atol=0.02)
    assert np.allclose(fork.dequantized(slice(20, 30)), unit[30:40], atol=0.02)
    assert np.allclose(third.dequantized(slice(0, 20)), fork.dequantized(slice(0, 20)))
    centroids = vector_cells.Centroids(1, unit[:4].copy())
    index = vector_cells.CellIndex(centroids, first, np.arange(10) % 4)
    grown = index.appended(Int8Rows.quantized(unit[10:11]), [2])  # 1 added: kept as the tail
    assert grown.built == 10 and len(grown) == 11
    rows, cosines = grown.scan(unit[10], scan=1)
    assert 10 in rows.tolist()  # the added row is always scanned
    assert np.allclose(cosines, grown.cosines(unit[10], rows))
    # with the query rounded to int8 (a search's candidates): the same rows, nearly the same
    rounded_rows, rounded = grown.scan(unit[10], scan=1, rounded=True)
    assert rounded_rows.tolist() == rows.tolist()
    assert np.allclose(rounded, cosines, atol=0.005) and not np.array_equal(rounded, cosines)
    rebuilt = index.appended(Int8Rows.quantized(unit[10:30]), np.arange(20) % 4)  # > SCAN_ROWS // 4
    assert rebuilt.built == 30
    assert np.allclose(rebuilt.owner_rows().dequantized(slice(0, 30)),
                       third.dequantized(slice(0, 30)))


class HashEmbedder:
    """A unit vector per text, as random as a real model's and without ties (32 dimensions)."""

    model_id = "hash"

    def embed(self, texts):
        import zlib

        out = np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(32)
                        for t in texts]).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]


def test_the_probed_search_finds_what_the_exact_scan_does_with_every_cell_read(
        db, clock, monkeypatch):
    """The cells' scan (its cosines with the query rounded to int8) and the nearest windows
    (found with the rounded query, ordered exactly) against the full float scan of every
    row, every cell probed: the same nearest 10 messages and windows in the same order, and
    the same exact cosines by id; another user's messages never among them."""
    from hermes.memory.sessions import held_vectors

    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, HashEmbedder()),
                         redact_secrets=False)
    ids = []
    for s in range(12):
        ids += say(store, clock, "owner", *(f"owner {s} {i}" for i in range(15)))
    bobs = say(store, clock, "bob", *(f"bob {i}" for i in range(40)))
    store.vectors.index("owner")
    store.vectors.index("bob")
    monkeypatch.setattr(vector_cells, "SCAN_ROWS", 10_000)  # every cell
    monkeypatch.setattr(held_vectors, "WINDOW_SEEDS", 10_000)
    matrix = store.vectors.matrix("owner")
    assert matrix.cells is not None and len(matrix.cells.centroids.vectors) > 1
    win = semantic._windows_of(store.vectors, "owner", matrix)
    for text in ("what did I say", "owner 3 7", "bob 5", "another question"):
        query = store.vectors.embedder.embed_query(text)
        cos = matrix.cosines(query)
        padded = np.append(cos, np.float32(0))
        windows = (cos + padded[win.prev] + padded[win.next]) / win.norm
        sims = semantic.similarities(store.vectors, "owner", text)
        assert sims.nearest_messages(10) == [int(matrix.ids[r]) for r in np.argsort(-cos)[:10]]
        assert sims.nearest_windows(10) == [int(matrix.ids[r])
                                            for r in np.argsort(-windows)[:10]]
        message, window = sims.of(ids[::7])
        rows = np.searchsorted(matrix.ids, ids[::7])
        assert np.allclose(message, cos[rows], atol=1e-6)
        assert np.allclose(window, windows[rows], atol=1e-6)
        assert not set(sims.nearest(20)) & set(bobs)


def test_vectors_whose_messages_are_gone_have_no_neighbours_in_the_windows(db, clock):
    """A vector read while its message is deleted (between the two reads of a load) stands
    alone: no window joins it to another such vector or to a message of a session."""
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, HashEmbedder()),
                         redact_secrets=False)
    ids = say(store, clock, "owner", "one", "two", "three")
    store.vectors.index("owner")
    blob = HashEmbedder().embed(["gone"])[0].astype(np.float16).tobytes()
    db.execute("PRAGMA foreign_keys = OFF")  # no message row: as if deleted in between
    for missing in (ids[-1] + 100, ids[-1] + 200):
        db.execute("INSERT INTO message_vectors (message_id, user, model, vector) "
                   "VALUES (?, 'owner', 'hash', ?)", [missing, blob])
    db.execute("PRAGMA foreign_keys = ON")
    matrix = store.vectors.matrix("owner")
    win = semantic._windows_of(store.vectors, "owner", matrix)
    assert len(matrix.ids) == 5
    assert win.prev.tolist() == [-1, 0, 1, -1, -1] and win.next.tolist() == [1, 2, -1, -1, -1]
    assert np.allclose(win.norm[3:], 1.0, atol=0.01)  # its own vector alone


def test_without_simsimd_the_scan_multiplies_in_numpy_with_the_same_result(
        db, clock, monkeypatch, caplog):
    """An install that predates the simsimd dependency (a pull without `pip install -e .`):
    the probed search finds the same messages and windows with the same cosines, says once
    in the log why it is slower, and never fails."""
    import sys

    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, HashEmbedder()),
                         redact_secrets=False)
    for s in range(6):
        say(store, clock, "owner", *(f"owner {s} {i}" for i in range(15)))
    bobs = say(store, clock, "bob", *(f"bob {i}" for i in range(40)))
    store.vectors.index("owner")
    store.vectors.index("bob")
    matrix = store.vectors.matrix("owner")
    assert matrix.cells is not None
    texts = ("what did I say", "owner 3 7", "bob 5")

    def found():
        out = []
        for text in texts:
            sims = semantic.similarities(store.vectors, "owner", text)
            query = vector_cells.rounded_query(store.vectors.embedder.embed_query(text))
            out.append((sims.nearest_messages(8), sims.nearest_windows(8),
                        matrix.cells.rounded_cosines(query, np.arange(len(matrix.ids)))))
        return out

    with_simsimd = found()
    monkeypatch.setitem(sys.modules, "simsimd", None)  # `import simsimd` raises ImportError
    monkeypatch.setattr(vector_cells, "_SIMSIMD", [])
    with caplog.at_level("WARNING", logger="hermes.memory.vectors.cells"):
        without = found()
    for (m1, w1, c1), (m2, w2, c2) in zip(with_simsimd, without, strict=True):
        assert m1 == m2 and w1 == w2 and np.array_equal(c1, c2)
        assert not set(m2 + w2) & set(bobs)
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "simsimd cannot be imported" in caplog.records[0].message
    assert len(caplog.records) == 1
