"""Learning's related facts by meaning (issue 31): a message in other words reaches the fact it
changes, in the extraction prompt and in consolidation's checks; another user's never."""

from __future__ import annotations

import json

import pytest

np = pytest.importorskip("numpy")

from hermes.agent.turn import Agent  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.learn.worker import ExtractionWorker  # noqa: E402
from hermes.memory.embeddings import embedders as embeddings  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402

# A toy space: one axis per concept, words map to theirs (unknown words: nowhere).
CONCEPTS = {"dog": 0, "beagle": 0, "puppy": 0, "biscuit": 0, "passed": 1, "died": 1,
            "away": 1, "flat": 2, "moved": 2, "lives": 2, "porto": 2, "lisbon": 2}


class ConceptEmbedder:
    model_id = "toy-concepts"

    def embed(self, texts):
        out = np.full((len(texts), 4), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").replace("?", " ").split():
                if word in CONCEPTS:
                    out[row, CONCEPTS[word]] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]


@pytest.fixture
def rt(fake_model, clock, monkeypatch):
    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, ConceptEmbedder)
    rt = Runtime(load_settings(), clock=clock)
    rt.settings.sessions.embeddings = True
    yield rt
    rt.close()


def test_a_paraphrase_finds_the_fact_it_changes(rt):
    facts = rt.memory.facts
    biscuit = facts.add("owner", "The user has a beagle named Biscuit").fact
    film = facts.add("owner", "The user's favourite film is Spirited Away").fact
    facts.add("bob", "Bob has a beagle named Biscuit")
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    # by words, "passed away" finds only the film ("away")
    assert [f.id for f in facts.related("owner", "Our dog passed away", by_meaning=False)] == [
        film.id]
    related = facts.related("owner", "Our dog passed away")
    assert biscuit.id in {f.id for f in related}
    assert all(f.user == "owner" for f in facts.related("owner", "beagle dog puppy"))


def test_words_and_meaning_are_fused_within_the_limit(rt):
    facts = rt.memory.facts
    porto = facts.add("owner", "The user lives in Porto").fact
    lisbon = facts.add("owner", "Ana lives in Lisbon").fact
    facts.add("owner", "The user's favourite film is Spirited Away")
    facts.vectors.index("owner")
    # Porto: by its word and by meaning; Lisbon: by meaning only
    assert [f.id for f in facts.related("owner", "a flat in Porto", limit=2)] == [
        porto.id, lisbon.id]
    assert [f.id for f in facts.related("owner", "a flat in Porto", limit=1)] == [porto.id]


def test_a_forgotten_fact_is_not_related_by_meaning(rt):
    facts = rt.memory.facts
    biscuit = facts.add("owner", "The user has a beagle named Biscuit").fact
    facts.vectors.index("owner")
    facts.forget("owner", biscuit.id)
    assert facts.related("owner", "Our dog passed away") == []


async def test_the_extraction_model_is_shown_the_fact_a_paraphrase_changes(rt, fake_model):
    facts = rt.memory.facts
    biscuit = facts.add("owner", "The user has a beagle named Biscuit").fact
    facts.vectors.index("owner")
    agent = Agent(rt.memory)
    worker = ExtractionWorker(rt.memory)
    worker.attach(agent)
    session = rt.memory.sessions.create("owner", "terminal")
    fake_model.reply("I'm so sorry.")

    def retire(request):
        assert "1. The user has a beagle named Biscuit" in request.messages[0]["content"]
        return json.dumps([{"action": "delete", "number": 1, "reason": "the dog died"}])

    fake_model.respond(retire)
    await agent.turn("owner", session.id, "Our dog passed away last night.").run()
    await worker.drain()
    assert facts.get("owner", biscuit.id).status == "forgotten"
    assert [r.status for r in worker.runs("owner")] == ["done"]


def test_a_change_said_in_passing_in_a_long_message_is_found_by_its_sentence(rt, monkeypatch):
    """A long message's vector mostly means its bulk (here: a move), under the floor for the
    dog said in passing; its sentences are compared one by one as well."""
    monkeypatch.setitem(embeddings.MEANING_FLOOR, "toy-concepts", 0.4)
    facts = rt.memory.facts
    biscuit = facts.add("owner", "The user has a beagle named Biscuit").fact
    facts.add("bob", "Bob has a beagle named Biscuit")
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    message = ("We moved into the new flat in Porto at last, the flat is lovely and we moved "
               "every box in one day. Sadly our dog passed away on Sunday. The flat in Porto "
               "has room for a piano.")
    whole = facts.vectors.similarity("owner", message).of([biscuit.id])[biscuit.id]
    assert whole < 0.4          # the whole message alone is under the floor
    related = facts.related("owner", message)
    assert biscuit.id in {f.id for f in related}
    assert all(f.user == "owner" for f in related)
    assert all(f.user == "bob" for f in facts.related("bob", message))


def test_sentences_keep_titles_and_short_pieces_with_their_sentence():
    from hermes.memory.facts.store import sentences

    assert sentences("Our dog passed away last night.") == []          # short: the whole
    text = ("What a week. The kids had a party on Saturday and we cleaned for hours. "
            "Dr. Silva retired, so I see Dr. Patel now! Anyway, how do I get wax out of it?")
    assert sentences(text) == [
        "What a week. The kids had a party on Saturday and we cleaned for hours.",
        "Dr. Silva retired, so I see Dr. Patel now!",
        "Anyway, how do I get wax out of it?"]
