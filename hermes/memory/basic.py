"""Tier 1: basic memory, the dense block of always-known facts injected into every prompt.

Entries are rows, written one at a time inside BEGIN IMMEDIATE transactions, so two processes
writing at once never lose each other's entries. The cap applies to the rendered entries (the
exact text the model sees) and is checked on the final result of every write; a write past it
is refused with the usage and the current entries, never truncated.
"""

from __future__ import annotations

import difflib
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import sqlite_utils

from hermes.clock import Clock, SystemClock, to_ts
from hermes.errors import NotFound, RefusedWrite
from hermes.memory.audience import Audience, and_condition
from hermes.memory.place import PRIVATE, Place
from hermes.safety.guard import check_text
from hermes.store.db import write_transaction

DEFAULT_LIMIT = 8000


@dataclass(frozen=True)
class Entry:
    id: int
    text: str
    created_at: str
    updated_at: str
    # where it was written (hermes.memory.place) and the user's mark (None: the home's
    # default, 1 shareable, 0 private): hermes.memory.audience
    place: str = "private"
    shared: int | None = None

    @property
    def mark(self) -> str:
        return "default" if self.shared is None else "shareable" if self.shared else "private"


@dataclass(frozen=True)
class WriteResult:
    status: Literal["added", "duplicate", "replaced", "removed", "applied", "unchanged"]
    message: str
    chars: int
    limit: int
    entry: Entry | None = None


@dataclass(frozen=True)
class Op:
    """One step of a batch: add(text), replace(target, text) or remove(target)."""

    action: Literal["add", "replace", "remove"]
    text: str | None = None
    target: int | str | None = None
    # For edits: removing an entry that is already gone is not an error; replacing one that
    # is gone adds the text, and replacing one with a text another entry holds removes it.
    missing_ok: bool = False


class OverCapError(RefusedWrite):
    """A write that would take the block past its cap. Carries what is there (``entries``:
    those the reader may see; ``hidden``: how many others count against the cap)."""

    def __init__(self, attempted_chars: int, limit: int, entries: Sequence[Entry],
                 current: int | None = None, hidden: int = 0) -> None:
        self.attempted_chars = attempted_chars
        self.limit = limit
        self.entries = list(entries)
        self.hidden = hidden
        current = usage_of(entries) if current is None else current
        listing = "\n".join(render_line(e.id, e.text) for e in entries) or "(empty)"
        if hidden:
            listing += (f"\n(and {hidden} private entr{'y' if hidden == 1 else 'ies'}, not "
                        "shown here)")
        super().__init__(
            f"Refused: basic memory would hold {attempted_chars:,} characters, over its "
            f"{limit:,}-character cap (now {current:,}/{limit:,}). Nothing was changed. "
            "Consolidate or remove entries first (replace several with one shorter entry, "
            "or remove what is no longer true). Current entries:\n" + listing
        )


def normalise(text: str) -> str:
    """Entries are single lines; whitespace runs collapse to one space."""
    return re.sub(r"\s+", " ", text).strip()


def render_line(entry_id: int, text: str) -> str:
    return f"[{entry_id}] {text}"


def usage_of(entries: Sequence[Entry]) -> int:
    """Characters of the rendered entries: exactly what counts against the cap."""
    return len("\n".join(render_line(e.id, e.text) for e in entries))


def validate(ops: Sequence[Op]) -> None:
    """Refuse a batch that is wrong whatever the table holds: empty, or text that is empty
    or unsafe (hermes.safety.guard)."""
    if not ops:
        raise RefusedWrite("Refused: an empty batch changes nothing.")
    for op in ops:
        if op.action in ("add", "replace"):
            if not op.text or not normalise(op.text):
                raise RefusedWrite(f"Refused: {op.action} needs non-empty text.")
            check_text(op.text)


class Simulation:
    """A batch applied to a working copy of the entries first: the cap and the targets are
    checked before any row changes, so a refused batch leaves the table untouched without
    relying on rollback. ``statuses`` holds each op's outcome, in order."""

    def __init__(self, current: Sequence[Entry], max_id: int, now: str,
                 visible: Callable[[Entry], bool] | None = None) -> None:
        self.working: list[Entry] = list(current)
        # which entries an op may name (a write in a shared place: those its readers may see)
        self.visible = visible or (lambda entry: True)
        self.statuses: list[str] = []
        self.max_id = max_id          # the highest id of any user's entry
        self.now = now
        self.adds = 0

    def apply(self, op: Op) -> None:
        if op.action == "add":
            self.add(normalise(op.text or ""))
        elif op.action == "replace":
            self.replace(op.target, normalise(op.text or ""), missing_ok=op.missing_ok)
        elif op.action == "remove":
            self.remove(op.target, missing_ok=op.missing_ok)
        else:  # pragma: no cover - Op's type forbids it
            raise RefusedWrite(f"Refused: unknown action {op.action!r}.")

    def add(self, text: str) -> None:
        if any(e.text == text for e in self.working):
            self.statuses.append("duplicate")
            return
        self.adds += 1
        # Provisional id for the usage estimate: new rows get ids above every existing one,
        # and an id's digits count towards the cap.
        provisional = max([e.id for e in self.working] + [self.max_id]) + self.adds
        self.working.append(Entry(provisional, text, self.now, self.now))
        self.statuses.append("added")

    def _resolve(self, target: int | str | None) -> int:
        """The index in ``working`` of the visible entry ``target`` names."""
        shown = [i for i, e in enumerate(self.working) if self.visible(e)]
        return shown[resolve([self.working[i] for i in shown], target)]

    def replace(self, target: int | str | None, text: str, *, missing_ok: bool = False) -> None:
        try:
            index = self._resolve(target)
        except NotFound:
            if not missing_ok:
                raise
            self.add(text)              # an edit of an entry removed meanwhile: its new text
            return
        old = self.working[index]
        if missing_ok and any(e.text == text and e.id != old.id for e in self.working):
            # an edit to a text written meanwhile as another entry: that entry stands
            self.working.pop(index)
            self.statuses.append("duplicate")
            return
        if any(e.text == text and e.id != old.id for e in self.working):
            raise RefusedWrite(
                f"Refused: replacing [{old.id}] would duplicate an existing entry. "
                "Remove it instead. Nothing was changed."
            )
        self.working[index] = Entry(old.id, text, old.created_at, self.now, old.place,
                                    old.shared)
        self.statuses.append("replaced")

    def remove(self, target: int | str | None, *, missing_ok: bool) -> None:
        try:
            index = self._resolve(target)
        except NotFound:
            if not missing_ok:
                raise
            self.statuses.append("already gone")
            return
        self.working.pop(index)
        self.statuses.append("removed")


def resolve(entries: Sequence[Entry], target: int | str | None) -> int:
    """Index of the entry named by id or by a unique substring (case-insensitive)."""
    if target is None or (isinstance(target, str) and not target.strip()):
        raise RefusedWrite("Refused: say which entry (an id or a unique part of its text).")
    if isinstance(target, int) or (isinstance(target, str) and target.strip().isdigit()):
        wanted = int(target)
        for index, entry in enumerate(entries):
            if entry.id == wanted:
                return index
        raise NotFound(f"No basic-memory entry with id {wanted}.")
    needle = target.casefold()
    matches = [i for i, e in enumerate(entries) if needle in e.text.casefold()]
    if not matches:
        raise NotFound(f"No basic-memory entry contains {target!r}.")
    if len(matches) > 1:
        ids = ", ".join(str(entries[i].id) for i in matches)
        raise RefusedWrite(
            f"Refused: {target!r} matches several entries ({ids}); use an id or a longer "
            "part of the text. Nothing was changed."
        )
    return matches[0]


class BasicMemory:
    def __init__(
        self, db: sqlite_utils.Database, limit: int = DEFAULT_LIMIT, clock: Clock | None = None,
        audience: Audience | None = None,
    ) -> None:
        self.db = db
        self.limit = limit
        self.clock = clock or SystemClock()
        # who may read what (privacy.shared_places): reads for a reply take its place
        self.audience = audience or Audience()

    # -- reading ----------------------------------------------------------------------------

    def entries(self, user: str, *, place: Place = PRIVATE) -> list[Entry]:
        """The user's entries, in order; in a shared ``place``, those its readers may see
        (hermes.memory.audience)."""
        visible, params = self.audience.items(place, "b")
        rows = self.db.execute(
            "SELECT id, text, created_at, updated_at, place, shared FROM basic_memory b "
            f"WHERE user = ?{and_condition(visible)} ORDER BY id",
            [user, *params],
        ).fetchall()
        return [Entry(*row) for row in rows]

    def usage(self, user: str) -> int:
        return usage_of(self.entries(user))

    def header(self, user: str, entries: Sequence[Entry] | None = None) -> str:
        used = usage_of(self.entries(user) if entries is None else entries)
        return f"[{used:,}/{self.limit:,} chars]"

    def render(self, user: str, *, place: Place = PRIVATE) -> str:
        """The exact block the model sees in its system prompt; in a shared ``place``, the
        entries its readers may see (the usage is still the whole block's: the cap is)."""
        entries = self.entries(user, place=place)
        header = self.header(user, entries if not place.shared else None)
        lines = [f"BASIC MEMORY {header}"]
        lines.extend(render_line(e.id, e.text) for e in entries)
        if not entries:
            lines.append("(empty)")
        return "\n".join(lines)

    # -- writing ----------------------------------------------------------------------------

    def add(self, user: str, text: str, *, place: Place = PRIVATE) -> WriteResult:
        return self.batch(user, [Op("add", text=text)], place=place)

    def replace(self, user: str, target: int | str, text: str, *,
                place: Place = PRIVATE) -> WriteResult:
        return self.batch(user, [Op("replace", text=text, target=target)], place=place)

    def remove(self, user: str, target: int | str, *, place: Place = PRIVATE) -> WriteResult:
        return self.batch(user, [Op("remove", target=target)], place=place)

    def batch(self, user: str, ops: Sequence[Op], *, place: Place = PRIVATE) -> WriteResult:
        """Apply every op or none. The cap is checked on the final result only.

        ``place``: where the write is made. A new entry is placed there; in a shared place an
        op may only name the entries its readers may see, and a refusal lists only those."""
        validate(ops)
        now = to_ts(self.clock.now())
        with write_transaction(self.db):
            current = self.entries(user)

            def visible(entry: Entry) -> bool:
                return self.audience.sees_item(place, entry.place, entry.shared)

            simulation = Simulation(current, self._max_id(), now, visible)
            for op in ops:
                simulation.apply(op)
            attempted = usage_of(simulation.working)
            if attempted > self.limit and attempted > usage_of(current):
                shown = [e for e in current if visible(e)]
                raise OverCapError(attempted, self.limit, shown, usage_of(current),
                                   hidden=len(current) - len(shown))
            if all(s == "duplicate" for s in simulation.statuses):
                return self._duplicate(current, ops, visible)
            last_entry = self._write(user, current, simulation.working, now, place)
            final = self.entries(user)
        return self._outcome(len(ops), simulation.statuses, last_entry, usage_of(final))

    def mark(self, user: str, target: int | str, shared: int | None) -> Entry:
        """Mark an entry shareable (1), private (0) or back to the home's default (None)
        (hermes.memory.audience): who may see it changes, its text does not."""
        if shared not in (None, 0, 1):
            raise RefusedWrite("Refused: an entry is marked shareable, private or default.")
        with write_transaction(self.db):
            entries = self.entries(user)
            entry = entries[resolve(entries, target)]
            self.db.execute("UPDATE basic_memory SET shared = ? WHERE id = ? AND user = ?",
                            [shared, entry.id, user])
        return Entry(entry.id, entry.text, entry.created_at, entry.updated_at, entry.place,
                     shared)

    def _write(self, user: str, current: Sequence[Entry], working: Sequence[Entry],
               now: str, place: Place = PRIVATE) -> Entry | None:
        """Make the user's rows what ``working`` holds: delete the entries it dropped, update
        the ones whose text changed, insert the new ones. The last entry written, if any."""
        last_entry: Entry | None = None
        before = {e.id: e for e in current}
        working_ids = {e.id for e in working}
        for entry in current:
            if entry.id not in working_ids:
                self.db.execute("DELETE FROM basic_memory WHERE id = ? AND user = ?",
                                [entry.id, user])
        for entry in working:
            if entry.id in before:
                if before[entry.id].text != entry.text:
                    self.db.execute(
                        "UPDATE basic_memory SET text = ?, updated_at = ? "
                        "WHERE id = ? AND user = ?",
                        [entry.text, now, entry.id, user],
                    )
                    last_entry = entry
            else:
                last_entry = self._insert(user, entry.text, now, place)
        return last_entry

    def _insert(self, user: str, text: str, now: str, place: Place = PRIVATE) -> Entry:
        try:
            cursor = self.db.execute(
                "INSERT INTO basic_memory (user, text, created_at, updated_at, place) "
                "VALUES (?, ?, ?, ?, ?)",
                [user, text, now, now, place.key],
            )
        except sqlite3.IntegrityError:  # pragma: no cover - guarded by the lock
            raise RefusedWrite("Refused: duplicate entry.") from None
        return Entry(int(cursor.lastrowid or 0), text, now, now, place.key)

    # -- what a write says ------------------------------------------------------------------

    def _duplicate(self, current: Sequence[Entry], ops: Sequence[Op],
                   visible: Callable[[Entry], bool] = lambda entry: True) -> WriteResult:
        """A batch of adds that are all there already: nothing changes."""
        existing = next(e for e in current if e.text == normalise(ops[0].text or ""))
        return WriteResult(
            "duplicate",
            f"Already in basic memory as [{existing.id}]; nothing changed."
            if visible(existing) else "Already in basic memory; nothing changed.",
            usage_of(current),
            self.limit,
            existing if visible(existing) else None,
        )

    def _outcome(self, count: int, statuses: Sequence[str], last_entry: Entry | None,
                 chars: int) -> WriteResult:
        """The result of a batch of ``count`` ops that wrote: one op names its status and
        entry, several are counted by status."""
        now = f"Basic memory now {chars:,}/{self.limit:,} chars."
        if count == 1:
            status = statuses[0]
            if status == "removed":
                return WriteResult("removed", f"Removed. {now}", chars, self.limit, None)
            message = f"{status.capitalize()} [{last_entry.id if last_entry else '?'}]. {now}"
            return WriteResult(status, message, chars, self.limit,  # type: ignore[arg-type]
                               last_entry)
        summary = ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
        return WriteResult("applied", f"Applied {summary}. {now}", chars, self.limit,
                           last_entry)

    def apply_edit(self, user: str, before: Sequence[Entry], texts: Sequence[str]) -> WriteResult:
        """Apply an edit of the block (``hermes memory edit``) atomically.

        ``before`` is what the editor was shown; ``texts`` is what came back. Only the
        difference between the two is applied, so an entry another process added while the
        editor was open is kept, and one it removed stays removed. Unchanged lines keep their
        ids; a line changed where it stood is the same entry, changed: it keeps its id, the
        place it was written in and the user's mark (hermes.memory.audience), so an edit never
        moves an entry into or out of a channel's view. The cap is checked on the final result.
        """
        wanted = list(dict.fromkeys(normalise(t) for t in texts if normalise(t)))
        old_texts = [e.text for e in before]
        shown = set(old_texts)
        ops: list[Op] = []
        blocks = difflib.SequenceMatcher(a=old_texts, b=wanted, autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in blocks:
            if tag == "equal":
                continue
            gone = [e for e in before[i1:i2] if e.text not in wanted]
            new = [t for t in wanted[j1:j2] if t not in shown]
            # where lines were changed in place, the first changed lines are those entries
            ops += [Op("replace", target=e.id, text=t, missing_ok=True)
                    for e, t in zip(gone, new, strict=False)]
            ops += [Op("remove", target=e.id, missing_ok=True) for e in gone[len(new):]]
            ops += [Op("add", text=t) for t in new[len(gone):]]
        if not ops:
            return WriteResult("unchanged", "No changes.", self.usage(user), self.limit)
        return self.batch(user, ops)

    # -- helpers ----------------------------------------------------------------------------

    def _max_id(self) -> int:
        row = self.db.execute("SELECT coalesce(max(id), 0) FROM basic_memory").fetchone()
        return int(row[0])
