"""A long history's vectors kept under <home>/cache/vectors (hermes.memory.vectors.file): saved
once the session windows are built, mapped by the next process instead of read out of SQLite,
kept true by the change log, never served to another user, rebuilt when damaged, stale or of
another model, and a full disk leaves the in-memory path. Thresholds are shrunk so that a few
toy messages make a "long" history; each test runs with and without cells."""

from __future__ import annotations

import logging
import mmap
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import semantic  # noqa: E402
from hermes.memory.sessions import vectors as message_vectors  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from hermes.memory.vectors import cells as vector_cells  # noqa: E402
from hermes.memory.vectors import file as vector_file  # noqa: E402
from hermes.memory.vectors.matrix import prune_changes  # noqa: E402
from hermes.store.db import connect  # noqa: E402
from tests.test_embeddings import ToyEmbedder, say  # noqa: E402

TOPICS = ["my automobile", "the car again", "a puppy", "my dog", "rain all day",
          "an umbrella", "the bank", "bank fees"]


@pytest.fixture(autouse=True, params=["rows", "cells"])
def small(request, monkeypatch):
    monkeypatch.setattr(message_vectors, "CACHE_MIN", 4)
    monkeypatch.setattr(message_vectors, "REFRESH", 1)
    if request.param == "cells":
        monkeypatch.setattr(vector_cells, "IVF_MIN", 8)
        monkeypatch.setattr(vector_cells, "SCAN_ROWS", 4)
    else:
        monkeypatch.setattr(vector_cells, "IVF_MIN", 10**9)
    return request.param


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "home" / "cache"


@pytest.fixture
def store(db, clock, cache):
    return SessionStore(db, clock=clock,
                        vectors=MessageVectors(db, ToyEmbedder(), cache, clock=clock),
                        redact_secrets=False)


def new_process(rt, cache, embedder=None):
    """What a new process holds: its own connection, nothing in memory."""
    return MessageVectors(connect(rt.settings.home_path / "hermes.db"),
                          embedder or ToyEmbedder(), cache, clock=rt.clock)


def searched(vectors, user, text="car"):
    sims = semantic.similarities(vectors, user, text)
    return sims, vectors.matrix(user)


def mapped(matrix):
    """Whether the process holds these vectors in a mapped file (not read into memory)."""
    storage = matrix.cells.storage if matrix.cells is not None else matrix.rows
    base = storage.codes
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base is not None


def history(store, user="owner", copies=2):
    ids = say(store, store.clock, user, *(TOPICS * copies))
    store.vectors.index(user)  # every vector, clustered when "cells"
    return ids


def test_a_new_process_maps_the_saved_file_and_finds_the_same(store, rt, cache, small):
    ids = history(store)
    first, held = searched(store.vectors, "owner")
    path = vector_file.path_for(cache, "message", "owner", "toy")
    assert path.exists() and mapped(store.vectors.matrix("owner"))  # saved, then mapped back
    assert (held.cells is not None) == (small == "cells")
    other = new_process(rt, cache)
    sims, matrix = searched(other, "owner")
    assert mapped(matrix) and "owner" in other.windows
    assert matrix.ids.tolist() == sorted(ids)
    assert sims.nearest(4) == first.nearest(4)
    assert np.allclose(sims.of(ids)[0], first.of(ids)[0])
    assert np.allclose(sims.of(ids)[1], first.of(ids)[1])


def test_an_edit_and_new_messages_reach_a_process_that_maps_an_older_file(store, rt, cache):
    ids = history(store)
    searched(store.vectors, "owner")  # the file: before the edit
    rt.db.execute("UPDATE messages SET content = 'bank fees' WHERE id = ?", [ids[0]])
    (late,) = say(store, store.clock, "owner", "a new automobile")
    other = new_process(rt, cache)
    sims, matrix = searched(other, "owner")  # re-embeds the edited message, reads the new one
    assert mapped(matrix) or matrix.cells is not None  # (an edit rebuilds a clustered layout)
    message, _ = sims.of([ids[0], late])
    assert message[0] < 0.5 and message[1] > 0.9
    assert late in sims.nearest(4) and ids[0] not in sims.nearest(2)
    third = new_process(rt, cache)  # what the second process saved, the edit included
    assert np.allclose(searched(third, "owner")[0].of([ids[0], late])[0], message, atol=1e-6)
    (later,) = say(store, store.clock, "owner", "my automobile once more")
    assert later in searched(third, "owner")[0].nearest(4)  # and once mapped, the same


def test_another_users_vectors_are_never_read_from_a_cache_file(store, rt, cache, caplog):
    mine = history(store)
    bobs = say(store, store.clock, "bob", *(["car car"] * 5))
    searched(store.vectors, "owner")
    owners = vector_file.path_for(cache, "message", "owner", "toy")
    bobs_file = vector_file.path_for(cache, "message", "bob", "toy")
    assert owners.exists() and not bobs_file.exists()
    shutil.copy(owners, bobs_file)  # the owner's file where bob's would be
    other = new_process(rt, cache)
    with caplog.at_level(logging.WARNING):
        sims, matrix = searched(other, "bob")
    assert set(matrix.ids.tolist()) == set(bobs) and not set(sims.nearest(10)) & set(mine)
    assert "another user's" in caplog.text
    assert set(searched(other, "owner")[1].ids.tolist()) == set(mine)


@pytest.mark.parametrize("damage", ["truncated", "header", "windows", "another model",
                                    "another database", "an older layout",
                                    "newer than the database", "older than the change log"])
def test_a_damaged_stale_or_foreign_file_is_rebuilt(store, rt, cache, caplog, damage, tmp_path):
    ids = history(store)
    exact = searched(MessageVectors(rt.db, ToyEmbedder()), "owner")[0]  # no file involved
    searched(store.vectors, "owner")
    path = vector_file.path_for(cache, "message", "owner", "toy")
    data = bytearray(path.read_bytes())
    embedder = ToyEmbedder()
    if damage == "truncated":
        data = data[: len(data) // 2 + 10]
    elif damage == "header":
        data[20] ^= 0xFF
    elif damage == "windows":  # the session windows' array, checked by its CRC
        found = vector_file.load(path, "message", "owner", "toy")
        at = vector_file.ALIGN * 1 + found.meta["arrays"]["prev"]["offset"]
        del found
        data[at] ^= 0x01
    elif damage == "an older layout":  # whole, but without an array this code reads
        found = vector_file.load(path, "message", "owner", "toy")
        arrays = {k: np.array(v) for k, v in found.arrays.items() if k != "prev"}
        meta = dict(found.meta)
        del found
        vector_file.save(path, meta, arrays)
        data = bytearray(path.read_bytes())
    elif damage == "another model":  # a file of model "toy" where "toy2"'s would be
        embedder.model_id = "toy2"
        path = vector_file.path_for(cache, "message", "owner", "toy2")
    elif damage == "another database":  # the same user and ids, another vector, unlogged
        rt.db.execute("UPDATE message_vectors SET vector = ? WHERE message_id = ?",
                      [np.full(5, 0.4472, np.float16).tobytes(), ids[0]])
        rt.db.execute("DELETE FROM vector_changes WHERE user = 'owner' AND item_id = ?",
                      [ids[0]])
        rt.db.execute("INSERT INTO vector_changes (kind, user, model, item_id) "
                      "VALUES ('message', 'someone', 'toy', 1)")  # the log goes on
    elif damage == "newer than the database":  # a home restored from an older backup
        found = vector_file.load(path, "message", "owner", "toy")
        arrays = {k: np.array(v) for k, v in found.arrays.items()}
        meta = {**found.meta, "seq": int(found.meta["seq"]) + 1000}
        del found
        vector_file.save(path, meta, arrays)
        data = bytearray(path.read_bytes())
    elif damage == "older than the change log":  # changes since the file, then pruned away
        say(store, store.clock, "owner", "a late automobile", "a late puppy")
        MessageVectors(rt.db, ToyEmbedder()).index("owner")  # logged, no file kept
        assert prune_changes(rt.db, keep=1) > 0  # the log now starts after the file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data))
    other = new_process(rt, cache, embedder)
    with caplog.at_level(logging.WARNING):
        sims, matrix = searched(other, "owner")
    assert "not used" in caplog.text and len(caplog.records) == 1
    if damage in ("newer than the database", "older than the change log"):
        assert damage in caplog.text
        assert sorted(matrix.ids.tolist()) == sorted(
            r[0] for r in rt.db.execute("SELECT message_id FROM message_vectors"))
        return
    if damage == "another database":
        return
    assert vector_file.load(path, "message", "owner", embedder.model_id)  # whole again
    assert set(sims.nearest(4)) == set(exact.nearest(4))  # copies tie: any order
    assert np.allclose(sims.of(ids)[0], exact.of(ids)[0], atol=1e-6)
    caplog.clear()
    again = new_process(rt, cache, embedder)  # the rebuilt file is used, silently
    with caplog.at_level(logging.WARNING):
        assert mapped(searched(again, "owner")[1]) and not caplog.text


def test_a_full_disk_leaves_the_vectors_in_memory_with_one_line(store, rt, cache, caplog):
    ids = say(store, store.clock, "owner", *(TOPICS * 2))
    MessageVectors(rt.db, ToyEmbedder()).index("owner")  # a pass that keeps no file
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))  # writes past 4 kB fail: EFBIG
    try:
        with caplog.at_level(logging.WARNING):
            sims, matrix = searched(store.vectors, "owner")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert "could not keep the vectors" in caplog.text and len(caplog.records) == 1
    assert not mapped(matrix) and ids[0] in sims.nearest(4)
    assert not list((cache / "vectors").glob("*"))  # no half-written file left


def two_users_files(store, cache):
    """owner's and bob's histories searched, so each has its file; their paths."""
    history(store)
    history(store, "bob")
    searched(store.vectors, "owner")
    searched(store.vectors, "bob")
    owners = vector_file.path_for(cache, "message", "owner", "toy")
    bobs = vector_file.path_for(cache, "message", "bob", "toy")
    assert owners.exists() and bobs.exists()
    return owners, bobs


def test_redacting_a_users_messages_discards_their_file_only(store, rt, cache):
    from hermes.memory.transfer.redact_stored import redact_stored

    say(store, store.clock, "owner", "deploy with glpat-xY7zK2mN9pQ4rS6tU8vW please")
    owners, bobs = two_users_files(store, cache)
    assert redact_stored(rt, "owner").messages == 1
    assert not owners.exists() and bobs.exists()


def test_an_edit_and_a_deletion_change_a_clustered_history_in_place(store, rt, cache, small):
    if small != "cells":
        pytest.skip("a history without cells is read again whole (a few thousand rows)")
    ids = history(store)
    searched(store.vectors, "owner")  # saved, mapped back
    other = new_process(rt, cache)
    searched(other, "owner")
    links = other.windows["owner"].prev
    rt.db.execute("UPDATE messages SET content = 'bank fees' WHERE id = ?", [ids[0]])
    rt.db.execute("DELETE FROM messages WHERE id = ?", [ids[3]])
    sims, matrix = searched(other, "owner")  # re-embeds ids[0]; ids[3] has no vector now
    assert other.windows["owner"].prev is links  # the windows were not built again
    assert mapped(matrix) and matrix.cells.holes  # nor the rows read again
    message, window = sims.of([ids[3]])
    assert np.isnan(message[0]) and np.isnan(window[0]) and ids[3] not in sims.nearest(16)
    truth = searched(MessageVectors(rt.db, ToyEmbedder()), "owner")[0]  # read whole, no file
    alive = [m for m in ids if m != ids[3]]
    assert np.allclose(sims.of(alive)[0], truth.of(alive)[0], atol=1e-6)
    assert sims.nearest_messages(2) == truth.nearest_messages(2)  # (cars: ids[1], ids[9])
    # the windows around the edited message are measured again (it kept its neighbours); the
    # deleted one's neighbours keep a window of two (read whole: they are joined)
    away = [m for m in alive if abs(m - ids[3]) > 1]
    assert np.allclose(sims.of(away)[1], truth.of(away)[1], atol=1e-6)
    assert not np.allclose(sims.of([ids[2]])[1], truth.of([ids[2]])[1], atol=1e-3)
    third = new_process(rt, cache)  # the file the second process saved holds all of it
    again = searched(third, "owner")[0]
    assert np.allclose(again.of(alive)[0], sims.of(alive)[0], atol=1e-6)
    assert np.allclose(again.of(alive)[1], sims.of(alive)[1], atol=1e-6)
    assert np.isnan(again.of([ids[3]])[0][0])


def test_the_background_pass_saves_the_file_the_next_process_maps(store, rt, cache, caplog):
    ids = say(store, store.clock, "owner", *(TOPICS * 2))
    path = vector_file.path_for(cache, "message", "owner", "toy")
    store.vectors.index("owner")  # hermes sessions index, the daemon's vector job
    assert path.exists()
    other = new_process(rt, cache)
    matrix = other.matrix("owner")
    assert mapped(matrix) and "owner" in other.windows  # the windows are in it, built once
    saved = vector_file.load(path, "message", "owner", "toy").meta["seq"]
    (late,) = say(store, store.clock, "owner", "a new automobile")
    MessageVectors(rt.db, ToyEmbedder(), cache).index("owner")  # another pass: the file again
    assert vector_file.load(path, "message", "owner", "toy").meta["seq"] > saved  # saved again
    third = new_process(rt, cache)
    assert mapped(third.matrix("owner")) and late in third.matrix("owner").ids.tolist()
    assert late in searched(third, "owner")[0].nearest(4)
    assert sorted(ids + [late]) == third.matrix("owner").ids.tolist()


def abandoned(path):
    """A temporary file as a write killed midway leaves it (its process gone)."""
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    left = path.with_name(f".{path.name}.{gone.pid}-{gone.pid}.tmp")
    left.parent.mkdir(parents=True, exist_ok=True)
    left.write_bytes(vector_file.MAGIC + b"the old vectors")
    return left


def test_a_write_killed_midway_leaves_no_file_behind_for_long(store, rt, cache):
    """kill -9 (or the OOM killer) while a file is written leaves its temporary file, as large
    as the file (~430 MB at 900k vectors): the next save removes it, not a running write's."""
    path = vector_file.path_for(cache, "message", "owner", "toy")
    left = abandoned(path)
    running = path.with_name(f".{path.name}.{os.getppid()}-1.tmp")  # a live process's write
    running.write_bytes(b"under way")
    history(store)  # the background pass saves the file
    searched(store.vectors, "owner")
    assert path.exists() and not left.exists() and running.exists()


def test_redacting_removes_a_killed_writes_copy_too(store, rt, cache):
    from hermes.memory.transfer.redact_stored import redact_stored

    say(store, store.clock, "owner", "deploy with glpat-xY7zK2mN9pQ4rS6tU8vW please")
    history(store)
    searched(store.vectors, "owner")
    left = abandoned(vector_file.path_for(cache, "message", "owner", "toy"))
    assert redact_stored(rt, "owner").messages == 1
    assert not left.exists()


class HeldAfterFirst(dict):
    """Arrays whose writing (the third pass over them in save) stops after the first one until
    ``go`` is set: a write under way in one thread while another thread saves."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        import threading

        self.calls, self.writing, self.go = 0, threading.Event(), threading.Event()

    def items(self):
        self.calls += 1
        for i, item in enumerate(super().items()):
            if self.calls == 3 and i == 1:
                self.writing.set()
                assert self.go.wait(10)
            yield item


def test_two_threads_of_one_process_saving_one_file_do_not_mix_their_bytes(tmp_path):
    """The daemon's vector job and a search save with their own MessageVectors: each write has
    its own temporary file (one per process was shared, and the two writes interleaved)."""
    import threading

    path = vector_file.path_for(tmp_path, "message", "owner", "toy")
    arrays = {"ids": np.arange(3000, dtype=np.int64), "prev": np.arange(3000, dtype=np.int64)}
    meta = {"kind": "message", "user": "owner", "model": "toy", "checked": ["ids", "prev"]}
    held = HeldAfterFirst({k: v + 1 for k, v in arrays.items()})
    errors = []

    def first():
        try:
            vector_file.save(path, {**meta, "seq": 1}, held)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    assert held.writing.wait(10)
    vector_file.save(path, {**meta, "seq": 2}, arrays)  # the other thread, meanwhile
    held.go.set()
    thread.join(10)
    assert not errors
    found = vector_file.load(path, "message", "owner", "toy")  # whole: one of the two
    assert found.meta["seq"] == 1 and found.arrays["prev"][0] == 1
    assert not list(path.parent.glob(".*.tmp"))


@pytest.mark.parametrize("broken", ["a file where the directory goes", "a full disk"])
def test_a_cache_that_cannot_take_the_file_costs_the_background_pass_no_load(
        store, rt, cache, caplog, monkeypatch, broken):
    """The daemon's vector pass, each time it embeds: with a cache it cannot write, it used to
    load every vector and build the windows for a save that failed (12 s CPU at 900k)."""
    say(store, store.clock, "owner", *(TOPICS * 2))
    MessageVectors(rt.db, ToyEmbedder()).index("owner")  # vectors, no file
    monkeypatch.setattr(message_vectors, "_cannot_keep", set())
    if broken == "a full disk":
        usage = shutil.disk_usage(cache.parent)
        monkeypatch.setattr(message_vectors.shutil, "disk_usage",
                            lambda path: usage._replace(free=10))
    else:
        cache.mkdir(parents=True)
        (cache / "vectors").write_text("not a directory")
    loads = []
    for _ in range(2):  # two passes after new messages
        say(store, store.clock, "owner", "another automobile")
        vectors = MessageVectors(rt.db, ToyEmbedder(), cache)
        monkeypatch.setattr(vectors, "_load", lambda user: loads.append(user))
        with caplog.at_level(logging.WARNING):
            assert vectors.index("owner") == 1
    assert loads == []  # the history was never loaded for the save
    (line,) = [r.getMessage() for r in caplog.records]  # said once
    assert "keeps no vector file" in line
    assert ("bytes free" in line) == (broken == "a full disk")
    fresh = new_process(rt, cache)  # a search still works, from the database
    assert fresh.matrix("owner").ids.size == len(TOPICS) * 2 + 2


class OtherModel(ToyEmbedder):
    model_id = "toy-2"


def test_a_new_models_file_removes_the_old_models_file_of_that_user_only(
        store, rt, cache, caplog):
    old, bobs = two_users_files(store, cache)
    rt.clock.advance(days=1, seconds=1)  # nobody used the old model's file since
    switched = new_process(rt, cache, OtherModel())  # sessions.embedding_model changed
    with caplog.at_level(logging.INFO, logger="hermes.memory.sessions.vectors"):
        switched.index("owner")  # the background pass embeds for the new model, keeps its file
    new = vector_file.path_for(cache, "message", "owner", "toy-2")
    assert new.exists() and not old.exists() and bobs.exists()
    said = [r.getMessage() for r in caplog.records if "other embedding models" in r.getMessage()]
    assert len(said) == 1 and "removed 1 vector file(s) of owner's" in said[0]
    sims, matrix = searched(new_process(rt, cache, OtherModel()), "owner")
    assert mapped(matrix) and sims.nearest(2)  # the new file serves the next process


def test_a_file_another_model_still_uses_is_kept_until_idle_for_a_day(store, rt, cache,
                                                                       caplog):
    # Two processes of one home with different models (a daemon started before
    # sessions.embedding_model changed): each save used to delete the other's file, and each
    # of their next processes rebuilt it (~11 s at 900k vectors).
    ids = history(store)
    searched(store.vectors, "owner")
    old = vector_file.path_for(cache, "message", "owner", "toy")
    rt.clock.advance(hours=20)
    switched = new_process(rt, cache, OtherModel())
    with caplog.at_level(logging.INFO, logger="hermes.memory.sessions.vectors"):
        switched.index("owner")  # saves toy-2's file: toy's was used 20 hours ago
        assert old.exists()
        rt.clock.advance(hours=20)
        searched(store.vectors, "owner")  # the toy process still searches: its lease renews
        rt.clock.advance(hours=20)
        later = new_process(rt, cache, OtherModel())
        assert mapped(searched(later, "owner")[1])  # maps toy-2's file: toy's used 20 h ago
        assert old.exists()
        assert not [r for r in caplog.records if "other embedding models" in r.getMessage()]
        rt.clock.advance(days=1, seconds=1)  # the toy process is gone: nobody renews
        fresh = new_process(rt, cache, OtherModel())
        sims, matrix = searched(fresh, "owner")  # maps toy-2's file, and the old one goes
    assert mapped(matrix) and not old.exists() and len(matrix.ids) == len(ids)
    said = [r.getMessage() for r in caplog.records if "other embedding models" in r.getMessage()]
    assert len(said) == 1 and "unused for a day" in said[0]


def test_a_file_is_marked_in_use_only_for_its_own_user(store, rt, cache):
    owners, bobs = two_users_files(store, cache)
    before = bobs.stat().st_mtime
    rt.clock.advance(hours=2)
    searched(store.vectors, "owner")  # renews owner's lease (RENEW_LEASE: an hour)
    assert owners.stat().st_mtime == rt.clock.now().timestamp()
    assert bobs.stat().st_mtime == before
