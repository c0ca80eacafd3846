"""What a turn embeds: its new message once, as written ("?" and all), for fact recall and for
the past messages alike (the model remembers its last few queries); a speaker's name is turned
into "you" in past-message search's text only."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from hermes.agent.turn import Agent  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.memory.embeddings import embedders as embeddings  # noqa: E402
from hermes.memory.sessions import semantic  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402
from tests.test_fact_vectors import ToyEmbedder  # noqa: E402


class QueryLog(ToyEmbedder):
    """The toy model, remembering its recent queries the way the real models do."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_query(self, text):
        def compute():
            self.embedded.append(text)
            return ToyEmbedder.embed_query(self, text)

        return embeddings._recent_query(self, text, compute)


@pytest.fixture
def model(monkeypatch):
    log = QueryLog()
    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, lambda: log)
    return log


@pytest.fixture
def agent(fake_model, clock, model):
    rt = Runtime(load_settings(), clock=clock)
    rt.settings.sessions.embeddings = True
    yield Agent(rt.memory)
    rt.close()


def test_a_turn_embeds_its_message_once_as_written_for_facts_and_past_messages(
        agent, clock, model):
    memory = agent.memory
    tesla = memory.facts.add("owner", "The user drives a tesla").fact
    memory.facts.add("bob", "Bob drives an automobile")
    talk = memory.sessions.create("owner", "discord", title="Cars")
    memory.sessions.append("owner", talk.id, "user", "my automobile needs new tyres",
                           speaker="alice")
    clock.advance(days=2)
    assert memory.facts.vectors.index("owner") == 1
    memory.sessions.vectors.index("owner")
    model.embedded.clear()
    asked = "Which  automobile do I drive?"  # as typed: the "?" and the double space kept
    now = memory.sessions.create("owner", "terminal")
    memory.sessions.append("owner", now.id, "user", asked)
    prompt = agent.prompts.build("owner", asked, memory.sessions.messages("owner", now.id),
                                 first_turn=False)
    assert model.embedded == [asked]  # once, for both, as written
    assert prompt.shown_messages  # the past message came by that one embedding
    assert tesla.id in prompt.shown_fact_ids  # and the fact, by meaning
    sent = "\n".join(str(m["content"]) for m in prompt.messages)
    assert "The user drives a tesla" in sent and "Bob drives" not in sent  # never bob's fact


def test_only_a_speakers_name_is_changed_in_the_text_embedded(db, clock):
    from hermes.memory.sessions.store import SessionStore

    store = SessionStore(db, clock=clock)
    session = store.create("owner", "discord")
    ana = store.append("owner", session.id, "user", "I paint", speaker="Ana").id
    don = store.append("owner", session.id, "user", "hi", speaker="Don").id
    ids = [ana, don]
    assert semantic.meaning_text(db, "owner", "What did  Ana paint?", ids) == "What did you paint?"
    assert semantic.meaning_text(db, "owner", "Is Ana's car red?", ids) == "Is your car red?"
    # nothing named: the text as it is, so fact recall's embedding serves past messages too
    text = "Why  don't we paint?"  # "don't" is not Don
    assert semantic.meaning_text(db, "owner", text, ids) is text
