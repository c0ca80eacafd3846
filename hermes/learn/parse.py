"""Turning the extraction model's output into validated actions, defensively.

Models wrap JSON in code fences and prose, return one object instead of a list, wrap the list in
``{"actions": [...]}``, leave trailing commas, use Python literals, invent action names and fact
numbers, forget fields, or stop mid-way. Everything that can be read unambiguously is read; every
action is validated on its own and an invalid one is skipped with a note (logged by the caller),
never guessed. Output that holds no usable JSON at all, or JSON cut off before it ends, raises
:class:`ParseError` carrying the raw text, so the run is recorded as failed and retried.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from hermes.errors import HermesError
from hermes.safe_text import scrub_value

KINDS = ("semantic", "episodic", "procedural")
# Defaults of the run's bounds (extraction.max_* and facts.max_*_per_fact in the config).
MAX_CONTENT_CHARS = 500
MAX_ACTIONS = 50
MAX_ENTITIES = 20
MAX_TAGS = 20

_CREATE = {"create", "add", "new", "insert", "remember", "save", "store"}
_UPDATE = {"update", "edit", "modify", "replace", "revise", "supersede", "correct", "change"}
_DELETE = {"delete", "remove", "forget", "drop", "retract", "invalidate"}
_NOOP = {"none", "noop", "no-op", "no_op", "skip", "keep", "ignore", "nothing"}
_RELIED = {"relied_on", "relied", "used", "relied-on", "reliedon", "used_facts"}
_CONTRADICTED = {"contradicted", "contradict", "disputed", "wrong"}

_KIND_ALIASES = {
    "fact": "semantic", "preference": "semantic", "semantic": "semantic", "knowledge": "semantic",
    "event": "episodic", "episode": "episodic", "episodic": "episodic",
    "procedure": "procedural", "procedural": "procedural", "howto": "procedural",
    "instruction": "procedural", "skill": "procedural",
}


class ParseError(HermesError):
    """The model's output could not be used at all. ``raw`` is kept for the failed run."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class CreateAction:
    content: str
    kind: str = "semantic"
    category: str = "general"
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    importance: float | None = None
    stated: str | None = None      # "explicit": the user said it outright; "inferred"; None
    action: Literal["create"] = "create"


@dataclass(frozen=True)
class UpdateAction:
    number: int
    content: str
    stated: str | None = None      # "explicit": the user said the change outright; "inferred"
    action: Literal["update"] = "update"


@dataclass(frozen=True)
class DeleteAction:
    number: int
    reason: str | None = None
    action: Literal["delete"] = "delete"


@dataclass(frozen=True)
class ReliedAction:
    """The facts (shown for a reply) that the assistant's reply relied on."""

    numbers: tuple[int, ...]
    action: Literal["relied_on"] = "relied_on"


@dataclass(frozen=True)
class ContradictedAction:
    """A shown or existing fact the user said is wrong; ``content``: what they said instead."""

    number: int
    content: str | None = None
    action: Literal["contradicted"] = "contradicted"


Action = CreateAction | UpdateAction | DeleteAction | ReliedAction | ContradictedAction


@dataclass
class ParseResult:
    actions: list[Action] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # why each unusable action was dropped


# -- finding the JSON -------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[\]}])")


def _strip_trailing_commas(text: str) -> str:
    """Remove commas before ] or } outside strings."""
    out: list[str] = []
    in_string = False
    escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif char == ",":
            j = i + 1
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if j < len(text) and text[j] in "]}":
                i += 1
                continue
            out.append(char)
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket matching ``text[start]``, or None when it never closes."""
    opening = text[start]
    closing = "]" if opening == "[" else "}"
    depth = 0
    in_string: str | None = None
    escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == in_string:
                in_string = None
            continue
        if char in "\"'":
            # single quotes only delimit strings in Python-literal output; inside words they
            # are apostrophes, which the JSON decoder would reject anyway
            if char == '"' or (i > 0 and not text[i - 1].isalnum()):
                in_string = char
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return i + 1 if char == closing else None
    return None


def _loads(candidate: str) -> Any:
    """json, then json without trailing commas, then a Python literal (single quotes, True)."""
    for text in (candidate, _strip_trailing_commas(candidate)):
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: `[` x 50,000
            pass
    try:
        return ast.literal_eval(_strip_trailing_commas(candidate))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    # JSON-ish with Python-style constants the other way round (true/false/null are fine)
    raise ValueError("not JSON")


def _candidates(raw: str) -> list[str]:
    """Where the JSON may be: fenced blocks first (json-tagged before others), then the text."""
    fenced = [(tag.lower(), body) for tag, body in _FENCE.findall(raw)]
    ordered = [b for t, b in fenced if t == "json"] + [b for t, b in fenced if t != "json"]
    return [*ordered, raw]


# Deeper than any list of actions: `[` x 50,000 would cost a bracket scan per bracket (minutes)
# and a RecursionError in the decoder.
MAX_JSON_DEPTH = 64


def _depth(text: str) -> int:
    """How deep brackets nest outside double-quoted strings (one pass)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest


def _find_json(raw: str) -> Any:
    if _depth(raw) > MAX_JSON_DEPTH:
        raise ParseError(f"the extraction output nests brackets deeper than {MAX_JSON_DEPTH} "
                         "levels", raw)
    truncated = False
    for text in _candidates(raw):
        stripped = text.strip()
        if not stripped:
            continue
        try:
            return _loads(stripped)
        except ValueError:
            pass
        # The first bracket that opens a complete, loadable value wins.
        for match in re.finditer(r"[\[{]", text):
            end = _balanced_end(text, match.start())
            if end is None:
                if _looks_like_actions(text[match.start():]):
                    # Every later bracket lies inside this unclosed one: loading an inner
                    # object would silently drop the rest of the list.
                    truncated = True
                    break
                continue
            try:
                return _loads(text[match.start():end])
            except ValueError:
                continue
    if truncated:
        raise ParseError(
            "the extraction output is truncated JSON (it stops before the list closes)", raw
        )
    raise ParseError("the extraction output holds no JSON list of actions", raw)


def _looks_like_actions(text: str) -> bool:
    return bool(re.search(r"[\"'](?:action|op|type|content)[\"']\s*:", text))


# -- validating ---------------------------------------------------------------------------------

def _first(item: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in item and item[key] is not None:
            return item[key]
    return None


def _string_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [part for part in re.split(r"[,;]", value)]
    if not isinstance(value, list | tuple):
        return ()
    seen: dict[str, None] = {}
    for entry in value:
        if isinstance(entry, dict):
            entry = _first(entry, "name", "entity", "value")
        if isinstance(entry, str | int | float) and str(entry).strip():
            seen.setdefault(str(entry).strip(), None)
    return tuple(seen)


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(?:#|fact\s*#?|\[)?\s*(\d+)\s*\]?\s*", value, re.I)
        if match:
            return int(match.group(1))
    return None


def _importance(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        named = {"low": 0.3, "medium": 0.5, "normal": 0.5, "high": 0.8, "critical": 1.0}
        if value.strip().lower() in named:
            return named[value.strip().lower()]
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    number = float(value)
    if number > 1:  # a 1-10 (or 1-5) scale
        number = number / 10 if number <= 10 else 1.0
    return max(0.0, min(1.0, number))


def _usable_content(item: dict[str, Any], result: ParseResult, missing: str,
                    where: str, max_chars: int = MAX_CONTENT_CHARS) -> str | None:
    """The action's content, or None with the reason recorded (missing, or too long)."""
    content = _content(item)
    if not content:
        result.skipped.append(missing)
        return None
    if len(content) > max_chars:
        result.skipped.append(f"{where}: content over {max_chars} characters")
        return None
    return content


def _capped(values: tuple[str, ...], cap: int, what: str, where: str,
            result: ParseResult) -> tuple[str, ...]:
    if len(values) <= cap:
        return values
    result.skipped.append(f"{where}: {len(values):,} {what}, kept the first {cap}")
    return values[:cap]


def _content(item: dict[str, Any]) -> str | None:
    value = _first(item, "content", "new_content", "fact", "text", "statement", "value")
    if not isinstance(value, str):
        return None
    value = re.sub(r"\s+", " ", value).strip()
    return value or None


def _stated(item: dict[str, Any]) -> str | None:
    """Whether the user said it outright ("explicit") or the model inferred it ("inferred");
    None when the output does not say (treated as inferred where that matters)."""
    value = _first(item, "stated", "basis", "explicit")
    if isinstance(value, bool):
        return "explicit" if value else "inferred"
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("explicit", "explicitly", "stated", "said", "true", "yes"):
            return "explicit"
        if lowered in ("inferred", "implicit", "inference", "guess", "false", "no"):
            return "inferred"
    return None


def _action_name(item: dict[str, Any]) -> str | None:
    value = _first(item, "action", "op", "operation", "type", "event")
    if isinstance(value, str):
        lowered = value.strip().lower()
        # "type" may hold the fact kind instead of the action
        if lowered in _KIND_ALIASES and "action" not in item:
            return "create"
        return lowered
    # No action named: a bare fact object is a create; a numbered one without content a delete
    if _content(item) and _first(item, "number", "id", "fact_number") is None:
        return "create"
    return None


def _actions_list(data: Any) -> list[Any]:
    if isinstance(data, dict):
        for key in ("actions", "facts", "memories", "operations", "results", "items", "changes"):
            if isinstance(data.get(key), list):
                return data[key]
        return [data]
    if isinstance(data, list):
        return data
    raise TypeError(type(data).__name__)


def parse_actions(
    raw: str, *, known_numbers: Collection[int] = (), categories: Collection[str] = (),
    max_actions: int = MAX_ACTIONS, max_entities: int = MAX_ENTITIES, max_tags: int = MAX_TAGS,
    max_content_chars: int = MAX_CONTENT_CHARS,
) -> ParseResult:
    """Validated actions from the model's ``raw`` output.

    ``known_numbers`` are the temporary numbers the prompt showed; an update or delete of any
    other number is skipped. ``categories`` (when given) are the allowed categories; others
    become ``general``. At most ``max_actions`` actions are kept (the rest are noted as
    skipped), each fact with at most ``max_entities`` entities and ``max_tags`` tags, so one
    runaway output cannot hold the write lock or flood the store.
    """
    if raw is None or not raw.strip():
        raise ParseError("the extraction output is empty", raw or "")
    # "\ud800" escapes decode to lone surrogates, which no write could store.
    data = scrub_value(_find_json(raw))
    try:
        items = _actions_list(data)
    except TypeError:
        raise ParseError(f"the extraction output is a JSON {type(data).__name__}, "
                         "not a list of actions", raw) from None
    result = ParseResult()
    known = set(known_numbers)
    allowed = {c.lower(): c for c in categories}
    if len(items) > max_actions:
        result.skipped.append(f"{len(items) - max_actions:,} action(s) past the cap of "
                              f"{max_actions} per run were dropped")
        items = items[:max_actions]
    for index, item in enumerate(items, start=1):
        where = f"action {index}"
        if not isinstance(item, dict):
            result.skipped.append(f"{where}: not an object ({item!r:.40})")
            continue
        name = _action_name(item)
        if name in _NOOP:
            continue
        if name in _CREATE:
            content = _usable_content(item, result, f"{where}: create without content", where,
                                      max_content_chars)
            if content is None:
                continue
            kind_raw = str(_first(item, "kind", "type", "memory_type", "fact_type") or "semantic")
            kind = _KIND_ALIASES.get(kind_raw.strip().lower(), "semantic")
            category = str(_first(item, "category", "topic") or "general").strip().lower()
            if allowed:
                category = allowed.get(category, "general")
            result.actions.append(
                CreateAction(
                    content=content,
                    kind=kind,
                    category=category or "general",
                    entities=_capped(_string_list(_first(item, "entities", "entity",
                                                         "subjects")),
                                     max_entities, "entities", where, result),
                    tags=_capped(_string_list(_first(item, "tags", "labels", "keywords")),
                                 max_tags, "tags", where, result),
                    importance=_importance(_first(item, "importance", "priority", "salience")),
                    stated=_stated(item),
                )
            )
        elif name in _RELIED:
            raw_numbers = _first(item, "numbers", "facts", "ids", "number")
            values = raw_numbers if isinstance(raw_numbers, list) else [raw_numbers]
            numbers = tuple(dict.fromkeys(n for n in map(_number, values)
                                          if n is not None and n in known))
            if numbers:
                result.actions.append(ReliedAction(numbers))
            else:
                result.skipped.append(f"{where}: {name} names no shown fact number")
        elif name in _CONTRADICTED:
            number = _number(_first(item, "number", "fact_number", "id", "fact", "n"))
            if number is None or number not in known:
                result.skipped.append(f"{where}: {name} of unknown fact number {number}")
                continue
            content = _content(item)
            if content is not None and len(content) > max_content_chars:
                content = None
            result.actions.append(ContradictedAction(number, content))
        elif name in _UPDATE or name in _DELETE:
            number = _number(_first(item, "number", "fact_number", "id", "fact_id", "fact",
                                    "target", "n", "ref"))
            if number is None:
                result.skipped.append(f"{where}: {name} without a fact number")
                continue
            if number not in known:
                result.skipped.append(f"{where}: {name} of unknown fact number {number}")
                continue
            if name in _UPDATE:
                content = _usable_content(
                    item, result, f"{where}: update of {number} without new content", where,
                    max_content_chars)
                if content is None:
                    continue
                result.actions.append(UpdateAction(number=number, content=content,
                                                   stated=_stated(item)))
            else:
                reason = _first(item, "reason", "why", "note")
                result.actions.append(
                    DeleteAction(number=number, reason=str(reason).strip() if reason else None)
                )
        else:
            result.skipped.append(f"{where}: unknown action {name!r}")
    return result
