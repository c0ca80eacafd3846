"""One turn of conversation, the same for every front-end.

A message comes in for a user and a session: it is recorded first (so it is kept even when the
model is down), the ``before_reply`` hooks run, the prompt is assembled from the three tiers of
memory, the model is called with the memory tools and streams its reply, every tool call and the
reply are recorded, the facts the model was shown are noted against the reply, and the
``after_reply`` hooks run once the reply is complete.

    agent = Agent(rt.memory)      # the home's memory; the model from its settings
    turn = agent.turn("owner", session_id, "what database do we use?")
    async for text in turn:          # or: result = await turn.run()
        print(text, end="")
    turn.result.error                # one line when the model failed, else None
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hermes.agent import recall_rewrite
from hermes.agent.compress import Compressor
from hermes.agent.conversation import Conversation, Conversations
from hermes.agent.llm import LLM, Completion, ContextTooLong, ModelNotConfigured, ModelUnavailable
from hermes.agent.prompt import Prompt, PromptBuilder
from hermes.agent.prompt_cache import cache_ttl
from hermes.agent.tools import MEMORY_FULL_NOTE as MEMORY_FULL_NOTE  # re-exported
from hermes.agent.tools import ToolBox, tool_schemas
from hermes.aio import KeyedLocks
from hermes.errors import HermesError
from hermes.freed_memory import release_freed_memory
from hermes.memory import Memory
from hermes.memory.place import PRIVATE, Place, Scope
from hermes.memory.sessions.store import Message, Screened
from hermes.safety.secrets import removed_note
from hermes.store import usage

log = logging.getLogger(__name__)

# A before_reply hook may return a note for the end of the reply (the fast lane: which fact a
# "remember that ..." replaced).
BeforeReply = Callable[[str, int, Message], Awaitable[str | None] | str | None]
AfterReply = Callable[["TurnResult"], None]

TOOL_LIMIT_NOTE = ("The tool-call limit for this turn is reached. Answer the user now with what "
                   "you have; do not call tools.")
ROUND_SEPARATOR = "\n\n"
# The longest message a turn takes, from every front-end (the terminal, the local socket, the
# web panel, Discord, cron): about 16k tokens. A longer one is refused in one line before
# anything is recorded or sent: it would be stored whole, indexed and sent to the model on every
# later turn, and its screening and indexing run on the daemon's loop (~0.15 us a character).
# A long document belongs in `hermes sessions import`.
MAX_MESSAGE_CHARS = 64_000


class MessageTooLong(HermesError):
    """A message over MAX_MESSAGE_CHARS: nothing of it was recorded."""


def too_long_message(length: int) -> str:
    return (f"Refused: the message is {length:,} characters, over the limit of "
            f"{MAX_MESSAGE_CHARS:,}; nothing was recorded. Send a shorter message.")
STOPPED_MARK = " [stopped]"
# A message longer than this is screened for secrets on a worker thread (hermes.safety.secrets:
# up to ~0.5 us a character, 30-100 ms for MAX_MESSAGE_CHARS of dense secrets on a loaded
# machine), so that other users' turns go on meanwhile; a shorter one on the loop, where it
# costs less than the hop to a thread (the fast lane draws its line at the same length).
SCREEN_INLINE_CHARS = 4_000
# How long after a long message's turn the memory it freed is given back to the system
# (hermes.freed_memory): by then the turn's objects and its follow-up work (the fast lane,
# extraction's gate) are gone.
RELEASE_AFTER_SECONDS = 0.5


@dataclass
class TurnResult:
    user: str
    session_id: int
    user_message_id: int
    assistant_message_id: int | None
    text: str
    shown_fact_ids: list[int]
    tool_calls: int
    memory_written: bool
    error: str | None
    cost: float | None = None
    compressed: bool = False
    memory_full: bool = False
    tool_names: list[str] = field(default_factory=list)
    stopped: bool = False  # the user stopped the reply; text is what they saw


def _release_freed_memory_soon() -> None:
    """Once a long message's turn is over, give what it freed back to the system, on a worker
    thread: otherwise the daemon's memory stays tens of MiB above its idle and the next long
    message's work comes on top of it."""
    loop = asyncio.get_running_loop()

    def release() -> None:
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop's executor is shutting down
                loop.run_in_executor(None, release_freed_memory)

    loop.call_later(RELEASE_AFTER_SECONDS, release)


class Agent:
    """Turns for every user and front-end; holds the models and the hooks."""

    def __init__(self, memory: Memory, llm: LLM | None = None, *,
                 background_llm: LLM | None = None) -> None:
        settings = memory.settings
        self.memory = memory
        self.settings = settings.agent
        self.llm = llm or LLM.from_settings(settings)
        self.background_llm = background_llm or (
            LLM.from_settings(settings, background=True)
            if settings.model.background else self.llm)
        self.sessions = memory.sessions
        self.facts = memory.facts
        self.basic = memory.basic
        self.prompts = PromptBuilder(memory)
        self.ratings = memory.ratings
        self.compressor = Compressor(self.llm, self.background_llm,
                                     compress_at=self.settings.compress_at)
        # Every model call is counted (tokens, cached tokens, cost) for `hermes stats`.
        self.llm.record_usage(memory.db, memory.clock)
        self.background_llm.record_usage(memory.db, memory.clock)
        # What each session has sent so far: the next request extends it (a cached prefix).
        self.conversations = Conversations()
        # Fast lane: run before the model is called (e.g. "remember that ..." stored at once).
        self.before_reply: list[BeforeReply] = []
        # Run once the reply is complete and recorded, also when the model failed (the user's
        # message was still recorded). Keep them quick: schedule work, do not do it here.
        self.after_reply: list[AfterReply] = []
        # A session's turn to record its user's message, taken in the order turns begin: a
        # long message is screened off the loop, and a later one of its session waits for it.
        self.recording: KeyedLocks[tuple[str, int]] = KeyedLocks()

    def turn(self, user: str, session_id: int, text: str, *, speaker: str | None = None,
             transcript: Transcript | None = None) -> Turn:
        return Turn(self, user, session_id, text, speaker=speaker, transcript=transcript)

    def toolbox(self, user: str, session_id: int, place: Place = PRIVATE, *,
                read_only: bool = False) -> ToolBox:
        """The tools of one turn, for ``user``, reading for ``place`` (where its reply is
        read)."""
        return ToolBox(self.memory, user, session_id=session_id, scope=Scope(user, place),
                       read_only=read_only)


class Transcript:
    """A conversation kept in this process only: the web panel's temporary chat. A turn given
    one reads and appends its messages here instead of the session store, runs no hooks (the
    fast lane, extraction: nothing is learned from it), records no facts as shown, counts its
    model calls for no session, and its model may read memory but not write it. Its session id
    is negative, so it never meets a stored one (the agent's held conversations are keyed by
    it)."""

    def __init__(self, session_id: int, clock: Any) -> None:
        assert session_id < 0, "a transcript's session id is negative"
        self.session_id = session_id
        self.clock = clock
        self.kept: list[Message] = []
        # The facts each reply was shown (its receipt), as ratings.record_shown keeps them
        # for a stored reply
        self.shown: dict[int, list[int]] = {}

    def messages(self, user: str, session_id: int, *, after_id: int = 0) -> list[Message]:
        return [m for m in self.kept if m.id > after_id]

    def append(self, user: str, session_id: int, role: str, content: str, *,
               speaker: str | None = None, tool_name: str | None = None,
               tool_args: str | None = None, tool_call_id: str | None = None) -> Message:
        from hermes.clock import to_ts

        message = Message(len(self.kept) + 1, self.session_id, role, speaker, content,
                          to_ts(self.clock.now()), tool_name, tool_args, tool_call_id)
        self.kept.append(message)
        return message


@dataclass
class _TurnState:
    """What one turn builds as it goes, step by step (see :meth:`Turn._run`)."""

    sessions: Any                   # the session store, or a temporary chat's transcript
    message: Message                # the user's message, as recorded (redacted)
    earlier: list[Message]          # what the conversation does not hold yet
    conversation: Conversation | None
    place: Place                    # where the reply is read: every read of the turn is for it
    toolbox: ToolBox
    secret_note: str | None
    hook_notes: list[str]           # what the before_reply hooks said (the fast lane)
    last_id: int                    # the newest stored message of this turn
    counted: usage.Scope            # whose model calls these are
    prompt: Prompt | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)  # the next request
    exchange: list[dict[str, Any]] = field(default_factory=list)  # this turn's, as sent
    completion: Completion | None = None                          # the last round's
    shown: list[int] = field(default_factory=list)                # facts shown to the model
    emitted: list[str] = field(default_factory=list)              # the reply's text so far
    round_text: list[str] = field(default_factory=list)  # the current round's, as sent
    tool_names: list[str] = field(default_factory=list)
    version: int = 0
    cost: float | None = None
    compressed: bool = False


class Turn:
    """Async-iterate for the reply's text chunks; ``result`` is set when iteration ends."""

    def __init__(self, agent: Agent, user: str, session_id: int, text: str, *,
                 speaker: str | None = None, transcript: Transcript | None = None) -> None:
        self.agent = agent
        self.transcript = transcript
        self.user = user
        self.session_id = session_id
        self.text = text
        self.speaker = speaker
        self._recall: str | None = None  # what recall searched (hermes.agent.recall_rewrite)
        self._result: TurnResult | None = None
        self.exception: HermesError | None = None  # the model error behind result.error
        self._started = False

    def __aiter__(self) -> AsyncIterator[str]:
        if self._started:
            raise RuntimeError("a Turn runs once")
        self._started = True
        return self._run()

    async def run(self) -> TurnResult:
        async for _ in self:
            pass
        return self.result

    @property
    def result(self) -> TurnResult:
        """What the turn did; there once its reply has been iterated to the end."""
        if self._result is None:
            raise RuntimeError("the turn has not finished: iterate it (or await run()) first")
        return self._result

    # -- the turn ---------------------------------------------------------------------------

    async def _run(self) -> AsyncIterator[str]:
        """The turn, step by step: record the message, build the prompt, let the model answer
        in rounds (running the tools it calls between them), add the closing notes, record the
        reply and what this turn sent."""
        if len(self.text) > MAX_MESSAGE_CHARS:
            self._refuse_too_long()
            return
        state = await self._record_message()
        error: str | None = None
        try:
            await self._prepare(state)
            await self._fit(state)
            async for text in self._rounds(state):
                yield text
            for note in self._closing_notes(state):
                yield note
        except (ModelUnavailable, ModelNotConfigured) as exc:
            self.exception = exc
            error = str(exc) + (f" {state.secret_note}" if state.secret_note else "")
            state.round_text = []
            # Surfaced to the front-end through result.error; logged for the daemon log.
            log.info("turn for %s in session %s: %s", self.user, self.session_id, error)
        except (asyncio.CancelledError, GeneratorExit):
            # The user stopped the reply (Ctrl-C in the REPL, a closed stream): keep what they
            # saw, marked as stopped, then let the cancellation go on.
            self._close(state, error=None, stopped=True)
            raise
        self._close(state, error=error)
        if len(self.text) > SCREEN_INLINE_CHARS:
            _release_freed_memory_soon()

    def _refuse_too_long(self) -> None:
        """A message over MAX_MESSAGE_CHARS: refused in one line, nothing recorded."""
        self.exception = MessageTooLong(too_long_message(len(self.text)))
        self._result = TurnResult(
            user=self.user, session_id=self.session_id, user_message_id=0,
            assistant_message_id=None, text="", shown_fact_ids=[], tool_calls=0,
            memory_written=False, error=str(self.exception))

    async def _record_message(self) -> _TurnState:
        """The user's message recorded first (kept even when the model is down), what the
        session said before it that the conversation does not hold yet, and the before_reply
        hooks (the fast lane).

        A session's messages are recorded one at a time, in the order their turns began
        (``Agent.recording``): a long message is screened for secrets on a worker thread,
        and a later message of the same session waits for it, while other sessions' turns go
        on."""
        if self.transcript is not None:  # in this process only: nothing to screen or wait for
            state = self._recorded(self.transcript, self.text, None)
        else:
            async with self.agent.recording.hold((self.user, self.session_id)):
                state = await self._screened_and_recorded(self.agent.sessions)
        state.hook_notes = await self._before_reply(state.message) \
            if self.transcript is None else []
        return state

    async def _screened_and_recorded(self, sessions: Any) -> _TurnState:
        """(holding the session's turn to record) The message screened for secrets, on a
        worker thread when it is long, then recorded on the loop's connection: the write
        lock is held for the insert alone."""
        text = self.text
        if len(text) <= SCREEN_INLINE_CHARS:
            screened = sessions.screen(text)
            return self._recorded(sessions, screened, removed_note(text, screened.content))

        def screen() -> tuple[Screened, str | None]:
            screened = sessions.screen(text)
            return screened, removed_note(text, screened.content)

        work = asyncio.get_running_loop().run_in_executor(None, screen)
        try:
            screened, note = await asyncio.shield(work)
        except asyncio.CancelledError:
            # Stopped while the message was screened: it is recorded all the same (a turn's
            # message is kept whatever happens next), then the cancellation goes on.
            await asyncio.wait([work])
            self._recorded(sessions, *work.result())
            raise
        return self._recorded(sessions, screened, note)

    def _recorded(self, sessions: Any, content: str | Screened,
                  secret_note: str | None) -> _TurnState:
        """Record the message (screened already, except in a temporary chat), with what the
        session said before it that the conversation does not hold yet: one step on the loop,
        so that nothing of this session is recorded in between."""
        agent, user, session_id = self.agent, self.user, self.session_id
        conversation = agent.conversations.get(user, session_id)
        # Where the reply is read: the session's place, set when it was opened (a Discord
        # channel's, or private). Every read for this turn is for it (hermes.memory.audience).
        # (A temporary chat's transcript is the web panel's: private.)
        place = conversation.snapshot.place if conversation else PRIVATE \
            if self.transcript is not None else sessions.place_of(user, session_id)
        # With a conversation held, only what it does not cover yet is read back.
        earlier = sessions.messages(user, session_id,
                                    after_id=conversation.through if conversation else 0)
        message = sessions.append(user, session_id, "user", content, speaker=self.speaker)
        # Secrets were redacted as the message was recorded: from here on only the redacted
        # text is used (the model, recall, the hooks), and the reply says so once.
        return _TurnState(
            sessions=sessions, message=message, earlier=earlier, conversation=conversation,
            place=place,
            toolbox=agent.toolbox(user, session_id, place,
                                  read_only=self.transcript is not None),
            secret_note=secret_note, hook_notes=[], last_id=message.id,
            counted=usage.Scope(user, "chat",
                                session_id if self.transcript is None else None))

    async def _prepare(self, state: _TurnState) -> None:
        """The conversation this turn extends (started from memory when there is none) and the
        prompt for the message: its stable front, the conversation, the volatile tail (its
        recall searched for what the message refers back to: :meth:`_recall_query`)."""
        agent = self.agent
        if not agent.llm.configured:
            raise ModelNotConfigured(agent.llm.not_configured_message())
        if state.conversation is None:
            state.conversation = agent.prompts.start(self.user, state.earlier,
                                                       place=state.place)
            agent.conversations.put(self.user, self.session_id, state.conversation)
            state.earlier = []
        state.version = state.conversation.version
        self._recall = await self._recall_query(state.message)
        # The recall's embeddings (the message as a query, and as a message to index) on a
        # worker thread first, so that composing on the event loop finds them made
        # (PromptBuilder.embed_ahead): other users' turns go on meanwhile.
        ahead = agent.prompts.embed_ahead(self.user, self._recall)
        if ahead is not None:
            await asyncio.to_thread(ahead)
        state.prompt = agent.prompts.compose(self.user, self._recall, state.conversation,
                                             [*state.earlier, state.message])

    async def _fit(self, state: _TurnState, *, budget: int | None = None) -> None:
        """The prompt fitted to the model's context (``budget``: to this many tokens), the
        older turns summarised when it did not fit, and the conversation started again over
        the summary."""
        assert state.prompt is not None
        first = budget is None
        # Counting the prompt's tokens needs litellm: an import still under way (a daemon just
        # started, a cold `hermes ask`) is waited for off the event loop, once the prompt is
        # assembled.
        await self.agent.llm.ready()
        state.prompt, compressed = await self.agent.compressor.fit(
            state.prompt, tool_schemas(), budget=budget, scope=state.counted)
        if compressed:
            state.compressed = True
            state.conversation, state.prompt = self._restart(state.prompt, state.message)
            state.version = state.conversation.version
        if first:
            state.shown.extend(state.prompt.shown_fact_ids)
        if first or compressed:
            state.exchange = [state.prompt.history[-1]]
        state.messages = list(state.prompt.messages)

    async def _rounds(self, state: _TurnState) -> AsyncIterator[str]:
        """The model's rounds: each streams text and may call tools, whose results go back in
        the next round, up to max_tool_rounds; the last round is offered no tools."""
        agent = self.agent
        max_rounds = agent.settings.max_tool_rounds
        round_no = 0
        shrunk = False
        while round_no <= max_rounds:
            tools = tool_schemas() if round_no < max_rounds else None
            try:
                async for text in self._stream(state, tools, round_no):
                    yield text
            except ContextTooLong:
                # Our token count was optimistic for this model: compress to half of what
                # was sent and try once more, before anything reached the user.
                if shrunk or state.emitted or round_no > 0:
                    raise
                shrunk = True
                sent = await agent.llm.count_tokens_off_loop(state.messages, tools)
                await self._fit(state, budget=sent // 2)
                continue
            completion = state.completion
            assert completion is not None
            if not (tools and completion.tool_calls):
                break
            state.messages.append(completion.assistant_message())
            state.exchange.append(state.messages[-1])
            round_no += 1
            self._call_tools(state, completion)

    async def _stream(self, state: _TurnState, tools: list[dict[str, Any]] | None,
                      round_no: int) -> AsyncIterator[str]:
        """One request to the model, its text streamed as it comes (a separator between the
        text of two rounds); its completion kept in ``state``."""
        agent = self.agent
        assert state.conversation is not None
        request = state.messages
        if tools is None and round_no > 0:
            # A one-off instruction for this request only: not kept in the conversation.
            request = [*state.messages, {"role": "system", "content": TOOL_LIMIT_NOTE}]
        state.completion = None
        first_chunk = True
        state.round_text = []
        # How long this request's cache entries live: longer after a pause.
        sent_at = agent.memory.clock.now().timestamp()
        ttl = cache_ttl(agent.memory.settings.model.prompt_cache, state.conversation.last_sent,
                        sent_at)
        async for chunk in agent.llm.stream(request, tools, scope=state.counted,
                                            cache_ttl=ttl):
            if chunk.final is not None:
                state.completion = chunk.final
            elif chunk.text:
                if first_chunk and state.emitted:
                    state.emitted.append(ROUND_SEPARATOR)
                    yield ROUND_SEPARATOR
                first_chunk = False
                state.emitted.append(chunk.text)
                state.round_text.append(chunk.text)
                yield chunk.text
        assert state.completion is not None
        state.conversation.last_sent = sent_at
        if state.completion.cost is not None:
            state.cost = (state.cost or 0.0) + state.completion.cost

    def _call_tools(self, state: _TurnState, completion: Completion) -> None:
        """Run each tool the model called, record the call and its result, and add the result
        to the next request."""
        user, session_id = self.user, self.session_id
        for call in completion.tool_calls:
            outcome = state.toolbox.run(call)
            state.tool_names.append(call.name)
            state.shown.extend(outcome.fact_ids)
            recorded = state.sessions.append(
                user, session_id, "tool", outcome.content, tool_name=call.name,
                # JSON always: unparseable arguments as a JSON string
                tool_args=json.dumps(outcome.args or call.arguments, ensure_ascii=False),
                tool_call_id=call.id)
            state.last_id = recorded.id
            # As recorded: a result quoting an old message carries no secret onward.
            state.messages.append({"role": "tool", "tool_call_id": call.id,
                                   "content": recorded.content})
            state.exchange.append(state.messages[-1])

    def _closing_notes(self, state: _TurnState) -> Iterator[str]:
        """What the reply ends with: why memory writes were stopped, what the before_reply
        hooks said (a fact a "remember that" replaced), and that a secret was removed from the
        message."""
        notes = [state.toolbox.stop_note()] if state.toolbox.writes_stopped else []
        notes.extend(state.hook_notes)
        if state.secret_note:
            notes.append(state.secret_note)
        for note in notes:
            text = (ROUND_SEPARATOR if state.emitted else "") + note
            state.emitted.append(text)
            state.round_text.append(text)
            yield text

    def _close(self, state: _TurnState, *, error: str | None, stopped: bool = False) -> None:
        """Record the reply (the result, the after_reply hooks) and what this turn sent, for
        the next request to extend."""
        reply_id = self._finish(state.message.id, "".join(state.emitted), state.shown,
                                state.tool_names, state.toolbox, state.cost, state.compressed,
                                error=error, stopped=stopped)
        self._remember(state.conversation, state.exchange, state.round_text,
                       reply_id or state.last_id, state.version,
                       replied=error is None and not stopped, stopped=stopped)

    def _restart(self, compressed: Prompt, message: Message) -> tuple[Conversation, Prompt]:
        """After a compression: a fresh snapshot of memory in front of the summary and the kept
        turns, and the newest message's tail built again against it."""
        agent = self.agent
        previous = agent.conversations.get(self.user, self.session_id)
        place = previous.snapshot.place if previous is not None else \
            (PRIVATE if self.transcript is not None
             else agent.sessions.place_of(self.user, self.session_id))
        conversation = agent.prompts.start(self.user, place=place)
        conversation.sent = compressed.history[:-1]
        # The same conversation goes on, at the same pace (the cache's lifetime follows it).
        conversation.last_sent = previous.last_sent if previous is not None else None
        conversation.through = message.id - 1
        agent.conversations.put(self.user, self.session_id, conversation)
        prompt = agent.prompts.compose(self.user, self._recall or message.content, conversation,
                                       [message])
        return conversation, prompt

    async def _recall_query(self, message: Message) -> str:
        """What recall searches for ``message``: its text, and for a message that refers back
        (hermes.agent.recall_rewrite) what the earlier message most likely said, asked of the
        background model once, within ``agent.recall_rewrite_seconds``. A failure or a
        timeout: the text alone, in one log line."""
        agent, text = self.agent, message.content
        settings = agent.settings
        if not (settings.recall_rewrite and agent.background_llm.configured
                and recall_rewrite.refers_back(text)):
            return text
        # the turns before it: a temporary chat's from its transcript (nothing stored)
        before = (self.transcript.messages(self.user, self.session_id)
                  if self.transcript is not None
                  else agent.sessions.window(self.user, self.session_id, message.id, 6))
        recent = [m.content for m in before
                  if m.id < message.id and m.role in ("user", "assistant") and m.content][-6:]
        where = usage.Scope(self.user, "recall",
                            self.session_id if self.transcript is None else None)

        async def ask(messages: list[dict[str, Any]]) -> str:
            done = await agent.background_llm.complete(
                messages, max_tokens=recall_rewrite.MAX_TOKENS, scope=where, cache=False,
                retries=0)  # one call: a retry's backoff would only hold the reply up
            return done.text

        try:
            found = await asyncio.wait_for(recall_rewrite.rewrite(ask, text, recent),
                                           timeout=settings.recall_rewrite_seconds)
        except (TimeoutError, HermesError) as exc:
            log.warning("recall rewrite skipped (%s): recalled by the message alone",
                        type(exc).__name__ if isinstance(exc, TimeoutError) else exc)
            return text
        return recall_rewrite.recall_text(text, found)

    @staticmethod
    def _remember(conversation: Conversation | None, exchange: list[dict[str, Any]],
                  round_text: list[str], through: int, version: int, *, replied: bool,
                  stopped: bool = False) -> None:
        """Keep this turn's messages as they were sent, for the next request to extend."""
        if conversation is None or not exchange:
            return
        text = "".join(round_text)
        if text or replied:
            exchange = [*exchange, {"role": "assistant",
                                    "content": text + (STOPPED_MARK if stopped else "")}]
        conversation.record(exchange, through, version)

    def _finish(self, user_message_id: int, text: str, shown: list[int], tool_names: list[str],
                toolbox: ToolBox, cost: float | None, compressed: bool, *, error: str | None,
                stopped: bool = False) -> int | None:
        assistant_id = None
        if stopped and text:
            text += STOPPED_MARK
        if (error is None and not stopped) or text:
            assistant_id = self._record_reply(text, shown)
        self._result = TurnResult(
            user=self.user, session_id=self.session_id, user_message_id=user_message_id,
            assistant_message_id=assistant_id, text=text,
            shown_fact_ids=list(dict.fromkeys(shown)), tool_calls=len(tool_names),
            memory_written=toolbox.writes > 0,
            error=error, cost=cost, compressed=compressed, memory_full=toolbox.memory_full,
            tool_names=tool_names, stopped=stopped,
        )
        self._after_reply(self._result)
        return assistant_id

    def _record_reply(self, text: str, shown: list[int]) -> int:
        agent, user = self.agent, self.user
        if self.transcript is not None:             # kept here only: nothing is recorded
            kept = self.transcript.append(user, self.session_id, "assistant", text)
            self.transcript.shown[kept.id] = list(dict.fromkeys(shown))
            return kept.id
        reply = agent.sessions.append(user, self.session_id, "assistant", text)
        ids = list(dict.fromkeys(shown))
        if ids:
            agent.ratings.record_shown(user, reply.id, ids)
            agent.facts.mark_retrieved(user, ids)
        return reply.id

    # -- hooks ------------------------------------------------------------------------------

    async def _before_reply(self, message: Message) -> list[str]:
        """Run the before_reply hooks; the notes they return, for the end of the reply."""
        notes: list[str] = []
        for hook in self.agent.before_reply:
            try:
                outcome: Any = hook(self.user, self.session_id, message)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            except Exception:  # a hook's failure must not cost the user their reply
                log.exception("before_reply hook %r failed", hook)
                continue
            if isinstance(outcome, str) and outcome:
                notes.append(outcome)
        return notes

    def _after_reply(self, result: TurnResult) -> None:
        if self.transcript is not None:             # a temporary chat: nothing to learn from
            return
        for hook in self.agent.after_reply:
            try:
                hook(result)
            except Exception:  # logged with its traceback; the reply is already delivered
                log.exception("after_reply hook %r failed", hook)
