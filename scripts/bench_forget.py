"""Benchmark: does a forgotten fact stay forgotten (issue 31)? Counts resurrections.

    python scripts/bench_forget.py

Every stored fact of scripts/bench_related_data.py (124) is learned by consolidation from a
message of a conversation, then forgotten (or, for every third, corrected by a new version, or
purged). Then what was said before the forget is learned from again, as extraction, ``learn
backfill`` and a re-imported conversation do (consolidation with the old message's time): the
same statement, a near-same one, and an update of another fact to it. A resurrection is a
forgotten statement active again. Last, the user says each again afterwards: it must be
stored (explicit wins). The re-import and backfill through the real worker are
tests/test_tombstones.py; this counts the rule over many statements.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_related_data import PAIRS  # noqa: E402

from hermes.clock import FakeClock, to_ts  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.learn.consolidate import consolidate  # noqa: E402
from hermes.learn.parse import CreateAction, UpdateAction  # noqa: E402
from hermes.memory.facts.records import content_key  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402

USER = "bench"


def main() -> None:
    statements = list(dict.fromkeys(fact for _, fact, _ in PAIRS))
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock("2026-01-10T09:00:00+00:00")
        rt = Runtime(load_settings(home=Path(tmp), environ={"HERMES_SESSIONS__EMBEDDINGS":
                                                              "false"}), clock=clock)
        facts, sessions = rt.memory.facts, rt.memory.sessions
        session = sessions.create(USER, "terminal")
        said = to_ts(clock.now())
        ids = {}
        for text in statements:
            message = sessions.append(USER, session.id, "user", text)
            ids[text] = facts.add(USER, text, source_session_id=session.id,
                                  source_message_ids=[message.id], valid_from=said).id
        clock.advance(days=30)
        how = {}
        for n, text in enumerate(statements):
            if n % 3 == 1:
                facts.update(USER, ids[text], text.rstrip(".") + " (no longer true).",
                             note="corrected by the user")
                how[text] = "correct"
            elif n % 3 == 2:
                facts.purge(USER, ids[text])
                how[text] = "purge"
            else:
                facts.forget(USER, ids[text], "forgotten on request")
                how[text] = "forget"
        clock.advance(days=1)
        keeper = facts.add(USER, "The user keeps a journal.").fact
        attempts = 0
        for text in statements:
            near = text.rstrip(".") + " indeed."
            for action in (CreateAction(text), CreateAction(near)):
                consolidate(facts, USER, [action], {}, session_id=session.id, message_ids=[],
                            valid_from=said)
                attempts += 1
            consolidate(facts, USER, [UpdateAction(1, text)], {1: facts.get(USER, keeper.id)},
                        session_id=session.id, message_ids=[], valid_from=said)
            attempts += 1
            keeper = facts.list_facts(USER, limit=1)[0] if facts.get(
                USER, keeper.id).status != "active" else keeper
        forgotten = {content_key(t) for t in statements}
        forgotten |= {content_key(t.rstrip(".") + " indeed.") for t in statements}
        back = [f.content for f in facts.list_facts(USER, limit=10_000)
                if content_key(f.content) in forgotten]
        clock.advance(days=1)
        again = 0
        now = to_ts(clock.now())
        for text in statements:
            changes = consolidate(facts, USER, [CreateAction(text)], {}, session_id=session.id,
                                  message_ids=[], valid_from=now)
            again += changes.created + changes.merged + changes.superseded
        rt.close()
    by_how = {h: sum(1 for v in how.values() if v == h) for h in ("forget", "correct", "purge")}
    print(f"{len(statements)} statements learned, then forgotten {by_how['forget']}, corrected "
          f"{by_how['correct']}, purged {by_how['purge']}")
    print(f"re-learned from before the forget: {attempts} attempts (same, near-same, update to "
          f"it), resurrections: {len(back)}")
    for text in back:
        print(f"  back: {text}")
    print(f"said again afterwards: {again}/{len(statements)} stored")


if __name__ == "__main__":
    main()
