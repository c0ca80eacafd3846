"""Rating a reply (👍/👎 on Discord, /rate, the web panel): the facts shown for it move through
the fact store's own rating, and taking a rating back goes through it too."""

from __future__ import annotations

import pytest

from hermes.errors import NotFound
from hermes.memory.facts.ratings import ReplyRatings
from hermes.memory.facts.records import writes_from
from hermes.memory.operations import MemoryOperations, Scope
from hermes.memory.sessions.refs import MessageRefs


def reply_with_facts(rt, user, *texts):
    facts = rt.memory.facts
    sessions = rt.memory.sessions
    session = sessions.create(user, "discord")
    sessions.append(user, session.id, "user", "what do you know?")
    # The reply repeats the facts, so a rating reaches them (hermes.memory.facts.ratings).
    reply = sessions.append(user, session.id, "assistant", " ".join(texts))
    ids = [facts.add(user, text).id for text in texts]
    ReplyRatings(rt.db, facts, rt.clock).record_shown(user, reply.id, ids)
    return facts, reply.id, ids


def test_withdrawing_a_rating_goes_through_the_fact_stores_rating(rt):
    """Withdrawn as rated: clamped, counted, and written to the history the way every rating
    is (with the origin of the change), not by a copy of the store's arithmetic."""
    facts, reply, (high, mid) = reply_with_facts(rt, "owner", "Ivy keeps bees in the garden",
                                                "Jon fixes bikes at the weekend")
    with rt.db.conn:
        rt.db.execute("UPDATE facts SET trust = 0.98 WHERE id = ?", [high])
    with writes_from("discord"):
        ops, owner = MemoryOperations(rt.memory), Scope("owner")
        up = ops.set_reply_rating(owner, reply, "discord:7", True)
        assert [(r.id, r.new_trust) for r in up] == [(high, 1.0), (mid, 0.55)]   # clamped
        down = ops.set_reply_rating(owner, reply, "discord:7", None)
    assert [(r.id, r.old_trust, r.new_trust) for r in down] == [(high, 1.0, 0.98),
                                                                (mid, 0.55, 0.5)]
    for fact_id, trust in ((high, 0.98), (mid, 0.5)):
        fact = facts.get("owner", fact_id)
        assert (fact.trust, fact.helpful_count) == (trust, 0)
        rated, withdrawn = facts.history("owner", fact_id)[-2:]
        assert (rated["note"], withdrawn["note"]) == ("helpful", "rating withdrawn")
        assert withdrawn["action"] == rated["action"] == "rate"
        assert withdrawn["origin"] == rated["origin"] == "discord"
        assert withdrawn["old"] == rated["new"] and withdrawn["new"] == rated["old"]


def test_a_rating_of_another_users_reply_reaches_nothing(rt):
    facts, reply, (fact_id,) = reply_with_facts(rt, "owner", "Kim plays the oboe")
    with pytest.raises(NotFound, match="No message"):
        MemoryOperations(rt.memory).set_reply_rating(Scope("bob"), reply, "discord:7", False)
    assert MemoryOperations(rt.memory).shown_facts(Scope("bob"), reply) == []
    assert MemoryOperations(rt.memory).reply_rating(Scope("bob"), reply, "discord:7") is None
    assert MemoryOperations(rt.memory).reply_reach(Scope("bob"), reply).shown == []
    assert facts.get("owner", fact_id).trust == 0.5


# -- the memory layer's records, one user at a time -----------------------------------------


def test_shown_facts_link_only_this_users_facts_to_this_users_reply(rt):
    facts, reply, (mine,) = reply_with_facts(rt, "owner", "Pia grows chillies")
    _, bobs_reply, (bobs,) = reply_with_facts(rt, "bob", "Quin repairs clocks")
    ratings = ReplyRatings(rt.db, facts, rt.clock)
    ratings.record_shown("owner", reply, [bobs, mine, mine])       # bob's fact: not linked
    ratings.record_shown("owner", bobs_reply, [mine])              # bob's reply: not linked
    ratings.record_shown("bob", reply, [bobs])                     # owner's reply: not linked
    assert ratings.shown_fact_ids("owner", reply) == [mine]
    assert ratings.shown_fact_ids("bob", bobs_reply) == [bobs]
    assert ratings.shown_fact_ids("bob", reply) == []
    assert ratings.shown_fact_ids("owner", bobs_reply) == []
    rows = rt.db.execute("SELECT message_id, fact_id FROM shown_facts ORDER BY 1, 2").fetchall()
    assert [tuple(r) for r in rows] == [(reply, mine), (bobs_reply, bobs)]


def test_ratings_reach_only_this_users_reply_and_facts(rt):
    facts, reply, (mine,) = reply_with_facts(rt, "owner", "Rui speaks Basque")
    _, bobs_reply, (bobs,) = reply_with_facts(rt, "bob", "Sam keeps goats")
    ratings = ReplyRatings(rt.db, facts, rt.clock)
    for call in (lambda: ratings.rate_reply("owner", bobs_reply, False),
                 lambda: ratings.set_rating("owner", bobs_reply, "discord:1", False),
                 lambda: ratings.check_message("owner", bobs_reply)):
        with pytest.raises(NotFound):
            call()
    assert [r.id for r in ratings.rate_reply("owner", reply, False)] == [mine]
    assert [r.id for r in ratings.set_rating("bob", bobs_reply, "discord:1", True)] == [bobs]
    assert ratings.rating("bob", bobs_reply, "discord:1") is True
    assert ratings.rating("owner", bobs_reply, "discord:1") is None
    assert ratings.set_rating("owner", reply, "discord:1", None) == []   # nothing in effect
    assert (facts.get("owner", mine).trust, facts.get("bob", bobs).trust) == (0.4, 0.55)


def test_message_refs_never_cross_users(rt):
    _, reply, _ = reply_with_facts(rt, "owner", "Tia rows at dawn")
    _, bobs_reply, _ = reply_with_facts(rt, "bob", "Uma sings bass")
    refs = MessageRefs(rt.db)
    refs.link("owner", "discord:100", reply)
    with pytest.raises(NotFound):
        refs.link("owner", "discord:101", bobs_reply)
    refs.link("bob", "discord:100", bobs_reply)          # owner's ref: bob cannot move it
    assert refs.message_for("owner", "discord:100") == reply
    assert refs.message_for("bob", "discord:100") is None
    assert refs.message_for("owner", "discord:101") is None
