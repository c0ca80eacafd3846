"""What learning did and what it cost, from the ``extraction_runs`` records (``hermes stats``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes.learn import runs
from hermes.learn.fastlane import FASTLANE_TAG
from hermes.memory.facts.store import IMPLICIT_CONTRADICTED, IMPLICIT_RELIED

if TYPE_CHECKING:
    from hermes.memory import Memory


@dataclass
class ExtractionStats:
    user: str
    runs: int = 0
    by_status: dict[str, int] = field(default_factory=dict)   # done | skipped | retry | failed
    skips: dict[str, int] = field(default_factory=dict)       # gate reason -> runs
    model_calls: int = 0
    failures: int = 0                                         # runs waiting for retry or failed
    unanswered: int = 0                                       # of which: no model answer at all
    last_failure: str | None = None
    created: int = 0
    merged: int = 0
    superseded: int = 0
    forgotten: int = 0
    fast_lane: int = 0                                        # facts written before a reply
    cost: float | None = None                                 # USD, where litellm knew it
    runs_without_cost: int = 0                                # model-calling runs it did not
    active_facts: int = 0
    # Trust changes: learned from use (a reply relied on a fact, the user contradicted one)
    # and explicit (a 👍/👎, a rating), from the facts' history
    trust_implicit_up: int = 0
    trust_implicit_down: int = 0
    trust_explicit: int = 0
    questions_open: int = 0                                   # asked before overriding the user

    @property
    def calls_per_run(self) -> float:
        return self.model_calls / self.runs if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in self.__dataclass_fields__}
        data["calls_per_run"] = round(self.calls_per_run, 3)
        return data


def extraction_stats(memory: Memory, user: str) -> ExtractionStats:
    db = memory.db
    stats = ExtractionStats(user)
    stats.by_status = runs.count_by_status(db, user)
    stats.runs = sum(stats.by_status.values())
    stats.skips = runs.skip_reasons(db, user)
    (stats.model_calls, stats.created, stats.merged, stats.superseded, stats.forgotten,
     stats.cost, stats.runs_without_cost) = runs.totals(db, user)
    stats.failures = stats.by_status.get("retry", 0) + stats.by_status.get("failed", 0)
    stats.last_failure = runs.last_failure(db, user)
    stats.unanswered = runs.unanswered(db, user)
    facts = memory.facts
    stats.fast_lane = facts.count_tagged(user, FASTLANE_TAG)
    stats.active_facts = facts.count_active(user)
    changes = facts.trust_changes(user)
    stats.trust_implicit_up = changes.get(IMPLICIT_RELIED, 0)
    stats.trust_implicit_down = changes.get(IMPLICIT_CONTRADICTED, 0)
    stats.trust_explicit = sum(changes.get(n, 0) for n in ("helpful", "unhelpful",
                                                           "rating withdrawn"))
    stats.questions_open = len(facts.pending_questions(user))
    return stats
