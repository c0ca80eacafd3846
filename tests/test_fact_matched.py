"""A person reading `hermes facts search` sees why each fact was found (its own words, the words
found only in the conversation it was learned from, its closeness in meaning) instead of a
fused score that reads as nothing; an all-words search needs every word in the fact itself."""

from __future__ import annotations

import os
from pathlib import Path

from hermes.config import FactsConfig
from hermes.memory.facts.matched import matched_words
from hermes.memory.facts.store import FactStore
from hermes.memory.sessions.store import SessionStore


def stores(db, clock):
    return FactStore(db, FactsConfig(), clock), SessionStore(db, clock=clock,
                                                             redact_secrets=False)


def learned(facts, sessions, user: str, text: str, said: str):
    """A fact learned from one message of ``user`` saying ``said``."""
    talk = sessions.create(user, "terminal")
    message = sessions.append(user, talk.id, "user", said)
    return facts.add(user, text, source_session_id=talk.id,
                     source_message_ids=[message.id]).fact


def test_words_of_the_fact_and_of_its_exchange_are_told_apart(db, clock):
    facts, sessions = stores(db, clock)
    car = learned(facts, sessions, "owner", "The user owns a Tesla", "my new car is electric")
    found = facts.search("owner", "tesla car", min_trust=0.0, explain=True)
    assert [f.id for f in found] == [car.id]
    assert found[0].explain["words"] == ["tesla"]
    assert found[0].explain["exchange_words"] == ["car"]
    # Stems match as the search matches them; the words are shown as the user wrote them.
    again = facts.search("owner", "Cars", min_trust=0.0, explain=True)
    assert again[0].explain["words"] == [] and again[0].explain["exchange_words"] == ["Cars"]


def test_another_users_facts_are_never_matched(db, clock):
    facts, sessions = stores(db, clock)
    bobs = learned(facts, sessions, "bob", "Bob owns a Tesla", "my new car")
    mine = learned(facts, sessions, "owner", "The user owns a bike", "my tesla poster")
    # Bob's fact handed in as if it were mine (a forged id list): no word of it is matched.
    matched = matched_words(db, "owner", "tesla car", [bobs, mine])
    assert matched[bobs.id].words == [] and matched[bobs.id].exchange_words == []
    assert matched[mine.id].exchange_words == ["tesla"]


def test_all_words_must_be_in_the_fact_itself_before_any_word(db, clock):
    facts, sessions = stores(db, clock)
    # bm25 only (no vectors): the all-words round, then any word.
    both = facts.add("owner", "The user parks the car next to the Tesla charger").fact
    half = learned(facts, sessions, "owner", "The user owns a Tesla", "my new car")
    strict = facts.search("owner", "tesla car", min_trust=0.0, explain=True)
    assert [f.id for f in strict] == [both.id]  # half holds "car" only in its exchange
    assert strict[0].explain["mode"] == "strict"
    # A word only the exchange holds still finds the fact, in the any-word round.
    loose = facts.search("owner", "new car", min_trust=0.0, explain=True)
    assert loose[0].id == half.id and loose[0].explain["mode"] == "loose"
    one_word = facts.search("owner", "new", min_trust=0.0, explain=True)
    assert [f.id for f in one_word] == [half.id]
    assert one_word[0].explain["exchange_words"] == ["new"]


def test_cli_search_says_why_each_fact_was_found(cli, hermes_home: Path):
    config = Path(os.environ["HERMES_CONFIG"])
    config.write_text("sessions:\n  embeddings: true\n", encoding="utf-8")  # the toy model
    assert cli("facts", "add", "The user owns a Tesla Model 3").exit_code == 0
    assert cli("facts", "add", "Alice likes green tea").exit_code == 0
    text = cli("facts", "search", "tesla").stdout
    first = text.splitlines()[0]
    assert first.startswith("[1] The user owns a Tesla Model 3  (words tesla; meaning 0.")
    assert "score" not in text and "bm25=" not in text
    explained = cli("facts", "search", "tesla", "--explain").stdout
    assert "bm25=" in explained and "fused=" in explained and "words=['tesla']" in explained
    as_json = cli("facts", "search", "tesla", "--json").json()
    assert "explain" not in as_json[0] and isinstance(as_json[0]["score"], float)
    assert cli("facts", "search", "tesla", "--json", "--explain").json()[0]["explain"][
        "words"] == ["tesla"]
