"""The terminal front-end: a prompt-toolkit REPL on the same agent and memory as Discord.

One long-lived ``PromptSession`` (a full prompt-toolkit Application): history in
``<home>/repl_history``, Enter sends, Esc-Enter (or Alt-Enter) adds a line, Tab completes slash
commands. A reply streams as a task while the prompt stays live, so Ctrl-C is a key press that
stops the reply and keeps the REPL; Ctrl-D (or /quit, /exit) leaves. Leaving ends the session
(so the next start begins a new one, with the context file) and summarises it in the background
(``background``: the owner waits for it, bounded; a summary cut short is written at the next
start).

Everything the REPL says goes through ``emit(kind, text)``: the terminal sink prints above the
prompt; tests collect the calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.application.current import get_app_or_none
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from hermes.aio import finish_or_cancel
from hermes.config import terminal_identity
from hermes.errors import HermesError, QueryError
from hermes.frontends.base import no_model_notice
from hermes.frontends.commands import MemoryCommands
from hermes.home import create_private_file, make_home
from hermes.memory.place import Scope
from hermes.safety.guard import printable

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.store import CronJob
    from hermes.frontends.base import FrontendContext
    from hermes.learn.runs import RunRecord
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import Memory
    from hermes.memory.sessions.store import SessionStore

log = logging.getLogger(__name__)

Emit = Callable[[str, str], None]

COMMANDS: dict[str, str] = {
    "/remember": "TEXT  remember a fact",
    "/forget": "ID  forget a fact",
    "/facts": "QUERY  search facts",
    "/probe": "ENTITY  everything about one entity",
    "/reason": "A, B  what connects entities",
    "/rate": "[ID] up|down  rate a fact, or the facts behind the last reply",
    "/mark": "ID|memory ENTRY shareable|private|default  where a fact or an entry may be "
             "repeated (a Discord channel)",
    "/pending": "[accept|reject ID]  questions before an inference overrides you",
    "/memory": "show the basic-memory block",
    "/sessions": "recent conversations",
    "/search": "QUERY  search past conversations",
    "/context": "show the cross-thread context file",
    "/new": "start a new conversation",
    "/help": "this list",
    "/quit": "leave (/exit and Ctrl-D also leave)",
}
LEAVE = ("/quit", "/exit")
HELP = ("Enter sends, Esc-Enter adds a line, Ctrl-C stops a reply, Ctrl-D leaves.\n"
        + "\n".join(f"  {name:<10} {meta}" for name, meta in COMMANDS.items()))


def receipt(shown: list[int]) -> str:
    """The line under a reply: the facts it used (what it learned follows as it is learned)."""
    if not shown:
        return "(used no stored facts)"
    ids = ", ".join(f"#{i}" for i in sorted(shown))
    return (f"(used {len(shown)} fact{'s' if len(shown) != 1 else ''}: {ids} · /rate up|down "
            "rates them, /forget ID drops one)")


class SlashCompleter(Completer):
    """Completes a slash command while the input is one word starting with '/'."""

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or any(c.isspace() for c in text):
            return
        for name, meta in COMMANDS.items():
            if name.startswith(text):
                yield Completion(name, start_position=-len(text), display_meta=meta)


class TerminalSink:
    """Prints above the running prompt. A reply shows as it streams: its whole lines are
    printed above the prompt, the line still being written is drawn by the prompt itself, in
    the line above ``hermes>`` (printed there it would be wiped by the prompt's next redraw),
    and until the first text comes that line says "thinking…"."""

    STYLES = {"info": "ansigray", "error": "ansired", "reply": "", "cron": "ansicyan"}
    THINKING = "thinking…"

    def __init__(self) -> None:
        self._line = ""
        self._thinking = False

    def __call__(self, kind: str, text: str) -> None:
        # Replies and memory may hold control characters: shown as escapes, never obeyed.
        text = printable(text)
        if kind == "thinking":
            self._thinking = True
        elif kind == "chunk":
            self._thinking = False
            self._line += text
            if "\n" in self._line:
                done, self._line = self._line.rsplit("\n", 1)
                print_formatted_text(done)
        elif kind == "end":
            if self._line:
                print_formatted_text(self._line)
            self._line = ""
            self._thinking = False
        else:
            print_formatted_text(FormattedText([(self.STYLES.get(kind, ""), text)]))
            return
        app = get_app_or_none()
        if app is not None:
            app.invalidate()

    def above_prompt(self) -> list[tuple[str, str]]:
        """The prompt's first line while a reply is written: the line so far, or thinking."""
        if self._line:
            return [("", self._line + "\n")]
        if self._thinking:
            return [("ansigray italic", self.THINKING + "\n")]
        return []


class Repl:
    def __init__(self, memory: Memory, agent: Agent, *, user: str | None = None,
                 emit: Emit | None = None, history: History | None = None) -> None:
        self.memory = memory
        self.agent = agent
        self.identity = terminal_identity()
        self.user = user or memory.settings.resolve_user(self.identity)
        self.emit: Emit = emit or TerminalSink()
        self.commands = MemoryCommands(memory)
        self.channel_key = self.identity
        self.last_reply_id: int | None = None
        self._sessions: set[int] = set()           # where this REPL talked (for _learned)
        self._reply: asyncio.Task[None] | None = None
        self._left = False
        # Summaries written after leaving; whoever runs the REPL waits for them (bounded).
        self.background: set[asyncio.Task[None]] = set()
        if history is None:
            make_home(memory.settings.home_path)
            # What was typed: its owner's alone (prompt_toolkit appends with the umask's mode)
            create_private_file(memory.settings.home_path / "repl_history")
            history = FileHistory(str(memory.settings.home_path / "repl_history"))
        self.prompt: PromptSession[str] = PromptSession(
            self._prompt_message, history=history, multiline=True, prompt_continuation="...     ",
            completer=SlashCompleter(), complete_while_typing=True,
            key_bindings=self._keys(),
        )

    def learn_from(self, worker: ExtractionWorker | None) -> None:
        """Say under the conversation what extraction learned from it, as it commits (the
        second half of a reply's receipt; the first is printed with the reply)."""
        if worker is not None and self._learned not in worker.on_commit:
            worker.on_commit.append(self._learned)

    def _learned(self, record: RunRecord) -> None:
        if record.user != self.user or record.session_id not in self._sessions:
            return
        for change in record.changes.changes if record.changes else []:
            if change.kind not in ("created", "superseded"):
                continue
            try:
                fact = self.memory.facts.get(self.user, change.fact_id)
            except HermesError:
                continue
            was = f", replacing #{change.old_id}" if change.old_id else ""
            self.emit("info", f"(learned #{fact.id}{was}: {fact.content} · /forget {fact.id} "
                      "undoes it)")

    def _prompt_message(self) -> FormattedText:
        above = getattr(self.emit, "above_prompt", None)
        return FormattedText([*(above() if above is not None else []), ("", "hermes> ")])

    # ------------------------------------------------------------------ state
    def replying(self) -> bool:
        return self._reply is not None and not self._reply.done()

    def stop_reply(self) -> bool:
        if self._reply is not None and not self._reply.done():
            self._reply.cancel()
            return True
        return False

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("enter")
        def _send(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        @keys.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("c-c", filter=Condition(self.replying))
        def _stop(event: KeyPressEvent) -> None:
            self.stop_reply()

        return keys

    @property
    def sessions(self) -> SessionStore:
        return self.memory.sessions

    # ------------------------------------------------------------------ the loop
    async def run(self) -> None:
        self.emit("info", f"Hermes: talking as {self.user}. /help for commands, Ctrl-D leaves.")
        try:
            while True:
                try:
                    # Ctrl-C at the keyboard arrives as a key press (raw mode); a SIGINT from
                    # outside stays the daemon's (prompt-toolkit would take the loop's handler
                    # and remove it when the prompt returns, so `hermes run` no longer stopped).
                    text = await self.prompt.prompt_async(handle_sigint=False)
                except KeyboardInterrupt:        # Ctrl-C at an idle prompt drops the line
                    continue
                except EOFError:                 # Ctrl-D
                    break
                text = text.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not await self.command(text):
                        break
                    continue
                if self.replying():
                    self.emit("error", "Still answering; press Ctrl-C to stop that reply first.")
                    continue
                self._reply = asyncio.create_task(self.reply(text), name="hermes-repl-reply")
        finally:
            if self._reply is not None and self.stop_reply():
                await asyncio.gather(self._reply, return_exceptions=True)
            self.leave()
            self.emit("info", "Bye.")

    def leave(self) -> None:
        """The person left (Ctrl-D, /quit, /exit, the daemon stopping): end the open session
        and summarise it in the background. Once only."""
        if self._left:
            return
        self._left = True
        if self.sessions.close_open(self.user, "terminal", self.channel_key) is not None:
            self.summarize_in_background()

    def summarize_in_background(self) -> None:
        """Summarise this user's ended sessions still without a summary (the one just left, or
        one a process that exited early left behind)."""
        from hermes.agent import summarize

        earlier = list(self.background)
        # The daemon's agent, over its socket (`hermes chat` with a daemon running): it does it.
        left = getattr(self.agent, "left", None)

        async def work() -> None:
            await asyncio.gather(*earlier, return_exceptions=True)  # never the same one twice
            try:
                if left is not None:
                    await left(self.user)
                    return
                await summarize.summarize_pending(self.memory, self.agent.background_llm,
                                                  self.user)
            except Exception:
                log.exception("repl: summarising the sessions left failed; retried later")

        task = asyncio.ensure_future(work())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def wait_reply(self) -> None:
        if self._reply is not None:
            await asyncio.gather(self._reply, return_exceptions=True)

    async def reply(self, text: str) -> None:
        try:
            session = self.sessions.open_for(self.user, "terminal", self.channel_key)
            turn = self.agent.turn(self.user, session.id, text,
                                   speaker=self.memory.settings.display_name(self.user))
            self.emit("thinking", "")
            async for chunk in turn:
                self.emit("chunk", chunk)
            self.emit("end", "")
            result = turn.result
            if result.error and not result.text.strip():
                self.emit("error", result.error)
            elif result.error:                      # a partial reply must not look complete
                self.emit("error", f"(reply cut off: {result.error})")
            self.last_reply_id = result.assistant_message_id
            self._sessions.add(session.id)
            self.emit("info", receipt(result.shown_fact_ids))
        except asyncio.CancelledError:
            self.emit("end", "")
            self.emit("info", "[stopped]")
            raise
        except HermesError as exc:
            self.emit("end", "")
            self.emit("error", str(exc))
        except Exception as exc:
            log.exception("repl: the turn failed")
            self.emit("end", "")
            self.emit("error", f"Sorry, that reply failed ({exc}); it has been logged.")

    # ------------------------------------------------------------------ slash commands
    async def command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        name, _, arg = text.partition(" ")
        arg = arg.strip()
        if name in LEAVE:
            return False
        if name not in COMMANDS:
            self.emit("error", f"Unknown command {name}; /help lists them.")
            return True
        try:
            self.emit("info", self._run_command(name, arg))
        except HermesError as exc:
            self.emit("error", str(exc))
        except ValueError:
            self.emit("error", f"Usage: {name} {COMMANDS[name]}")
        except Exception as exc:
            log.exception("repl: %s failed", name)
            self.emit("error", f"Sorry, {name} failed ({exc}); it has been logged.")
        return True

    def _run_command(self, name: str, arg: str) -> str:
        cmds, user = self.commands, Scope(self.user)  # the terminal is a private place
        needs_arg = {"/remember", "/forget", "/facts", "/probe", "/reason", "/rate", "/search",
                     "/mark"}
        if name in needs_arg and not arg:
            raise ValueError(name)
        if name == "/help":
            return HELP
        if name == "/remember":
            return cmds.remember(user, arg)
        if name == "/forget":
            return cmds.forget(user, int(arg.lstrip("[").rstrip("]")))
        if name == "/facts":
            return cmds.search(user, arg)
        if name == "/probe":
            return cmds.probe(user, arg)
        if name == "/reason":
            return cmds.reason(user, arg.split(","))
        if name == "/rate":
            return self._rate(arg)
        if name == "/mark":
            return self._mark(arg)
        if name == "/pending":
            return self._pending(arg)
        if name == "/memory":
            return cmds.memory(user)
        if name == "/sessions":
            return cmds.session_list(user)
        if name == "/search":
            return cmds.session_search(user, arg)
        if name == "/context":
            return cmds.context(user)
        if name == "/new":
            return self._new()
        raise AssertionError(name)

    def _mark(self, arg: str) -> str:
        """``/mark ID MARK`` (a fact) or ``/mark memory ENTRY MARK`` (an entry, by id or a
        unique part of its text)."""
        parts = arg.split()
        if len(parts) < 2:
            raise ValueError(arg)
        if parts[0].lower() == "memory":
            if len(parts) < 3:
                raise ValueError(arg)
            return self.commands.mark_entry(Scope(self.user), " ".join(parts[1:-1]), parts[-1])
        if len(parts) != 2:
            raise ValueError(arg)
        return self.commands.mark(Scope(self.user), int(parts[0].strip("[]")), parts[-1])

    def _pending(self, arg: str) -> str:
        parts = arg.split()
        if not parts:
            return self.commands.pending(Scope(self.user))
        if len(parts) != 2 or parts[0] not in ("accept", "reject"):
            raise ValueError(arg)
        return self.commands.pending(Scope(self.user), parts[0], int(parts[1].strip("[]")))

    def _rate(self, arg: str) -> str:
        parts = arg.split()
        if not parts or parts[-1] not in ("up", "down") or len(parts) > 2:
            raise ValueError(arg)
        helpful = parts[-1] == "up"
        if len(parts) == 2:
            return self.commands.rate(Scope(self.user), int(parts[0].strip("[]")), helpful)
        if self.last_reply_id is None:
            raise QueryError("No reply to rate yet; /rate ID up|down rates one fact.")
        # One rating per reply, as with Discord reactions: again is a no-op, the other way
        # replaces it.
        rater = self.identity
        ops, scope = self.commands.ops, Scope(self.user)
        if ops.reply_rating(scope, self.last_reply_id, rater) == helpful:
            return f"The last reply is already rated {parts[-1]}."
        rated = ops.set_reply_rating(scope, self.last_reply_id, rater, helpful)
        reach = ops.reply_reach(scope, self.last_reply_id)
        if reach.basis == "none":
            return "No facts were recalled for the last reply; nothing to rate."
        lines = [f"[{r.id}] trust {r.old_trust:.2f} -> {r.new_trust:.2f}" for r in rated]
        note = reach.explain(helpful, f"/rate ID {parts[-1]}")
        return "\n".join([*lines, note] if note else lines)

    def _new(self) -> str:
        current = self.sessions.open_for(self.user, "terminal", self.channel_key)
        if current.message_count:
            self.sessions.close(self.user, current.id)
        self.last_reply_id = None
        return "Started a new conversation."



class ReplFrontend:
    """The REPL as a front-end of ``hermes run``: on when the daemon owns a terminal. Leaving
    it stops Hermes; Hermes stopping ends its session (summarised in ``finish``)."""

    source = "terminal"

    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx
        self.repl: Repl | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def status(self) -> str:
        return "repl: on" if self.repl is not None else "repl: off"

    async def start(self) -> bool:
        if not self.ctx.interactive:
            return False
        self.repl = Repl(self.ctx.memory, self.ctx.agent)
        self.repl.learn_from(self.ctx.worker)
        notice = no_model_notice(self.ctx.agent)
        if notice:
            self.repl.emit("error", notice)
        self._task = asyncio.create_task(self._run(self.repl), name="hermes-repl")
        return True

    async def _run(self, repl: Repl) -> None:
        try:
            await repl.run()
        finally:
            if self.ctx.request_stop is not None:
                self.ctx.request_stop("the REPL was closed")

    async def stop(self) -> None:
        """A reply being written may finish (the turn grace); then the person has left."""
        repl = self.repl
        if repl is None:
            return
        reply = repl._reply
        if reply is not None and not reply.done():
            _, late = await asyncio.wait({reply}, timeout=self.ctx.turn_grace)
            if late:
                repl.stop_reply()
                await repl.wait_reply()
        repl.leave()

    async def finish(self, timeout: float) -> None:
        """The session left is summarised (bounded: one cut short is written at next start)."""
        if self.repl is None:
            return
        late = await finish_or_cancel(self.repl.background, timeout)
        if late:
            log.warning("summary of the terminal session cut short; written at next start")
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def deliver(self, job: CronJob, target: str, text: str) -> None:
        assert self.repl is not None
        self.repl.emit("cron", f"[cron {job.name}]\n{text}")
