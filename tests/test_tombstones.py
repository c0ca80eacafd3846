"""Forget that stays forgotten (issue 31): forgetting, correcting or purging a fact leaves a
tombstone; backfill, a re-imported conversation, consolidation and the fast lane never store
the same or a near-same statement again from what was said before; saying it again does."""

from __future__ import annotations

import json

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.learn.worker import ExtractionWorker
from hermes.memory.facts.tombstones import Forgotten
from hermes.memory.sessions.chat_exports import import_export
from hermes.memory.transfer import export_user, import_user
from hermes.runtime import Runtime

NAS = "The user's NAS is a Synology DS920 in the attic."


def conversation(uuid, day, *texts):
    return {"uuid": uuid, "name": f"Chat {uuid}", "created_at": f"2025-10-{day:02d}T08:00:00Z",
            "chat_messages": [
                {"uuid": f"{uuid}-{i}", "sender": "human" if i % 2 == 0 else "assistant",
                 "text": text, "created_at": f"2025-10-{day:02d}T08:0{i}:00Z"}
                for i, text in enumerate(texts)]}


NAS_CHAT = ("My NAS is a Synology DS920, it sits in the attic.", "Nice box!")


def creates(*contents):
    return json.dumps([{"action": "create", "content": c, "type": "semantic",
                        "category": "general", "entities": [], "tags": []} for c in contents])


@pytest.fixture
def env(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


def active(rt, user="owner"):
    return [f.content for f in rt.memory.facts.list_facts(user)]


def test_forget_then_backfill_and_reimport_bring_nothing_back(env, cli, fake_model):
    import_export(env.memory.sessions, "owner", [conversation("a", 1, *NAS_CHAT)], "claude")
    fake_model.reply(creates(NAS))
    assert cli("learn", "backfill", "--yes", "--rate", "0").exit_code == 0
    (fact,) = env.memory.facts.list_facts("owner")
    assert cli("facts", "forget", str(fact.id)).exit_code == 0
    # the same conversation again, imported as another session, then learned from
    import_export(env.memory.sessions, "owner", [conversation("a2", 1, *NAS_CHAT)], "claude")
    fake_model.reply(creates(NAS, "The user's NAS is a Synology DS920 that sits in the attic."))
    result = cli("learn", "backfill", "--yes", "--rate", "0")
    assert result.exit_code == 0, result.stderr
    assert active(env) == []
    runs = [r for r in env.db.execute("SELECT reason FROM extraction_runs ORDER BY id")]
    assert "forgotten" in runs[-1][0]
    # the tombstone is visible
    listed = cli("facts", "tombstones").stdout
    assert "forget (fact" in listed and "Synology DS920" in listed
    assert "tombstone" in cli("facts", "history", str(fact.id)).stdout


async def test_saying_it_again_afterwards_stores_it(env, fake_model, clock):
    facts = env.memory.facts
    old = facts.add("owner", NAS).fact
    clock.advance(minutes=5)
    facts.forget("owner", old.id, "forgotten on request")
    clock.advance(minutes=5)
    agent = Agent(env.memory)
    ExtractionWorker(env.memory).attach(agent)
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Noted.")
    await agent.turn("owner", session.id,
                     "Remember that my NAS is a Synology DS920 in the attic").run()
    assert active(env) == ["The user's NAS is a Synology DS920 in the attic"]


def test_a_write_said_before_the_forget_is_refused_one_said_after_is_not(env, clock):
    facts = env.memory.facts
    said_then = "2026-11-29T11:00:00Z"
    old = facts.add("owner", NAS).fact
    clock.advance(hours=1)
    facts.forget("owner", old.id)
    with pytest.raises(Forgotten, match="forgotten on"):
        facts.add("owner", NAS, said_at=said_then)
    with pytest.raises(Forgotten):   # near-same
        facts.add("owner", "The user's NAS is a Synology DS920 up in the attic", said_at=said_then)
    # other numbers: another statement
    facts.add("owner", "The user's NAS is a Synology DS1821 in the attic", said_at=said_then)
    clock.advance(minutes=1)
    facts.add("owner", NAS, said_at="2026-11-29T14:00:00Z")
    assert len(active(env)) == 2


def test_a_correction_is_not_undone_by_older_messages(env, clock):
    facts = env.memory.facts
    lisbon = facts.add("owner", "The user lives in Lisbon").fact
    clock.advance(days=1)
    facts.update("owner", lisbon.id, "The user lives in Porto", note="corrected by the user")
    with pytest.raises(Forgotten, match="corrected"):
        facts.add("owner", "The user lives in Lisbon", said_at="2026-11-29T12:00:00Z")
    assert active(env) == ["The user lives in Porto"]


async def test_consolidation_of_old_messages_does_not_resurrect(env, fake_model, clock):
    """An extraction run over messages older than the forget: neither a create nor a
    contradiction that would supersede the newer fact brings the forgotten one back."""
    sessions, facts = env.memory.sessions, env.memory.facts
    session = sessions.create("owner", "terminal")
    sessions.append("owner", session.id, "user", "I live in Lisbon and my NAS is in the attic.")
    clock.advance(days=1)
    nas = facts.add("owner", NAS).fact
    lisbon = facts.add("owner", "The user lives in Lisbon").fact
    facts.forget("owner", nas.id)
    facts.update("owner", lisbon.id, "The user lives in Porto")
    worker = ExtractionWorker(env.memory)
    fake_model.reply(creates(NAS, "The user lives in Lisbon"))
    record = await worker.run_session("owner", session.id)
    assert record.status == "done"
    assert active(env) == ["The user lives in Porto"]


def test_restore_takes_the_forget_back(env, clock):
    facts = env.memory.facts
    fact = facts.add("owner", NAS).fact
    clock.advance(minutes=1)
    facts.forget("owner", fact.id)
    facts.restore("owner", fact.id)
    assert facts.tombstones.of_fact("owner", fact.id) == []
    facts.add("owner", NAS, said_at="2026-11-29T11:00:00Z")   # merges, not refused


def test_purge_keeps_a_tombstone_that_can_be_removed(env, cli, clock):
    facts = env.memory.facts
    fact = facts.add("owner", NAS).fact
    clock.advance(minutes=1)
    assert cli("facts", "purge", str(fact.id), "--yes").exit_code == 0
    (tombstone,) = cli("facts", "tombstones", "--json").json()
    assert tombstone["action"] == "purge" and tombstone["fact_id"] is None
    with pytest.raises(Forgotten):
        facts.add("owner", NAS, said_at="2026-11-29T11:00:00Z")
    assert cli("facts", "tombstones", "--remove", str(tombstone["id"])).exit_code == 0
    facts.add("owner", NAS, said_at="2026-11-29T11:00:00Z")


def test_tombstones_are_the_users_own(env, cli, clock):
    facts = env.memory.facts
    mine = facts.add("alice", NAS).fact
    clock.advance(minutes=1)
    facts.forget("alice", mine.id)
    # bob's memory is not bound by alice's forgetting
    facts.add("bob", NAS, said_at="2026-11-29T11:00:00Z")
    assert facts.tombstones.of_user("bob") == []
    (tombstone,) = facts.tombstones.of_user("alice")
    removed = cli("facts", "tombstones", "--remove", str(tombstone.id), "--user", "bob")
    assert removed.exit_code == 1 and "No tombstone" in removed.stderr
    assert cli("facts", "tombstones", "--user", "bob").stdout.startswith("No tombstones")


def test_tombstones_travel_with_an_export(env, clock, tmp_path):
    facts = env.memory.facts
    fact = facts.add("alice", NAS).fact
    clock.advance(minutes=1)
    facts.forget("alice", fact.id)
    lines = list(export_user(env.db, "alice"))
    assert any('"fact_tombstones"' in line for line in lines)
    other = Runtime(load_settings(home=tmp_path / "other"), clock=clock)
    try:
        report = import_user(other.db, lines, user="carol")
        assert not report.errors, report.errors
        (tombstone,) = other.memory.facts.tombstones.of_user("carol")
        assert tombstone.content == NAS and tombstone.action == "forget"
        with pytest.raises(Forgotten):
            other.memory.facts.add("carol", NAS, said_at="2026-11-29T11:00:00Z")
    finally:
        other.close()


async def test_forget_what_i_said_about_the_nas_through_the_tool(env, fake_model, clock):
    facts = env.memory.facts
    nas = facts.add("owner", NAS, entities=["NAS"]).fact
    disks = facts.add("owner", "The NAS has two 8 TB disks", entities=["NAS"]).fact
    cello = facts.add("owner", "The user plays the cello").fact
    clock.advance(minutes=1)
    agent = Agent(env.memory)
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.tool_call("facts", {"action": "forget", "entity": "NAS",
                                   "reason": "the user asked"})
    fake_model.reply("Done, I've forgotten what you told me about the NAS.")
    result = await agent.turn("owner", session.id, "Forget what I said about the NAS").run()
    assert result.error is None and result.memory_written
    assert active(env) == [cello.content]
    assert {t.fact_id for t in facts.tombstones.of_user("owner")} == {nas.id, disks.id}

