"""The memory tools the model can call: their JSON schemas, and dispatch to the stores.

``memory`` edits the basic-memory block; ``facts`` reads and writes the fact store;
``fact_feedback`` rates facts; ``session_search`` browses and searches past conversations.
Results are compact JSON. An error goes back to the model as a result with what it needs to
recover (an over-cap write returns the usage and the entries), never as an exception.

A :class:`ToolBox` lives for one turn and one user: every call is scoped to that user and to the
place the turn's reply is read in (its Scope: in a shared place, a Discord channel, the tools
read and name only what its readers may see, hermes.memory.audience), and it counts failed
memory writes so that the third one tells the model to stop and answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hermes import plugins
from hermes.agent.llm import ToolCall
from hermes.agent.tool_registry import Tool, ToolRegistry, ToolResult
from hermes.errors import HermesError
from hermes.memory import Memory
from hermes.memory.basic import Op, OverCapError, usage_of
from hermes.memory.operations import MemoryOperations, Scope, shapes
from hermes.safety.guard import standing_order

MAX_FAILED_WRITES = 3
MEMORY_FULL_NOTE = ("(Memory is full: I could not save this. Make room with `hermes memory "
                    "edit`, or ask me to consolidate it.)")
SHOW_MESSAGES = 40
# "forget what I said about the NAS" retires at most this many facts at once.
FORGET_AT_ONCE = 20
# The model pays for every word of a result: long texts (a message, a summary) are cut to this.
SNIPPET_CHARS = 300


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class ToolError(Exception):
    """A problem with the model's call, returned to it as an error result."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


@dataclass
class ToolOutcome:
    name: str
    args: dict[str, Any]
    content: str  # the compact JSON result the model sees
    ok: bool
    wrote_memory: bool = False
    failed_write: bool = False
    fact_ids: list[int] = field(default_factory=list)  # facts shown to the model by this call


class ToolBox:
    """The tools of one turn, for one user."""

    def __init__(self, memory: Memory, user: str, *, session_id: int | None = None,
                 tools: ToolRegistry | None = None, scope: Scope | None = None,
                 read_only: bool = False, embed_writes: bool = False) -> None:
        self.memory = memory
        # A temporary chat's turn: memory may be read, never written (nothing is learned)
        self.read_only = read_only
        self.tools = tools or plugins.loaded().tools
        self.user = user
        self.scope = scope or Scope(user)
        # embed_writes: where no vector job runs (the CLI, the MCP server), a fact written
        # here gets its vector at once
        self.ops = MemoryOperations(memory, embed_writes=embed_writes)
        self.session_id = session_id
        # A tool other than the memory tools returned something this turn (a web page, a
        # file, a plugin's output): a fact the model writes after it may come from that, so it
        # is stored as a tool's output (hermes.memory.facts.provenance), trusted less.
        self.outside_input = False
        self.failed_writes = 0
        # What each failed write was refused for ("facts forget: No fact with id 999 ..."),
        # so the note to the user says what failed, not that memory is full when it is not.
        self.write_failures: list[str] = []
        self.over_cap_failures = 0
        self.writes = 0  # successful writes to memory this turn
        self.over_cap = False

    @property
    def writes_stopped(self) -> bool:
        """Three memory writes failed this turn: the model was told to stop trying."""
        return self.failed_writes >= MAX_FAILED_WRITES

    @property
    def memory_full(self) -> bool:
        """Writes were stopped and every one of them failed for lack of room (the cap)."""
        return self.writes_stopped and self.over_cap_failures == self.failed_writes

    def _reasons(self) -> str:
        distinct = list(dict.fromkeys(self.write_failures))
        shown = "; ".join(shapes.clipped(reason, 160) for reason in distinct[:3])
        return shown + (f"; and {len(distinct) - 3} more" if len(distinct) > 3 else "")

    def stop_note(self) -> str:
        """The note that ends the reply once writes were stopped: what actually failed."""
        if self.memory_full:
            return MEMORY_FULL_NOTE
        return (f"({self.failed_writes} memory writes failed in this turn, so I stopped "
                f"trying: {self._reasons()})")

    def run(self, call: ToolCall) -> ToolOutcome:
        try:
            args = call.args()
        except ValueError as exc:
            return self._error(call.name, {}, f"{call.name}: {exc}. Call it again with a JSON "
                               "object of arguments.")
        tool = self.tools.get(call.name)
        if tool is None:
            return self._error(call.name, args, f"Unknown tool {call.name!r}; the tools are "
                               f"{', '.join(self.tools.names())}.")
        writes = tool.is_write(args)
        if writes and self.read_only:
            return self._error(call.name, args, "Not written: this is a temporary chat, which "
                               "is neither kept nor learned from; memory can be read here, not "
                               "changed. Tell the user to say it in a normal chat.")
        if writes and self.writes_stopped:
            return self._stop(call.name, args)
        try:
            result = tool.handler(self, args)
        except OverCapError as exc:
            self.over_cap = True
            self.over_cap_failures += 1
            return self._failed_write(call.name, args, str(exc).split(" Current entries:")[0],
                                      usage=f"{usage_of(exc.entries)}/{exc.limit}",
                                      attempted=exc.attempted_chars,
                                      entries=[shapes.entry_json(e) for e in exc.entries])
        except ToolError as exc:
            if writes:
                return self._failed_write(call.name, args, str(exc), **exc.extra)
            return self._error(call.name, args, str(exc), **exc.extra)
        except HermesError as exc:  # refused, not found, bad query: the model can fix its call
            if writes:
                return self._failed_write(call.name, args, str(exc))
            return self._error(call.name, args, str(exc))
        if not isinstance(result, ToolResult):  # a plain value: it wrote if it is a write
            result = ToolResult(result, wrote=writes)
        if call.name not in MEMORY_TOOLS:
            self.outside_input = True
        self.writes += int(result.wrote)
        return ToolOutcome(call.name, args, dumps(result.value), ok=True,
                           wrote_memory=result.wrote, fact_ids=result.fact_ids)

    # -- results ----------------------------------------------------------------------------

    def _error(self, name: str, args: dict[str, Any], message: str, **extra: Any) -> ToolOutcome:
        return ToolOutcome(name, args, dumps({"error": message, **extra}), ok=False)

    def _failed_write(self, name: str, args: dict[str, Any], message: str,
                      **extra: Any) -> ToolOutcome:
        self.failed_writes += 1
        action = args.get("action") if isinstance(args.get("action"), str) else ""
        self.write_failures.append(f"{name} {action}".strip() + f": {message}")
        if self.writes_stopped:
            extra["stop"] = self._stop_text()
        outcome = self._error(name, args, message, **extra)
        outcome.failed_write = True
        return outcome

    def _stop_text(self) -> str:
        if self.memory_full:
            return ("Memory writes have failed 3 times in this turn. Stop writing memory now: "
                    "answer the user, and tell them memory is full and that they can make room "
                    "with `hermes memory edit`.")
        return (f"Memory writes have failed {self.failed_writes} times in this turn "
                f"({self._reasons()}). Stop writing memory now: answer the user, and tell them "
                "what failed.")

    def _stop(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        outcome = self._error(name, args, "Not attempted: " + self._stop_text())
        outcome.failed_write = True
        return outcome

    # -- memory -----------------------------------------------------------------------------

    def _memory(self, args: dict[str, Any]) -> tuple[Any, bool, list[int]]:
        action, ops, scope = args.get("action"), self.ops, self.scope
        texts = [args.get("text")]
        if isinstance(args.get("ops"), list):
            texts += [op.get("text") for op in args["ops"] if isinstance(op, dict)]
        for text in texts:
            why = standing_order(str(text or ""))
            if why:
                # Basic memory is in every prompt: an order the model writes there (read from
                # a pasted mail or page) would steer every reply (issue 30, item 4).
                raise ToolError(f"Refused: that entry reads like an instruction to the "
                                f"assistant ({why}); basic memory does not take orders from "
                                "the model. If the user wants it, they add it themselves "
                                "(`hermes memory add`). Nothing was changed.")
        if action == "add":
            result = ops.basic_add(scope, _need(args, "text"))
        elif action == "replace":
            result = ops.basic_replace(scope, _need(args, "target"), _need(args, "text"))
        elif action == "remove":
            result = ops.basic_remove(scope, _need(args, "target"))
        elif action == "batch":
            steps = args.get("ops")
            if not isinstance(steps, list) or not steps:
                raise ToolError("batch needs ops: a list of {action, text, target}.")
            parsed = []
            for op in steps:
                if not isinstance(op, dict) or op.get("action") not in ("add", "replace",
                                                                        "remove"):
                    raise ToolError("each op needs action add, replace or remove.")
                parsed.append(Op(op["action"], text=op.get("text"), target=op.get("target")))
            result = ops.basic_batch(scope, parsed)
        else:
            raise ToolError(_bad_action(action, ["add", "replace", "remove", "batch"]))
        return shapes.written_json(result), result.status not in ("duplicate", "unchanged"), []

    # -- facts ------------------------------------------------------------------------------

    def _facts(self, args: dict[str, Any]) -> tuple[Any, bool, list[int]]:
        action, ops, scope = args.get("action"), self.ops, self.scope
        limit = _limit(args, 10)
        if action == "search":
            # each says why it was found: a fact near in meaning only, or holding the words
            found = ops.search(scope, _need(args, "query"), limit=limit, explain=True)
            return shapes.found_json(found), False, [f.id for f in found]
        if action == "probe":
            found = ops.probe(scope, _need(args, "entity"), limit=limit)
            return shapes.facts_json(found), False, [f.id for f in found]
        if action == "reason":
            entities = args.get("entities")
            if not isinstance(entities, list) or len(entities) < 2:
                raise ToolError("reason needs entities: a list of at least two names.")
            result = ops.reason(scope, [str(e) for e in entities], limit=limit)
            return shapes.reasoned_json(result), False, [f.id for f in result.facts]
        if action == "add":
            tags = args.get("tags") or ()
            added = ops.add(
                scope, _need(args, "content"),
                entities=[str(e) for e in args.get("entities") or []] or None,
                category=str(args.get("category") or "general"),
                tags=[str(t) for t in tags] if isinstance(tags, list) else (),
                source_session_id=self.session_id,
                # learned where this session is held; from a tool's output when one came in;
                # an order to the assistant is the model's own (withheld, as extraction's)
                source="tool" if self.outside_input else (
                    "inferred" if standing_order(str(args.get("content") or "")) else None),
            )
            return _visible_added(added, self), True, []
        if action == "update":
            fact_id = _need_int(args, "id")
            new = ops.update(scope, fact_id, _need(args, "content"),
                             entities=[str(e) for e in args.get("entities") or []] or None,
                             source_session_id=self.session_id)
            return shapes.updated_json(new, fact_id), True, []
        if action == "forget":
            if args.get("id") is None and args.get("entity"):
                # "forget what I said about the NAS": every fact about it, each leaving a
                # tombstone (what was said before is not learned again)
                about = ops.probe(scope, str(args["entity"]), limit=FORGET_AT_ONCE)
                if not about:
                    raise ToolError(f"No fact is about {args['entity']!r}; search first.")
                gone = [ops.forget(scope, f.id, args.get("reason")) for f in about]
                return {"status": "forgotten", "ids": [f.id for f in gone],
                        **shapes.facts_json(gone)}, True, []
            fact = ops.forget(scope, _need_int(args, "id"), args.get("reason"))
            return shapes.forgotten_json(fact), True, []
        raise ToolError(_bad_action(action, ["search", "probe", "reason", "add", "update",
                                             "forget"]))

    def _feedback(self, args: dict[str, Any]) -> tuple[Any, bool, list[int]]:
        rating = args.get("rating")
        if rating not in ("helpful", "unhelpful"):
            raise ToolError("rating must be 'helpful' or 'unhelpful'.")
        ids = args.get("ids")
        if ids is None and args.get("id") is not None:
            ids = [args["id"]]
        if not isinstance(ids, list) or not ids:
            raise ToolError("ids must be a non-empty list of fact ids.")
        rated, errors = [], []
        for raw in ids:
            try:
                rated.append(shapes.rated_json(self.ops.rate(self.scope, int(raw),
                                                      rating == "helpful")))
            except (HermesError, ValueError, TypeError) as exc:
                errors.append({"id": raw, "error": str(exc)})
        if not rated:
            raise ToolError("No fact was rated.", errors=errors)
        data: dict[str, Any] = {"rated": rated}
        if errors:
            data["errors"] = errors
        return data, True, []

    # -- sessions ---------------------------------------------------------------------------

    def _sessions(self, args: dict[str, Any]) -> tuple[Any, bool, list[int]]:
        action, ops, scope = args.get("action"), self.ops, self.scope
        source = args.get("source") or None
        clip = SNIPPET_CHARS
        if action == "browse":
            found = ops.sessions_list(scope, source=source, limit=_limit(args, 10))
            return {"sessions": [shapes.session_json(s, clip=clip) for s in found]}, False, []
        if action == "search":
            hits = ops.sessions_search(scope, _need(args, "query"), limit=_limit(args, 5),
                                       source=source)
            return {"results": [shapes.hit_json(hit, clip=clip) for hit in hits]}, False, []
        if action == "show":
            session_id = _need_int(args, "session_id")
            session = ops.session(scope, session_id)
            messages = [m for m in ops.session_messages(scope, session_id)
                        if m.role in ("user", "assistant")]
            shown = messages[-SHOW_MESSAGES:]
            data: dict[str, Any] = {"session": shapes.session_json(session, clip=clip),
                                    "messages": [shapes.message_json(m, clip=clip) for m in shown]}
            if len(messages) > len(shown):
                data["omitted_earlier"] = len(messages) - len(shown)
            return data, False, []
        raise ToolError(_bad_action(action, ["browse", "search", "show"]))


def _visible_added(added: Any, box: ToolBox) -> dict[str, Any]:
    """What an add stored or merged into, as the model may see it where it writes: a merge into
    a fact its readers may not see says only that it was known; a withheld fact, why."""
    fact, place = added.fact, box.scope.place
    if place.shared and not box.memory.facts.audience.sees_item(place, fact.place, fact.shared):
        return {"status": added.status, "fact": None, "note": "already known; not shown here"}
    data = shapes.added_json(added)
    if fact.forgotten_at:
        data["withheld"] = fact.forgotten_reason
    return data


# -- argument helpers --------------------------------------------------------------------------

def _bad_action(action: Any, valid: list[str]) -> str:
    return f"Unknown action {action!r}; use one of: {', '.join(valid)}."


def _need(args: dict[str, Any], key: str) -> Any:
    value = args.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ToolError(f"{args.get('action', 'this call')} needs {key}.")
    return value


def _need_int(args: dict[str, Any], key: str) -> int:
    value = _need(args, key)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{key} must be an integer id (got {value!r}).") from None


def _limit(args: dict[str, Any], default: int) -> int:
    try:
        return max(1, min(int(args.get("limit") or default), 50))
    except (TypeError, ValueError):
        return default


# -- the built-in tools ------------------------------------------------------------------------
# Registered by the default plugin hermes.agent.builtin_tools, through the same hook as a
# third-party tool. A new built-in is one more entry here.


def _builtin(name: str, description: str, properties: dict[str, Any], required: list[str],
             method: str, *, writes: bool = False,
             write_actions: set[str] | None = None) -> Tool:
    def handler(box: ToolBox, args: dict[str, Any]) -> ToolResult:
        value, wrote, fact_ids = getattr(box, method)(args)
        return ToolResult(value, wrote, fact_ids)

    handler.__name__ = method.lstrip("_")
    return Tool(name, description,
                {"type": "object", "properties": properties, "required": required},
                handler, writes=writes, write_actions=frozenset(write_actions or ()))


# The built-in memory tools; any other tool's result is outside input (ToolBox.outside_input).
MEMORY_TOOLS = frozenset({"memory", "facts", "fact_feedback", "session_search"})

_STR = {"type": "string"}
_INT = {"type": "integer"}

BUILTIN_TOOLS: list[Tool] = [
    _builtin(
        "memory",
        "Edit BASIC MEMORY, the block shown in every prompt (hard character cap). add: a new "
        "entry (text). replace: target (entry id or unique part of its text) with text. remove: "
        "target. batch: several ops applied all-or-nothing, the cap checked on the result; use "
        "it to consolidate. Never store secrets.",
        {
            "action": {"type": "string", "enum": ["add", "replace", "remove", "batch"]},
            "text": _STR,
            "target": {"type": ["integer", "string"]},
            "ops": {"type": "array", "items": {"type": "object", "properties": {
                "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                "text": _STR, "target": {"type": ["integer", "string"]}}}},
        },
        ["action"], "_memory", writes=True,
    ),
    _builtin(
        "facts",
        "Long-term fact store. search: facts matching query (found_by: its words, or only "
        "near in meaning). probe: everything about one "
        "entity. reason: facts connecting several entities. add: store one self-contained fact "
        "(content, optional entities, category, tags). update: replace fact id's content "
        "(optional entities; the old version is kept as history). forget: retire fact id, or "
        "every fact about entity (reason); what was said before is then not learned again.",
        {
            "action": {"type": "string",
                       "enum": ["search", "probe", "reason", "add", "update", "forget"]},
            "query": _STR, "entity": _STR,
            "entities": {"type": "array", "items": _STR},
            "content": _STR, "id": _INT, "category": _STR,
            "tags": {"type": "array", "items": _STR},
            "reason": _STR, "limit": _INT,
        },
        ["action"], "_facts", writes=True, write_actions={"add", "update", "forget"},
    ),
    _builtin(
        "fact_feedback",
        "Rate facts you were shown: helpful raises their trust, unhelpful (wrong, outdated, "
        "irrelevant) lowers it.",
        {"ids": {"type": "array", "items": _INT},
         "rating": {"type": "string", "enum": ["helpful", "unhelpful"]}},
        ["ids", "rating"], "_feedback",
    ),
    _builtin(
        "session_search",
        "Past conversations. browse: recent sessions (optional source: discord, terminal, "
        "cron). search: sessions where query was discussed, with the matching messages "
        "(matched: words, meaning: no word of it, both, facts). show: the messages of "
        "session_id.",
        {"action": {"type": "string", "enum": ["browse", "search", "show"]},
         "query": _STR, "session_id": _INT, "source": _STR, "limit": _INT},
        ["action"], "_sessions",
    ),
]


def tool_schemas() -> list[dict[str, Any]]:
    """Every registered tool's schema, in the order the model sees them."""
    return plugins.loaded().tools.schemas()
