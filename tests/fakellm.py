"""A scripted model at litellm's boundary: a ``litellm.CustomLLM`` registered as provider ``fake``.

Production code calls ``litellm.acompletion(model="fake/scripted", ...)`` unchanged; each call
takes the next step of the script (FIFO):

    fake_model.reply("Hello")                         # a streamed text reply
    fake_model.tool_call("facts", {"action": "search", "query": "db"})
    fake_model.error(rate_limit())                    # the call raises (mapped by litellm)
    fake_model.error(internal_server(), partial_text="Hel")  # a stream that breaks mid-way
    gate = fake_model.block()                         # the next call waits until gate.set()

Every request is recorded in ``fake_model.requests`` (messages, tools, optional params).
A call with nothing scripted fails with a non-retryable 400, so an unexpected model call is loud.

A new web chat's title (hermes.agent.summarize.title_from_start) is asked for in the background,
in no fixed order with the script's calls (extraction's): it is answered outside the script by
``fake_model.title`` (a str, an exception, a ``Block``, or a function of the request; "" by
default: no title) and recorded in ``fake_model.title_requests``, not ``requests``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hermes.agent.llm import load_litellm

litellm = load_litellm()  # sets the offline switches before the first import

from litellm import CustomLLM  # noqa: E402
from litellm.llms.custom_llm import CustomLLMError  # noqa: E402

PROVIDER = "fake"
MODEL = f"{PROVIDER}/scripted"
# The first line of the title prompt (hermes/prompts/title.md) marks a title request
TITLE_MARK = "You write the title of a conversation"

_ids = itertools.count(1)


@dataclass
class FakeToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)  # str: sent verbatim
    id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    usage: tuple[int, int] = (10, 5)
    chunk_size: int = 4
    arguments_chunk_size: int = 8  # a tool call's arguments stream in pieces of this size


@dataclass
class Fail:
    error: BaseException
    partial_text: str = ""


@dataclass
class Block:
    """The call waits on ``release`` (the test sets it), then takes the next step."""

    release: asyncio.Event


@dataclass
class FakeRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    optional_params: dict[str, Any]
    stream: bool
    api_base: str | None
    timeout: Any

    @property
    def system(self) -> str:
        """All system-message text of the request, joined."""
        return "\n".join(str(m.get("content") or "") for m in self.messages
                         if m.get("role") == "system")

    @property
    def prompt(self) -> str:
        """Every message's text, joined: the front, the conversation and the volatile tail."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)

    @property
    def tail(self) -> str:
        """The newest user message as sent: its volatile parts, then the person's text."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return str(users[-1].get("content") or "") if users else ""

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools or []]


# -- errors to script -------------------------------------------------------------------------

def rate_limit(msg: str = "rate limited") -> Exception:
    return litellm.RateLimitError(message=msg, llm_provider=PROVIDER, model=MODEL)


def service_unavailable(msg: str = "overloaded") -> Exception:
    return litellm.ServiceUnavailableError(message=msg, llm_provider=PROVIDER, model=MODEL)


def internal_server(msg: str = "internal error") -> Exception:
    return litellm.InternalServerError(message=msg, llm_provider=PROVIDER, model=MODEL)


def api_connection(msg: str = "connection refused") -> Exception:
    return litellm.APIConnectionError(message=msg, llm_provider=PROVIDER, model=MODEL)


def bad_request(msg: str = "bad request") -> Exception:
    return litellm.BadRequestError(message=msg, llm_provider=PROVIDER, model=MODEL)


def context_window_exceeded(msg: str = "maximum context length exceeded") -> Exception:
    return litellm.ContextWindowExceededError(message=msg, llm_provider=PROVIDER, model=MODEL)


def http_error(status: int, msg: str = "error") -> Exception:
    return CustomLLMError(status_code=status, message=msg)


# -- the provider -----------------------------------------------------------------------------

def _is_computed(step: Any) -> bool:
    return callable(step) and not isinstance(step, Reply | Fail | Block | BaseException)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))]


def _chunk(text: str = "", tool_use: dict | None = None, finished: bool = False,
           finish_reason: str = "", usage: dict | None = None) -> dict[str, Any]:
    return {"text": text, "tool_use": tool_use, "is_finished": finished,
            "finish_reason": finish_reason, "usage": usage, "index": 0}


class ScriptedLLM(CustomLLM):
    def __init__(self) -> None:
        super().__init__()
        self.script: deque[Any] = deque()
        self.requests: list[FakeRequest] = []
        self.reached = asyncio.Event()  # set when a call arrives at a block()
        self.sleeps: list[float] = []  # backoff delays the production code asked for
        # Usage reported for each call, computed from the request (e.g. a caching provider's
        # cached tokens); None from it: the provider reports no usage at all.
        self.usage_for: Callable[[FakeRequest], dict[str, Any] | None] | None = None
        # New chats' titles: outside the script (see the module's docstring)
        self.title: str | BaseException | Callable[[FakeRequest], Any] = ""
        self.title_requests: list[FakeRequest] = []

    # -- scripting --------------------------------------------------------------------------

    def reply(self, text: str, *, chunk_size: int = 4) -> ScriptedLLM:
        self.script.append(Reply(text=text, chunk_size=chunk_size))
        return self

    def tool_call(self, name: str, arguments: dict[str, Any] | str | None = None, *,
                  text: str = "", id: str | None = None, chunk_size: int = 8) -> ScriptedLLM:
        """One model response calling one tool (``arguments`` as a dict, or raw JSON text,
        streamed in pieces of ``chunk_size`` characters)."""
        call = FakeToolCall(name, {} if arguments is None else arguments, id)
        self.script.append(Reply(text=text, tool_calls=[call], arguments_chunk_size=chunk_size))
        return self

    def tool_calls(self, *calls: tuple[str, dict[str, Any] | str], text: str = "") -> ScriptedLLM:
        """One model response calling several tools at once."""
        self.script.append(Reply(text=text, tool_calls=[FakeToolCall(n, a) for n, a in calls]))
        return self

    def error(self, exc: BaseException, *, partial_text: str = "") -> ScriptedLLM:
        self.script.append(Fail(exc, partial_text))
        return self

    def respond(self, fn: Callable[[FakeRequest], Any]) -> ScriptedLLM:
        """A step computed from the request: fn returns a str, Reply, Fail or exception."""
        self.script.append(fn)
        return self

    def block(self) -> asyncio.Event:
        """The next call waits until the returned event is set; ``reached`` tells it arrived."""
        release = asyncio.Event()
        self.script.append(Block(release))
        return release

    @property
    def pending(self) -> int:
        return len(self.script)

    @property
    def last(self) -> FakeRequest:
        return self.requests[-1]

    # -- internals --------------------------------------------------------------------------

    def _record(self, kw: dict[str, Any], stream: bool) -> FakeRequest:
        optional = dict(kw.get("optional_params") or {})
        request = FakeRequest(
            messages=copy.deepcopy(kw["messages"]),
            tools=copy.deepcopy(optional.get("tools")),
            optional_params=optional,
            stream=stream,
            api_base=kw.get("api_base"),
            timeout=kw.get("timeout"),
        )
        if TITLE_MARK in request.system:
            self.title_requests.append(request)
        else:
            self.requests.append(request)
        return request

    def _take(self, request: FakeRequest) -> Any:
        if TITLE_MARK in request.system:
            step = self.title(request) if callable(self.title) else self.title
            if isinstance(step, Block):  # waits for its release, then takes `title` again
                return step
            return Fail(step) if isinstance(step, BaseException) else Reply(text=step)
        if not self.script:
            raise CustomLLMError(
                400, f"fake model: nothing scripted for call #{len(self.requests)}")
        step = self.script.popleft()
        if _is_computed(step):
            step = step(request)
        if isinstance(step, str):
            return Reply(text=step)
        if isinstance(step, BaseException):
            return Fail(step)
        return step

    async def _resolve(self, request: FakeRequest) -> Reply | Fail:
        step = self._take(request)
        while isinstance(step, Block):
            self.reached.set()
            await step.release.wait()
            step = self._take(request)
        return step

    def _usage(self, step: Reply, request: FakeRequest | None) -> dict[str, Any] | None:
        if self.usage_for is not None and request is not None:
            return self.usage_for(request)
        prompt, completion = step.usage
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}

    def _response(self, reply: Reply, request: FakeRequest | None = None) -> Any:
        calls = [
            {"id": c.id or f"call_{next(_ids)}", "type": "function",
             "function": {"name": c.name, "arguments": c.arguments_json()}}
            for c in reply.tool_calls
        ] or None
        usage = self._usage(reply, request)
        extra = {"usage": litellm.Usage(**usage)} if usage is not None else {}
        return litellm.ModelResponse(
            model="scripted",
            choices=[{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                      "message": {"role": "assistant", "content": reply.text or None,
                                  "tool_calls": calls}}],
            **extra,
        )

    def _chunks(self, step: Reply | Fail,
                request: FakeRequest | None = None) -> Iterator[dict[str, Any]]:
        if isinstance(step, Fail):
            for piece in _pieces(step.partial_text, 4):
                yield _chunk(text=piece)
            raise step.error
        for piece in _pieces(step.text, step.chunk_size):
            yield _chunk(text=piece)
        for index, call in enumerate(step.tool_calls):
            call_id = call.id or f"call_{next(_ids)}"
            for j, piece in enumerate(_pieces(call.arguments_json(), step.arguments_chunk_size)
                                              or [""]):
                yield _chunk(tool_use={
                    "id": call_id if j == 0 else None, "type": "function",
                    "function": {"name": call.name if j == 0 else None, "arguments": piece},
                    "index": index,
                })
        yield _chunk(finished=True, finish_reason="tool_calls" if step.tool_calls else "stop",
                     usage=self._usage(step, request))

    # -- CustomLLM entry points -------------------------------------------------------------

    async def acompletion(self, *args: Any, **kw: Any) -> Any:
        request = self._record(kw, stream=False)
        step = await self._resolve(request)
        if isinstance(step, Fail):
            raise step.error
        return self._response(step, request)

    def astreaming(self, *args: Any, **kw: Any) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        # A plain def returning an async generator: litellm wraps whatever comes back. A step
        # that fails before any text is raised here, from `await acompletion(...)`, like a
        # provider that fails before its first event. A block must wait inside the generator.
        request = self._record(kw, stream=True)
        # litellm may call this from a worker thread: a block, and a step computed by a
        # function (which may want the event loop), are resolved inside the generator, on the loop.
        if self.script and (isinstance(self.script[0], Block) or _is_computed(self.script[0])):
            return self._blocked_stream(request)
        step = self._take(request)
        if isinstance(step, Fail) and not step.partial_text:
            raise step.error
        return self._agen(step, request)

    async def _agen(self, step: Reply | Fail,
                    request: FakeRequest) -> AsyncIterator[dict[str, Any]]:
        for chunk in self._chunks(step, request):
            yield chunk

    async def _blocked_stream(self, request: FakeRequest) -> AsyncIterator[dict[str, Any]]:
        step = await self._resolve(request)
        for chunk in self._chunks(step, request):
            yield chunk

    def completion(self, *args: Any, **kw: Any) -> Any:
        request = self._record(kw, stream=False)
        step = self._take(request)
        if isinstance(step, Fail):
            raise step.error
        return self._response(step, request)


def set_context_window(tokens: int) -> None:
    """What litellm's model map says ``fake/scripted`` accepts (drives compression)."""
    litellm.register_model({MODEL: {
        "max_input_tokens": tokens, "max_output_tokens": 1024, "max_tokens": 1024,
        "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
        "litellm_provider": PROVIDER, "mode": "chat", "supports_function_calling": True,
    }})


@contextmanager
def installed(fake: ScriptedLLM, *, context_window: int = 32768) -> Iterator[ScriptedLLM]:
    """Register ``fake`` as provider ``fake`` (and its model info) for the block."""
    saved = list(litellm.custom_provider_map)
    litellm.custom_provider_map = [m for m in saved if m["provider"] != PROVIDER] + [
        {"provider": PROVIDER, "custom_handler": fake}
    ]
    set_context_window(context_window)
    try:
        yield fake
    finally:
        litellm.custom_provider_map = saved
