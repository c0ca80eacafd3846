"""Pending questions: Hermes asks before an inference overrides what the user said.

When extraction would supersede a fact the user stated explicitly (the fast lane's, tagged
``fastlane``, verbatim or not; one extraction learned from the user saying it outright, tagged
``explicit`` (:data:`EXPLICIT_TAG`); or one added directly, not learned from a conversation:
``/remember``, ``facts add``, an MCP client) or one it trusts highly, on the strength of
something the extraction model says it only inferred, the fact stays as it is and the inference
waits here as a question. The next reply puts it to the user ("In May you said you live in Lisbon;
is it Porto now?"); ``hermes facts pending`` and the web panel's facts page list them, with a
decision (accept: the inference supersedes the fact; reject: it is dropped). A correction the
user states outright ("I moved to Porto") supersedes at once, as before. A question whose fact
changes meanwhile (the user answered, and extraction wrote it) is settled as answered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlite_utils

from hermes.errors import NotFound, RefusedWrite

if TYPE_CHECKING:
    from hermes.memory.facts.records import Fact

# A fact trusted this much or more is one the user relies on: an inference does not override it.
PROTECTED_TRUST = 0.8
# The tag of a fact extraction learned from the user saying it outright (``"stated":
# "explicit"``): what the user said, protected like the fast lane's.
EXPLICIT_TAG = "explicit"
# Tags that say the user said a fact outright: never inherited by what an inference writes.
STATED_TAGS = frozenset({"fastlane", EXPLICIT_TAG})
# Questions put to the user in one reply, at most (the oldest first).
ASK_AT_ONCE = 1


def stated_by_the_user(fact: Fact) -> bool:
    """Whether ``fact`` is what the user said outright (or trusts highly): an inference must
    ask before it supersedes it."""
    return (bool(STATED_TAGS.intersection(fact.tags)) or fact.source_session_id is None
            or fact.trust >= PROTECTED_TRUST)


@dataclass
class Question:
    id: int
    user: str
    fact_id: int
    content: str               # what was inferred instead
    created_at: str
    asked_at: str | None
    resolved_at: str | None
    resolution: str | None     # accepted | rejected | answered
    session_id: int | None = None
    message_ids: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "fact_id": self.fact_id, "content": self.content,
                "created_at": self.created_at, "asked_at": self.asked_at,
                "resolved_at": self.resolved_at, "resolution": self.resolution}


_COLUMNS = ("id, user, fact_id, content, created_at, asked_at, resolved_at, resolution, "
            "session_id, message_ids")


# The audience's conditions for a shared place (hermes.memory.audience.Audience): over the
# facts (alias f) and over the sessions (alias s); ("", []) each for a private place.
Visible = tuple[tuple[str, list[Any]], tuple[str, list[Any]]]
NO_CONDITIONS: Visible = (("", []), ("", []))


def _where(audience: Visible) -> tuple[str, list[Any]]:
    """The questions a reply read in a shared place may hold: about a fact its readers may see,
    AND inferred from a conversation they may read (the inferred text says what was said
    there); a question from no conversation, only where every session is readable. No
    condition for a private place."""
    (facts, fact_params), (sessions, session_params) = audience
    where, params = "", []
    if facts:
        where += (" AND EXISTS (SELECT 1 FROM facts f WHERE f.id = q.fact_id AND "
                  f"f.user = q.user AND {facts})")
        params += fact_params
    if sessions:
        where += (" AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = q.session_id AND "
                  f"s.user = q.user AND {sessions})")
        params += session_params
    return where, params


def _row(row: Any) -> Question:
    return Question(int(row[0]), row[1], int(row[2]), row[3], row[4], row[5], row[6], row[7],
                    row[8], json.loads(row[9] or "[]"))


class FactQuestions:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def ask(self, user: str, fact_id: int, content: str, *, session_id: int | None,
            message_ids: list[int], now: str) -> Question:
        """Keep ``content`` as a question about fact ``fact_id`` (inside the caller's
        transaction). The same open question again is the one already there."""
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_questions WHERE user = ? AND fact_id = ? "
            "AND content = ? AND resolved_at IS NULL", [user, fact_id, content]).fetchone()
        if row is not None:
            return _row(row)
        cursor = self.db.execute(
            "INSERT INTO fact_questions (user, fact_id, content, session_id, message_ids, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [user, fact_id, content, session_id, json.dumps(message_ids), now])
        return self.get(user, int(cursor.lastrowid or 0))

    def get(self, user: str, question_id: int, *,
            audience: Visible = NO_CONDITIONS) -> Question:
        """One question of ``user`` (``audience``: one a shared place may hold), else
        NotFound."""
        where, params = _where(audience)
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_questions q WHERE user = ? AND id = ?{where}",
            [user, int(question_id), *params]).fetchone()
        if row is None:
            raise NotFound(f"No pending question with id {question_id} for user {user!r}.")
        return _row(row)

    def pending(self, user: str, *, limit: int = 50,
                audience: Visible = NO_CONDITIONS) -> list[Question]:
        """The user's open questions, oldest first; those whose fact is no longer active are
        settled as answered first. ``audience``: for a shared place (:func:`_where`)."""
        self._settle(user)
        where, params = _where(audience)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_questions q WHERE user = ? AND resolved_at IS NULL"
            f"{where} ORDER BY id LIMIT ?", [user, *params, int(limit)]).fetchall()
        return [_row(r) for r in rows]

    def any_unasked(self, user: str) -> bool:
        return self.db.execute("SELECT 1 FROM fact_questions WHERE user = ? AND resolved_at "
                               "IS NULL AND asked_at IS NULL LIMIT 1", [user]).fetchone() \
            is not None

    def to_ask(self, user: str, now: str, *,
               audience: Visible = NO_CONDITIONS) -> list[Question]:
        """The open questions no reply has asked yet (at most ASK_AT_ONCE), marked asked.
        ``audience``: a reply read in a shared place asks only what its readers may see
        (:func:`_where`); the others wait, unasked, for a private reply."""
        self._settle(user)
        where, params = _where(audience)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_questions q WHERE user = ? AND resolved_at IS NULL "
            f"AND asked_at IS NULL{where} ORDER BY id LIMIT ?",
            [user, *params, ASK_AT_ONCE]).fetchall()
        found = [_row(r) for r in rows]
        if found:
            marks = ",".join("?" * len(found))
            self.db.execute(f"UPDATE fact_questions SET asked_at = ? WHERE user = ? "
                            f"AND id IN ({marks})", [now, user, *(q.id for q in found)])
        return found

    def resolve(self, user: str, question_id: int, resolution: str, now: str) -> Question:
        question = self.get(user, question_id)
        if question.resolved_at is not None:
            raise RefusedWrite(f"Refused: question {question.id} was settled already "
                               f"({question.resolution}). Nothing was changed.")
        self.db.execute("UPDATE fact_questions SET resolved_at = ?, resolution = ? "
                        "WHERE user = ? AND id = ?", [now, resolution, user, question.id])
        return self.get(user, question.id)

    def _settle(self, user: str) -> None:
        """Questions about a fact that changed since (superseded, forgotten, purged):
        answered."""
        self.db.execute(
            "UPDATE fact_questions SET resolved_at = coalesce((SELECT coalesce(f.forgotten_at, "
            "f.valid_to, f.updated_at) FROM facts f WHERE f.id = fact_questions.fact_id), "
            "created_at), resolution = 'answered' WHERE user = ? AND resolved_at IS NULL AND "
            "NOT EXISTS (SELECT 1 FROM facts f WHERE f.id = fact_questions.fact_id AND "
            "f.user = ? AND f.forgotten_at IS NULL AND f.superseded_by IS NULL)", [user, user])
