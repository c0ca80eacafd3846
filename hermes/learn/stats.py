"""What learning did and what it cost, from the ``extraction_runs`` records (``hermes stats``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlite_utils

from hermes.learn.fastlane import FASTLANE_TAG


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

    @property
    def calls_per_run(self) -> float:
        return self.model_calls / self.runs if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in self.__dataclass_fields__}
        data["calls_per_run"] = round(self.calls_per_run, 3)
        return data


def extraction_stats(db: sqlite_utils.Database, user: str) -> ExtractionStats:
    stats = ExtractionStats(user)
    for status, count in db.execute(
        "SELECT status, count(*) FROM extraction_runs WHERE user = ? GROUP BY status", [user]
    ).fetchall():
        stats.by_status[status] = count
        stats.runs += count
    stats.skips = {
        reason or "(none)": count
        for reason, count in db.execute(
            "SELECT reason, count(*) FROM extraction_runs WHERE user = ? AND status = 'skipped' "
            "GROUP BY reason ORDER BY count(*) DESC, reason", [user]
        ).fetchall()
    }
    row = db.execute(
        "SELECT coalesce(sum(model_calls), 0), coalesce(sum(created), 0), "
        "coalesce(sum(merged), 0), coalesce(sum(superseded), 0), coalesce(sum(forgotten), 0), "
        "sum(cost), sum(CASE WHEN model_calls > 0 AND cost IS NULL THEN 1 ELSE 0 END) "
        "FROM extraction_runs WHERE user = ?", [user]
    ).fetchone()
    (stats.model_calls, stats.created, stats.merged, stats.superseded, stats.forgotten,
     stats.cost, runs_without_cost) = row
    stats.runs_without_cost = int(runs_without_cost or 0)
    stats.failures = stats.by_status.get("retry", 0) + stats.by_status.get("failed", 0)
    last = db.execute(
        "SELECT reason FROM extraction_runs WHERE user = ? AND status IN ('retry', 'failed') "
        "ORDER BY id DESC LIMIT 1", [user]
    ).fetchone()
    stats.last_failure = last[0] if last else None
    # A model call that got no answer (provider down) is not counted in model_calls, and what
    # it cost, if anything, is not known.
    stats.unanswered = db.execute(
        "SELECT count(*) FROM extraction_runs WHERE user = ? AND status IN ('retry', 'failed') "
        "AND raw_output IS NULL AND model_calls = 0", [user]
    ).fetchone()[0]
    stats.fast_lane = db.execute(
        "SELECT count(*) FROM facts WHERE user = ? AND EXISTS "
        "(SELECT 1 FROM json_each(facts.tags) WHERE value = ?)", [user, FASTLANE_TAG]
    ).fetchone()[0]
    stats.active_facts = db.execute(
        "SELECT count(*) FROM facts WHERE user = ? AND superseded_by IS NULL "
        "AND forgotten_at IS NULL", [user]
    ).fetchone()[0]
    return stats
