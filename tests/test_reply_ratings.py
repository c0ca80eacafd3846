"""Rating a reply (👍/👎 on Discord, /rate, the web panel): the facts shown for it move through
the fact store's own rating, and taking a rating back goes through it too."""

from __future__ import annotations

import pytest

from hermes.agent import feedback
from hermes.errors import NotFound
from hermes.memory.facts.records import writes_from


def reply_with_facts(rt, user, *texts):
    facts = rt.memory.facts
    sessions = rt.memory.sessions
    session = sessions.create(user, "discord")
    sessions.append(user, session.id, "user", "what do you know?")
    reply = sessions.append(user, session.id, "assistant", "This.")
    ids = [facts.add(user, text).id for text in texts]
    with rt.db.conn:
        for fact_id in ids:
            rt.db.execute("INSERT INTO shown_facts (message_id, fact_id) VALUES (?, ?)",
                          [reply.id, fact_id])
    return facts, reply.id, ids


def test_withdrawing_a_rating_goes_through_the_fact_stores_rating(rt):
    """Withdrawn as rated: clamped, counted, and written to the history the way every rating
    is (with the origin of the change), not by a copy of the store's arithmetic."""
    facts, reply, (high, mid) = reply_with_facts(rt, "owner", "Ivy keeps bees in the garden",
                                                "Jon fixes bikes at the weekend")
    with rt.db.conn:
        rt.db.execute("UPDATE facts SET trust = 0.98 WHERE id = ?", [high])
    with writes_from("discord"):
        up = feedback.set_reply_rating(rt, "owner", reply, "discord:7", True)
        assert [(r.id, r.new_trust) for r in up] == [(high, 1.0), (mid, 0.55)]   # clamped
        down = feedback.set_reply_rating(rt, "owner", reply, "discord:7", None)
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
        feedback.set_reply_rating(rt, "bob", reply, "discord:7", False)
    assert feedback.shown_fact_ids(rt, "bob", reply) == []
    assert feedback.reply_rating(rt, "bob", reply, "discord:7") is None
    assert facts.get("owner", fact_id).trust == 0.5
