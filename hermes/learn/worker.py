"""Extraction after every reply, off the reply path: schedule, gate, extract, parse, consolidate.

``ExtractionWorker.attach(agent)`` adds the fast lane as a ``before_reply`` hook and
``after_reply`` as an after-reply hook. After each reply a tracked asyncio task (at most
``extraction.concurrency`` at once, one at a time per session) takes the session's messages
past its watermark (``sessions.extracted_through``) and records one ``extraction_runs`` row for
that message range:

- ``skipped`` with the gate's reason (no model call);
- ``done`` with what changed, applied in the same transaction as the row and the watermark;
- ``retry`` when the model failed or its output could not be used (raw output kept), retried
  once by :meth:`retry_failed` (a daemon job); a second failure leaves it ``failed``.

The run's unique key (session, first message, last message) makes a re-run a no-op.
``on_commit`` listeners are called on the event loop right after a ``done`` run's transaction
has committed, with the run record and what it changed (the web panel's live sidebar).
:meth:`drain` waits for pending work at shutdown; what it cannot wait for is recorded for retry,
and a session whose messages never got a run at all is found again by :meth:`catch_up`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

from hermes.aio import finish_or_cancel
from hermes.clock import to_ts
from hermes.learn import gate
from hermes.learn import runs as run_records
from hermes.learn.consolidate import Consolidation, consolidate
from hermes.learn.extract import MAX_RELATED_FACTS, build_prompt, related_query
from hermes.learn.fastlane import FastLane
from hermes.learn.parse import ParseError, parse_actions
from hermes.learn.runs import RunRecord
from hermes.memory.place import PRIVATE
from hermes.memory.sessions.records import speaker_name
from hermes.store import usage
from hermes.store.db import BoundedWrites, connect, write_transaction

if TYPE_CHECKING:
    import sqlite_utils

    from hermes.agent.llm import LLM
    from hermes.agent.turn import Agent, TurnResult
    from hermes.config import Settings
    from hermes.learn.extract import Prompt
    from hermes.memory import Memory
    from hermes.memory.facts.store import FactStore
    from hermes.memory.sessions.records import Message
    from hermes.memory.sessions.store import SessionStore

log = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

MAX_ATTEMPTS = 2   # the first try and one retry
MAX_MESSAGES_PER_RUN = 40
# How long extraction's database work waits for replies in progress to finish, at most.
YIELD_TO_REPLIES_SECONDS = 2.0


@dataclass
class _Stores:
    """A connection and the stores built on it: the loop's, or the worker thread's own."""

    db: sqlite_utils.Database
    facts: FactStore
    sessions: SessionStore


def extraction_model_name(settings: Settings) -> str | None:
    return settings.extraction.model or settings.model.background or settings.model.name


def extraction_enabled(settings: Settings) -> bool:
    """``extraction.enabled``; unset means: on when a model is configured."""
    if settings.extraction.enabled is not None:
        return bool(settings.extraction.enabled)
    return bool(extraction_model_name(settings))


class ExtractionWorker:
    def __init__(self, memory: Memory, *, llm: LLM | None = None,
                 yield_to_replies: float = YIELD_TO_REPLIES_SECONDS) -> None:

        self.memory = memory
        self.config = memory.settings.extraction
        # On the loop's connection: the fast lane (on the reply path by design) and readers.
        self.facts = memory.facts
        self.sessions = memory.sessions
        # Extraction's own database work (gate bookkeeping, related facts, consolidation, run
        # records, watermark) runs in one worker thread on its own connection, so that it never
        # blocks the event loop a reply streams on.
        self._executor: ThreadPoolExecutor | None = None
        self._thread_stores: _Stores | None = None   # touched only in the worker thread
        self._thread_lock = threading.Lock()
        self._llm = llm
        self._tasks: set[asyncio.Task[RunRecord | None]] = set()
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._semaphore: asyncio.Semaphore | None = None
        # (user, session) -> message-id ranges of turns whose model wrote memory with tools
        self._memory_turns: dict[tuple[str, int], list[tuple[int, int]]] = {}
        # Replies in progress (between the before- and after-reply hooks). Extraction's
        # synchronous database work waits for a moment without one, so it never stalls a
        # streaming reply; after ``yield_to_replies`` seconds it goes ahead anyway.
        self.yield_to_replies = yield_to_replies
        self._replying = 0
        self._quiet: asyncio.Event | None = None
        # Called with each committed run (record.changes set); a failing listener is logged.
        self.on_commit: list[Callable[[RunRecord], None]] = []

    # -- wiring -----------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return extraction_enabled(self.memory.settings)

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            from hermes.agent.llm import LLM

            settings = self.memory.settings
            self._llm = LLM(settings.model, model_name=extraction_model_name(settings),
                            env_file=settings.home_path / ".env")
        return self._llm

    def attach(self, agent: Agent) -> None:
        """Fast lane before each reply, extraction after it (on the agent's background model
        unless ``extraction.model`` names another)."""
        if self._llm is None and not self.config.model:
            self._llm = getattr(agent, "background_llm", None)
        agent.before_reply.append(self._reply_started)
        fast_lane = FastLane(self.memory, self.facts)
        agent.before_reply.append(fast_lane)
        agent.after_reply.append(fast_lane.after_reply)
        agent.after_reply.append(self.after_reply)

    def _reply_started(self, user: str, session_id: int, message: Message) -> None:
        self._replying += 1
        if self._quiet is not None:
            self._quiet.clear()

    def _reply_finished(self) -> None:
        self._replying = max(0, self._replying - 1)
        if self._replying == 0 and self._quiet is not None:
            self._quiet.set()

    async def _wait_for_quiet(self) -> None:
        if self._replying == 0:
            return
        if self._quiet is None:
            self._quiet = asyncio.Event()
        self._quiet.clear()
        # Replies back to back: after the timeout extraction goes ahead, it must progress.
        # (asyncio.timeout: no task of its own per wait, as wait_for makes.)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.yield_to_replies):
                await self._quiet.wait()

    def after_reply(self, result: TurnResult) -> None:
        """``Agent.after_reply`` hook: schedule extraction; returns at once."""
        self._reply_finished()
        if getattr(result, "memory_written", False):
            # Every message of the turn (user, tool results, reply) lies in this id range.
            last = result.assistant_message_id or result.user_message_id
            self._memory_turns.setdefault((result.user, result.session_id), []).append(
                (result.user_message_id, last))
        self.schedule(result.user, result.session_id,
                      through=result.assistant_message_id or result.user_message_id)

    def schedule(self, user: str, session_id: int, *, through: int | None = None
                 ) -> asyncio.Task[RunRecord | None]:
        """Start a tracked background extraction of the session's unseen messages (up to
        message ``through``, so that a run covers whole turns)."""
        task = asyncio.get_running_loop().create_task(
            self._guarded(user, session_id, through), name=f"extract:{user}:{session_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def pending(self) -> int:
        return sum(1 for t in self._tasks if not t.done())

    async def _guarded(self, user: str, session_id: int, through: int | None
                       ) -> RunRecord | None:
        try:
            # A long backlog (more than MAX_MESSAGES_PER_RUN) is taken in several runs.
            record = None
            for _ in range(50):
                latest = await self.run_session(user, session_id, through=through)
                if latest is None or (record is not None and latest.id == record.id):
                    break
                record = latest
                if through is not None and record.last_message_id >= through:
                    break
            return record
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a background task must log, never vanish silently
            log.exception("extraction of session %s for %s failed", session_id, user)
            return None

    # -- where the database work runs -----------------------------------------------------------

    def _stores_in_thread(self) -> _Stores:
        """The worker thread's own connection (WAL: it reads and writes beside the loop's;
        the busy timeout covers the moments both want the write lock)."""
        if self._thread_stores is None:
            db = connect(self.memory.settings.db_path)
            # The home's memory on this connection; the embedding models are the loop's own.
            memory = self.memory.on(db)
            self._thread_stores = _Stores(db, memory.facts, memory.sessions)
        return self._thread_stores

    def _close_in_thread(self) -> None:
        if self._thread_stores is not None:
            self._thread_stores.db.conn.close()
            self._thread_stores = None

    async def _db(self, fn: Callable[[_Stores, *Ts], T], *args: *Ts) -> T:
        """``fn(stores, *args)`` in the worker thread (one thread: its connection is never used
        by two at once).

        A cancellation while the thread works waits for it to finish, so that what it wrote
        (or did not) is known, and is raised after."""
        with self._thread_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="hermes-extraction")
            executor = self._executor
        future = asyncio.get_running_loop().run_in_executor(
            executor, lambda: fn(self._stores_in_thread(), *args))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await future
            raise

    # -- one run ----------------------------------------------------------------------------

    async def run_session(self, user: str, session_id: int, *, through: int | None = None
                          ) -> RunRecord | None:
        """Extract from the session's messages past the watermark (up to ``through``).
        None when there are none."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.config.concurrency)
        key = (user, session_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with self._semaphore, lock:
            await self._wait_for_quiet()
            ranges = list(self._memory_turns.get(key, []))
            outcome, value = await self._db(self._open_run, user, session_id, through, ranges)
            if outcome in ("skipped", "extract"):
                # The turns this range covered are settled; later ones stay for later runs.
                last = value.last_message_id if outcome == "skipped" else value[-1].id
                left = [r for r in self._memory_turns.pop(key, []) if r[0] > last]
                if left:
                    self._memory_turns[key] = left
            if outcome != "extract":
                return value
            return await self._extract(user, session_id, value, run_id=None)

    def _open_run(self, s: _Stores, user: str, session_id: int, through: int | None,
                  ranges: list[tuple[int, int]]) -> tuple[str, Any]:
        """(in the worker thread) The new messages and the gate: ("none", None),
        ("existing", run), ("skipped", run) or ("extract", messages)."""
        session = s.sessions.get(user, session_id)
        watermark = s.sessions.extracted_through(user, session_id)
        messages = s.sessions.messages(user, session_id, after_id=watermark,
                                       limit=MAX_MESSAGES_PER_RUN)
        if through is not None:
            messages = [m for m in messages if m.id <= through]
        if not messages:
            return "none", None
        first, last = messages[0].id, messages[-1].id
        existing = self._find_run(s, user, session_id, first, last)
        if existing is not None:
            # Already recorded (a re-run): nothing changes but the watermark catching up.
            with write_transaction(s.db):
                s.sessions.advance_extracted(user, session_id, last)
            return "existing", existing
        # Skip only when every new message belongs to a turn that wrote memory itself.
        written = bool(ranges) and all(
            any(lo <= m.id <= hi for lo, hi in ranges) for m in messages)
        decision = gate.decide(
            messages,
            enabled=self.enabled,
            source=session.source,
            include_cron=self.config.include_cron,
            memory_written=written,
            min_chars=self.config.min_chars,
            prior_assistant=s.sessions.last_reply_before(user, session_id, first),
        )
        if not decision.run:
            with write_transaction(s.db):
                run_id = self._insert_run(s, user, session_id, first, last, "skipped",
                                          reason=decision.reason)
                s.sessions.advance_extracted(user, session_id, last)
            return "skipped", self._run(s, user, run_id)
        return "extract", messages

    async def _extract(self, user: str, session_id: int, messages: Sequence[Message],
                       run_id: int | None) -> RunRecord:
        """The model call and everything after it, for a new run or a retry of ``run_id``.
        Only the model call itself runs on the event loop."""
        first, last = messages[0].id, messages[-1].id
        raw: str | None = None
        cost: float | None = None
        committing = False
        try:
            await self._wait_for_quiet()
            prompt = await self._db(self._prompt, user, messages)
            calls: list[usage.Call] = []
            try:
                # Counted in the worker thread, on its connection: never on the loop's.
                with usage.scope(user=user, source="extraction", session_id=session_id,
                                 collect=calls):
                    completion = await self.llm.complete(prompt.messages)
            except BaseException:
                if calls:
                    await self._db(self._count_calls, user, session_id, calls)
                raise
            raw, cost = completion.text or "", completion.cost
            await self._wait_for_quiet()
            committing = True
            # One trip to the worker thread for the rest (each trip costs the loop a task step
            # and callbacks): the calls counted, the run applied, the new facts embedded.
            record = await self._db(self._commit_run, user, session_id, messages, prompt,
                                    raw, cost, run_id, calls)
            self._committed(record)
            return record
        except asyncio.CancelledError:
            if not committing:
                # Shutdown while the model was thinking: nothing was written; keep it for retry.
                await self._db(self._record_failure, user, session_id, first, last, run_id,
                               "interrupted by shutdown", raw, cost, False)
            raise
        except ParseError as exc:
            return await self._db(self._record_failure, user, session_id, first, last, run_id,
                                  str(exc), exc.raw, cost, True)
        except Exception as exc:  # noqa: BLE001 - recorded with its reason and retried
            log.warning("extraction of session %s failed: %s", session_id, exc)
            return await self._db(self._record_failure, user, session_id, first, last, run_id,
                                  f"{type(exc).__name__}: {exc}", raw, cost, True)

    def _commit_run(self, s: _Stores, user: str, session_id: int,
                    messages: Sequence[Message], prompt: Prompt, raw: str, cost: float | None,
                    run_id: int | None, calls: Sequence[usage.Call]) -> RunRecord:
        """(in the worker thread) The model's calls counted, its output applied
        (:meth:`_consolidate_run`; ParseError when unusable), and vectors for what it wrote."""
        if calls:
            self._count_calls(s, user, session_id, calls)
        record = self._consolidate_run(s, user, session_id, messages, prompt, raw, cost, run_id)
        if record.changes is not None and (record.created or record.merged
                                           or record.superseded):
            self._embed_facts(s, user)
        return record

    def _embed_facts(self, s: _Stores, user: str) -> None:
        """(in the worker thread) Vectors for the facts just written, when recall by meaning is
        on. A failure is logged: the facts are saved and found by their words meanwhile, and
        the daemon's vector job embeds them later."""
        vectors = getattr(s.facts, "vectors", None)
        if vectors is None:
            return
        try:
            done = vectors.index(user)
        except Exception as exc:  # noqa: BLE001 - logged; the periodic job tries again
            log.warning("fact vectors for %s: %s (retried by the vector job)", user, exc)
            return
        if done:
            log.debug("fact vectors: %d fact(s) of %s embedded", done, user)

    def _committed(self, record: RunRecord) -> None:
        if record.changes is None:
            return          # a run another task had recorded: nothing new was written
        for listener in self.on_commit:
            try:
                listener(record)
            except Exception:  # noqa: BLE001 - a viewer's failure must not fail the run
                log.exception("extraction on_commit listener %r failed", listener)

    def _count_calls(self, s: _Stores, user: str, session_id: int,
                     calls: Sequence[usage.Call]) -> None:
        """(in the worker thread) The extraction's model calls, for ``hermes stats``."""
        where = usage.Scope(user, "extraction", session_id)
        for call in calls:
            usage.record(s.db, call, to_ts(self.memory.clock.now()), where)

    def _prompt(self, s: _Stores, user: str, messages: Sequence[Message]) -> Prompt:
        """(in the worker thread) The related facts, numbered, and the prompt."""
        # Learning from a channel is shown only what the channel may see (what it writes is
        # placed there): hermes.memory.audience.
        place = s.sessions.place_of(user, messages[0].session_id) if messages else PRIVATE
        related = s.facts.related(user, related_query(messages), limit=MAX_RELATED_FACTS,
                                  place=place)
        # The facts the replies were built from: the model says which they relied on.
        shown = s.facts.shown_with(user, [m.id for m in messages if m.role == "assistant"])
        return build_prompt(
            messages, related, user_name=self._user_name(user, messages),
            now=self.memory.clock.now(), categories=self.memory.settings.facts.categories,
            shown=shown,
        )

    def _consolidate_run(self, s: _Stores, user: str, session_id: int,
                         messages: Sequence[Message], prompt: Prompt, raw: str, cost: float | None,
                         run_id: int | None) -> RunRecord:
        """(in the worker thread) Parse the output; apply it, the run row and the watermark in
        one transaction. ParseError when the output is unusable."""
        first, last = messages[0].id, messages[-1].id
        bounds = self.memory.settings
        parsed = parse_actions(raw, known_numbers=prompt.numbered.keys(),
                               categories=bounds.facts.categories,
                               max_actions=bounds.extraction.max_actions,
                               max_entities=bounds.facts.max_entities_per_fact,
                               max_tags=bounds.facts.max_tags_per_fact,
                               max_content_chars=bounds.extraction.max_content_chars)
        for problem in parsed.skipped:
            log.info("extraction of session %s: %s", session_id, problem)
        if run_id is None:
            found = self._find_run(s, user, session_id, first, last)
            if found is not None:
                # Another task recorded this range while the model was thinking.
                return found
        # Bounded transactions: a run of many actions commits every ~50 ms, so a concurrent
        # writer (`hermes facts add`, a reply being recorded) never waits for the whole run.
        # Each action is atomic; the run row and the watermark commit with the last batch. A
        # run cut off half-way is retried, and what it had written merges as duplicates.
        with BoundedWrites(s.db) as writes:
            changes = consolidate(
                s.facts, user, parsed.actions, prompt.numbered, session_id=session_id,
                message_ids=[m.id for m in messages],
                valid_from=max(m.created_at for m in messages), writes=writes,
            )
            with writes.step():
                found = self._find_run(s, user, session_id, first, last) \
                    if run_id is None else None
                if found is None:
                    run_id = self._finish_run(s, user, session_id, first, last, run_id, "done",
                                              reason=_summary(changes, parsed.skipped),
                                              cost=cost, changes=changes)
                    s.sessions.advance_extracted(user, session_id, last)
        if writes.longest > 0.2:
            log.info("extraction of session %s held the write lock %.0f ms at most",
                     session_id, writes.longest * 1000)
        if found is not None:
            return found
        assert run_id is not None
        record = self._run(s, user, run_id)
        record.changes = changes
        return record

    def _record_failure(self, s: _Stores, user: str, session_id: int, first: int, last: int,
                        run_id: int | None, reason: str, raw: str | None, cost: float | None,
                        count_attempt: bool = True) -> RunRecord:
        with write_transaction(s.db):
            if run_id is None:
                run_id = self._insert_run(s, user, session_id, first, last, "retry",
                                          reason=reason, raw=raw, cost=cost,
                                          model_calls=int(raw is not None),
                                          attempts=1 if count_attempt else 0)
            else:
                attempts = self._run(s, user, run_id).attempts + (1 if count_attempt else 0)
                status = "retry" if attempts < MAX_ATTEMPTS else "failed"
                run_records.record_retry(s.db, user, run_id, status=status, reason=reason,
                                         raw=raw, attempts=attempts, cost=cost,
                                         now=self._now())
            s.sessions.advance_extracted(user, session_id, last)
        return self._run(s, user, run_id)

    # -- retries, catch-up, shutdown ----------------------------------------------------------

    async def retry_failed(self, user: str | None = None, *,
                           sessions: Collection[int] | None = None,
                           before_each: Callable[[RunRecord], Awaitable[bool]] | None = None,
                           ) -> list[RunRecord]:
        """Run every run waiting for its retry once more (the daemon's periodic job), or only
        those of ``sessions``. ``before_each`` may stop the loop before a run (returns False):
        a backfill's budget and pace."""
        results = []
        for record in await self._db(self._waiting_retry, user):
            if sessions is not None and record.session_id not in sessions:
                continue
            if before_each is not None and not await before_each(record):
                break
            lock = self._locks.setdefault((record.user, record.session_id), asyncio.Lock())
            async with lock:
                messages = await self._db(self._run_messages, record)
                if not messages:
                    continue
                results.append(await self._extract(record.user, record.session_id, messages,
                                                   run_id=record.id))
        return results

    def _waiting_retry(self, s: _Stores, user: str | None) -> list[RunRecord]:
        return run_records.waiting_retry(s.db, user)

    def _run_messages(self, s: _Stores, record: RunRecord) -> list[Message]:
        return [m for m in s.sessions.messages(record.user, record.session_id,
                                               after_id=record.first_message_id - 1)
                if m.id <= record.last_message_id]

    def catch_up(self, *, limit: int = 50) -> list[asyncio.Task[RunRecord | None]]:
        """Schedule sessions with user messages past their watermark (after a crash or a
        shutdown that could not wait). Imported sessions (source import, or any session with an
        importer's external id) are left alone: ``hermes learn backfill`` is how they are
        learned from, when asked."""
        rows = self.sessions.live_behind_extraction(limit=limit)
        return [self.schedule(user, session_id) for user, session_id in rows]

    async def drain(self, timeout: float | None = None) -> int:
        """Wait for pending extractions; after ``timeout`` cancel them (each records its range
        for retry). Returns how many were cancelled. With nothing left pending, the worker
        thread's connection is closed (it reopens if more work comes)."""
        cancelled = len(await finish_or_cancel(self._tasks, timeout))
        if self.pending == 0:
            await self._shutdown_thread()
        return cancelled

    async def _shutdown_thread(self) -> None:
        with self._thread_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_in_thread)
            executor.shutdown(wait=False)

    # -- the extraction_runs table and the watermark ------------------------------------------

    def _now(self) -> str:
        return to_ts(self.memory.clock.now())

    def _user_name(self, user: str, messages: Sequence[Message]) -> str:
        """The person's name (a Discord display name, users.<user>.name), else "the user";
        never an identity such as terminal:root."""
        speakers = [speaker_name(m.speaker) for m in messages if m.role == "user"]
        named = [s for s in speakers if s]
        return named[-1] if named else self.memory.settings.display_name(user) or "the user"

    def run(self, user: str, run_id: int) -> RunRecord:
        """One run's record, read on the loop's connection."""
        return run_records.get(self.memory.db, user, run_id)

    def _run(self, s: _Stores, user: str, run_id: int) -> RunRecord:
        return run_records.get(s.db, user, run_id)

    def runs(self, user: str, session_id: int | None = None) -> list[RunRecord]:
        return run_records.of_user(self.memory.db, user, session_id)

    def _find_run(self, s: _Stores, user: str, session_id: int, first: int, last: int
                  ) -> RunRecord | None:
        return run_records.find(s.db, user, session_id, first, last)

    def _insert_run(self, s: _Stores, user: str, session_id: int, first: int, last: int,
                    status: str, **fields: Any) -> int:
        return run_records.insert(s.db, user, session_id, first, last, status, now=self._now(),
                           **fields)

    def _finish_run(self, s: _Stores, user: str, session_id: int, first: int, last: int,
                    run_id: int | None, status: str, *, reason: str | None,
                    cost: float | None, changes: Consolidation) -> int:
        if run_id is None:
            return self._insert_run(s, user, session_id, first, last, status, reason=reason,
                                    cost=cost, model_calls=1, changes=changes)
        run_records.finish(s.db, user, run_id, status=status, reason=reason, cost=cost,
                    changes=changes, now=self._now())
        return run_id

def _summary(changes: Consolidation, skipped: Sequence[str]) -> str | None:
    notes = [*skipped, *changes.notes]
    return "; ".join(notes)[:1000] if notes else None

