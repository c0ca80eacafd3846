"""Model access: the only module that imports litellm, and only when a model is first called.

litellm takes about 3 s and 190 MB to import, so commands that need no model never load it.
Before the import its offline switches are set, so it never fetches a price map, a tokenizer or
anything else from the network on its own.

Every call goes through :class:`LLM`, which adds what the rest of Hermes relies on: retries with
exponential backoff on rate limits, server errors, timeouts and lost connections (the sleep is
injectable, so tests never wait); a per-request timeout; keys from the environment or
``<home>/.env``; and two errors that are one line for a person: :class:`ModelNotConfigured` (what to
set) and :class:`ModelUnavailable` (the provider stayed down, or refused the request).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from hermes.agent.prompt_cache import cache_tokens, mark_cache, wants_marks
from hermes.agent.provider_errors import connection_failure, is_retryable
from hermes.agent.provider_errors import reason as error_reason
from hermes.clock import to_ts
from hermes.config import ModelConfig, Settings, read_env_file
from hermes.errors import HermesError
from hermes.safe_text import scrub, scrub_value
from hermes.store import usage

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]

# Seconds before the first retry; doubles on each further retry, up to the cap.
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0

EXAMPLE_MODEL = "openai/gpt-4.1-mini"
# Local servers litellm finds by a variable, or at a default address when it is unset (litellm
# main.py's _complete_ollama and _complete_ollama_chat, llms/ollama/common_utils.get_api_base):
# its validate_environment reports the variable missing all the same, so it is not a missing key.
LOCAL_SERVERS = {"ollama": ("OLLAMA_API_BASE", "http://localhost:11434"),
                 "ollama_chat": ("OLLAMA_API_BASE", "http://localhost:11434")}
# Token counts remembered per LLM (one entry per distinct message); cleared when full.
TOKEN_CACHE_SIZE = 4096
# A prompt holding more characters than this that are not counted yet is counted on a worker
# thread (litellm's counter, tiktoken: 30-90 ms for a 64,000-character message on a loaded
# machine, which other users' turns would wait for on the loop); a shorter one on the loop.
COUNT_INLINE_CHARS = 4_000


class ModelNotConfigured(HermesError):
    """No model is set, or the provider's key is missing. The message says exactly what to set."""

    exit_code = 2


class ModelUnavailable(HermesError):
    """A model call failed for good (the provider stayed down, or refused the request).

    ``retryable`` tells background work whether trying again later can help.
    """

    def __init__(self, message: str, *, retryable: bool = True, attempts: int = 1) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts


class ContextTooLong(ModelUnavailable):
    """The prompt does not fit the model's context window."""

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        super().__init__(message, retryable=False, attempts=attempts)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced

    def args(self) -> dict[str, Any]:
        """The arguments as a dict. Raises ValueError with a reason the model can act on."""
        text = (self.arguments or "").strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"arguments are not valid JSON ({exc.msg} at char {exc.pos})") from None
        except RecursionError:  # `[` x 50,000: refused, the turn goes on
            raise ValueError("arguments are nested too deeply to read") from None
        if not isinstance(value, dict):
            raise ValueError("arguments must be a JSON object")
        return scrub_value(value)

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-format entry of an assistant message's ``tool_calls``."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments or "{}"},
        }


@dataclass
class Completion:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    cost: float | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None       # of prompt_tokens, read from the prompt cache
    cache_write_tokens: int | None = None  # of prompt_tokens, written to it (Anthropic)
    model: str = ""
    attempts: int = 1

    def assistant_message(self) -> dict[str, Any]:
        """This reply as the assistant message to send back with the tool results."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


@dataclass
class Chunk:
    """One step of a streamed reply: a text delta, or (last) the assembled completion."""

    text: str = ""
    final: Completion | None = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.final.tool_calls if self.final else []


# -- loading litellm ------------------------------------------------------------------------

_litellm: ModuleType | None = None


def load_litellm() -> ModuleType:
    """Import litellm once, with its network fetches switched off first."""
    global _litellm
    if _litellm is not None:
        return _litellm
    # Use the bundled price/context map instead of downloading it at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Skip every catalog, check and tokenizer litellm would fetch on its own.
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    # In its default DEV mode litellm runs dotenv.load_dotenv() on the current directory at
    # import; Hermes reads keys from the home's .env itself (load_env_file).
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    # litellm's pydantic models warn (at import and at first use) about ReadOnly TypedDict
    # items: noise for our users, and nothing they can act on.
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier", category=UserWarning)
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List: https://..." banners on stderr
    litellm.disable_hf_tokenizer_download = True  # token counts fall back to tiktoken, offline
    litellm.drop_params = True  # a provider that lacks a parameter ignores it, not errors
    if hasattr(litellm, "telemetry"):
        litellm.telemetry = False
    _litellm = litellm
    return litellm


def litellm_loaded() -> bool:
    return _litellm is not None


_preload: threading.Thread | None = None
_preload_lock = threading.Lock()


def preload_litellm() -> None:
    """Import litellm in a background thread now (once): for the daemon once it is up, so its
    first reply does not pay for the import and nothing waits for it to start.
    :meth:`LLM.ready` waits for it without blocking the event loop. With litellm already
    imported it does nothing. (A cold `hermes ask` imports it where it needs it: a thread
    beside its own work gained nothing, both being Python under one lock; scripts/bench_cli.py.)
    """
    global _preload
    with _preload_lock:
        if _litellm is not None or _preload is not None:
            return
        # Not a daemon thread: a process that ends meanwhile (an early error) waits for it,
        # rather than tearing the interpreter down under an import.
        _preload = threading.Thread(target=_import, name="hermes-litellm-import")
        _preload.start()


def _import() -> None:
    try:
        load_litellm()
    except Exception:  # noqa: BLE001 - the import is retried, and fails loudly, where it is used
        log.debug("litellm's background import failed", exc_info=True)


def load_env_file(path: Path) -> list[str]:
    """Put keys from a ``.env`` file into the environment; variables already set win.

    Returns the names that were set. A missing file is not an error.
    """
    applied = []
    for key, value in read_env_file(path).items():
        if value is not None and key not in os.environ:
            os.environ[key] = value
            applied.append(key)
    return applied


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _retryable(exc: BaseException) -> bool:
    return is_retryable(exc, load_litellm())


def _token_key(messages: list[dict[str, Any]], tools: Sequence[dict] | None) -> str:
    """What a token count is remembered by: the messages and tools as JSON."""
    return json.dumps([messages, tools], sort_keys=True, default=str)


# -- the client -------------------------------------------------------------------------------


def default_sleep(seconds: float) -> Awaitable[Any]:
    return asyncio.sleep(seconds)


class LLM:
    """One configured model. Async; safe to share between turns on one event loop."""

    def __init__(
        self,
        model: ModelConfig,
        *,
        model_name: str | None = None,
        sleep: Sleep | None = None,
        env_file: Path | None = None,
    ) -> None:
        self.config = model
        self.name = model_name or model.name
        self._sleep = sleep
        self._env_file = env_file
        self._ready = False
        self._context_window: int | None = None
        self._token_cache: dict[str, int] = {}   # one message (or the tools) -> its tokens
        # Told of every completion, with who it was for (hermes.store.usage).
        self.recorders: list[Callable[[Completion, usage.Scope], None]] = []
        self._recording_to: set[int] = set()

    @classmethod
    def from_settings(cls, settings: Settings, *, background: bool = False,
                      sleep: Sleep | None = None) -> LLM:
        """The main model, or (``background=True``) the one for extraction and summaries."""
        name = settings.model.name
        if background:
            name = settings.model.background or name
        return cls(settings.model, model_name=name, sleep=sleep,
                   env_file=settings.home_path / ".env")

    @property
    def configured(self) -> bool:
        return bool(self.name)

    async def ready(self) -> None:
        """Have litellm imported (behind a :func:`preload_litellm` under way, or importing it
        now) and the model's context window looked up (its first lookup imports more of
        litellm), waiting in a worker thread so that the event loop keeps serving meanwhile."""
        preload = _preload
        if preload is not None and preload.is_alive():
            await asyncio.to_thread(preload.join)
        if _litellm is None:
            await asyncio.to_thread(load_litellm)
        if self._context_window is None and self.name:
            await asyncio.to_thread(self.context_window)

    # -- set-up -----------------------------------------------------------------------------

    def not_configured_message(self) -> str:
        return f"No model is configured. {self.how_to_configure()}"

    def how_to_configure(self) -> str:
        where = f" or in {self._env_file}" if self._env_file else ""
        return (
            f"Set model.name in config.yaml (for example `model: {{name: {EXAMPLE_MODEL}}}`) "
            f"or export HERMES_MODEL__NAME={EXAMPLE_MODEL}, and the provider's key (for example "
            f"OPENAI_API_KEY) in the environment{where}."
        )

    def _prepare(self) -> Any:
        if not self.name:
            raise ModelNotConfigured(self.not_configured_message())
        litellm = load_litellm()
        if self._ready:
            return litellm
        if self._env_file is not None:
            load_env_file(self._env_file)
        if not self.config.api_base:
            missing = self._missing_keys(litellm)
            if missing:
                where = f" or in {self._env_file}" if self._env_file else ""
                raise ModelNotConfigured(
                    f"The model {self.name} needs "
                    + (missing[0] if len(missing) == 1 else
                       f"its key (litellm looks for {', '.join(missing)})")
                    + f": set it in the environment{where}."
                )
        self._ready = True
        return litellm

    def missing_keys(self) -> list[str]:
        """The environment variables the provider needs (litellm's ``validate_environment``)
        that neither the environment nor the home's .env sets, without calling the model or
        changing the environment; none with ``model.api_base`` (a server of one's own)."""
        if not self.name or self.config.api_base:
            return []
        litellm = load_litellm()
        in_file = read_env_file(self._env_file) if self._env_file is not None else {}
        # litellm reads os.environ, and a provider may take one of several keys (Gemini:
        # GOOGLE_API_KEY or GEMINI_API_KEY) or need two (AWS): ask it with the .env's keys
        # added for the call (variables already set win, as in load_env_file), then as before.
        extra = {k: v for k, v in in_file.items() if v is not None and k not in os.environ}
        os.environ.update(extra)
        try:
            return self._missing_keys(litellm)
        finally:
            for key in extra:
                os.environ.pop(key, None)

    def _missing_keys(self, litellm: Any) -> list[str]:
        try:
            report = litellm.validate_environment(model=self.name)
        except Exception as exc:  # noqa: BLE001 - an unknown provider is checked by the call itself
            log.debug("validate_environment(%s) failed: %s", self.name, exc)
            return []
        if report.get("keys_in_environment"):
            return []
        defaulted = {variable for variable, _ in LOCAL_SERVERS.values()}
        return [str(key) for key in report.get("missing_keys") or [] if key not in defaulted]

    def server(self) -> tuple[str, str] | None:
        """Where requests go when it is a server of one's own, and what says so: ``(address,
        "model.api_base" | "OLLAMA_API_BASE" | "litellm's default, without model.api_base or
        OLLAMA_API_BASE")``; None for a provider's own service (OpenAI, Anthropic, ...)."""
        if self.config.api_base:
            return self.config.api_base, "model.api_base"
        local = LOCAL_SERVERS.get((self.name or "").partition("/")[0])
        if local is None:
            return None
        variable, default = local
        in_file = read_env_file(self._env_file) if self._env_file is not None else {}
        value = os.environ.get(variable) or in_file.get(variable)
        if value:
            return value, variable
        return default, f"litellm's default, without model.api_base or {variable}"

    def _params(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict] | None, *,
                cache_ttl: str | None = "5m", **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.name,
            "messages": (mark_cache(messages, cache_ttl) if cache_ttl and self.cache_markers()
                         else list(messages)),
            "temperature": self.config.temperature,
            "timeout": self.config.timeout,
            # Retries are ours (with our backoff and sleep), not litellm's.
            "num_retries": 0,
        }
        if self.config.api_base:
            params["api_base"] = self.config.api_base
        if tools:
            params["tools"] = list(tools)
        params.update({k: v for k, v in extra.items() if v is not None})
        return params

    def cache_markers(self) -> bool:
        """Whether requests carry ``cache_control`` marks: Claude through Anthropic, Bedrock or
        Vertex (and OpenRouter), unless ``model.prompt_cache: off``. OpenAI-style providers cache
        a repeated prefix on their own and need none."""
        if self.config.prompt_cache == "off" or not self.name:
            return False
        return wants_marks(self.name)

    def _backoff(self, attempt: int) -> float:
        return min(BACKOFF_BASE * (2 ** attempt), BACKOFF_CAP)

    async def _wait(self, seconds: float) -> None:
        # Looked up at call time so a test can replace the module's default_sleep.
        sleep = self._sleep or globals()["default_sleep"]
        await sleep(seconds)

    def _failure(self, exc: BaseException, attempts: int) -> ModelUnavailable:
        litellm = load_litellm()
        reason = error_reason(exc)
        if isinstance(exc, litellm.ContextWindowExceededError):
            return ContextTooLong(f"The conversation is too long for {self.name} ({reason}).",
                                  attempts=attempts)
        if isinstance(exc, litellm.AuthenticationError):
            return ModelUnavailable(
                f"The provider rejected the key for {self.name} ({reason}); check the API key "
                "in the environment or the home's .env.", retryable=False, attempts=attempts)
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        unreachable = connection_failure(exc)
        if unreachable:
            server = self.server()
            where = f" at {server[0]} ({server[1]})" if server else ""
            check = ("is the server running, and is its address right?" if server
                     else "check the network connection.")
            return ModelUnavailable(f"Cannot reach the model {self.name}{where} {tries}: "
                                    f"{unreachable}; {check}", retryable=True, attempts=attempts)
        if _retryable(exc):
            return ModelUnavailable(f"The model {self.name} is unavailable {tries} ({reason}).",
                                    retryable=True, attempts=attempts)
        return ModelUnavailable(f"The model {self.name} refused the request ({reason}).",
                                retryable=False, attempts=attempts)

    # -- calls ------------------------------------------------------------------------------

    async def complete(self, messages: Sequence[dict[str, Any]],
                       tools: Sequence[dict] | None = None, *, response_format: dict | None = None,
                       max_tokens: int | None = None, scope: usage.Scope | None = None,
                       cache: bool = True, retries: int | None = None) -> Completion:
        """One reply, not streamed. Retries transient failures; raises ModelUnavailable.

        ``cache=False`` for a request that is sent once (a compression's summary): a cache
        mark there only costs (Anthropic charges a cache write 1.25x). ``retries``: at most
        this many retries instead of ``model.retries`` (0 for a call the reply waits for and
        can do without: a recall rewrite)."""
        if self.name:
            await self.ready()
        litellm = self._prepare()
        params = self._params(messages, tools, response_format=response_format,
                              max_tokens=max_tokens, cache_ttl="5m" if cache else None)
        attempt = 0
        while True:
            try:
                response = await litellm.acompletion(**params)
                return self._report(self._completion(litellm, response, attempt + 1), scope)
            except ModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below, never swallowed
                limit = self.config.retries if retries is None else retries
                if not _retryable(exc) or attempt >= limit:
                    raise self._failure(exc, attempt + 1) from exc
                delay = self._backoff(attempt)
                log.info("model %s: %s; retrying in %.1fs", self.name, error_reason(exc), delay)
                attempt += 1
                await self._wait(delay)

    async def stream(self, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict] | None = None, *,
                     scope: usage.Scope | None = None,
                     cache_ttl: str = "5m") -> AsyncIterator[Chunk]:
        """Text deltas as they arrive, then one final Chunk holding the whole Completion.

        A failure before the first text is retried like :meth:`complete`. Once text has reached
        the caller a retry would repeat it, so a failure then raises ModelUnavailable.
        ``cache_ttl``: how long the cache entries the request writes live (``5m``, ``1h``;
        only for a model that takes cache marks).
        """
        if self.name:
            await self.ready()
        litellm = self._prepare()
        # Usage (with cached tokens) in the stream's last chunk: OpenAI sends it only if asked.
        params = self._params(messages, tools, stream=True, cache_ttl=cache_ttl,
                              stream_options={"include_usage": True})
        attempt = 0
        while True:
            emitted = False
            chunks: list[Any] = []
            try:
                response = await litellm.acompletion(**params)
                async for raw in response:
                    chunks.append(raw)
                    choices = getattr(raw, "choices", None) or []
                    delta = getattr(choices[0], "delta", None) if choices else None
                    text = getattr(delta, "content", None) if delta is not None else None
                    if text:
                        emitted = True
                        yield Chunk(text=scrub(text))
                built = litellm.stream_chunk_builder(chunks, messages=list(messages))
                yield Chunk(final=self._report(self._completion(litellm, built, attempt + 1),
                                               scope))
                return
            except ModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below, never swallowed
                if emitted or not _retryable(exc) or attempt >= self.config.retries:
                    failure = self._failure(exc, attempt + 1)
                    if emitted:
                        failure = ModelUnavailable(
                            f"The reply from {self.name} was cut off ({error_reason(exc)}).",
                            retryable=True, attempts=attempt + 1)
                    raise failure from exc
                delay = self._backoff(attempt)
                log.info("model %s: %s; retrying in %.1fs", self.name, error_reason(exc), delay)
                attempt += 1
                await self._wait(delay)

    # -- helpers ----------------------------------------------------------------------------

    def _completion(self, litellm: Any, response: Any, attempts: int) -> Completion:
        if response is None:  # stream_chunk_builder returns None for an empty stream
            return Completion(text="", model=self.name or "", attempts=attempts)
        choice = response.choices[0] if response.choices else None
        message = getattr(choice, "message", None)
        text = (getattr(message, "content", None) or "") if message is not None else ""
        # Half an emoji (a lone surrogate) would make the reply unstorable: U+FFFD instead.
        text = scrub(text)
        calls = []
        for index, call in enumerate(getattr(message, "tool_calls", None) or []):
            function = call.function
            calls.append(ToolCall(id=call.id or f"call_{index}", name=scrub(function.name or ""),
                                  arguments=scrub(function.arguments or "{}")))
        usage = getattr(response, "usage", None)
        cached, written = cache_tokens(usage)
        completion = Completion(
            text=text,
            tool_calls=calls,
            cost=self._cost(litellm, response),
            finish_reason=getattr(choice, "finish_reason", None),
            prompt_tokens=_int(getattr(usage, "prompt_tokens", None)),
            completion_tokens=_int(getattr(usage, "completion_tokens", None)),
            cached_tokens=cached,
            cache_write_tokens=written,
            model=self.name or "",
            attempts=attempts,
        )
        return completion

    def record_usage(self, db: Any, clock: Any) -> None:
        """Count every completion of this model in ``db``'s model_calls, for the user and
        source given to the call (``scope=``) or set around it (:func:`usage.scope`)."""
        if id(db) in self._recording_to:
            return
        self._recording_to.add(id(db))

        def record(completion: Completion, where: usage.Scope) -> None:
            usage.record(db, self.usage_call(completion), to_ts(clock.now()), where)
        self.recorders.append(record)

    @staticmethod
    def usage_call(completion: Completion) -> usage.Call:
        return usage.Call(model=completion.model, prompt_tokens=completion.prompt_tokens,
                          cached_tokens=completion.cached_tokens,
                          cache_write_tokens=completion.cache_write_tokens,
                          completion_tokens=completion.completion_tokens, cost=completion.cost)

    def _report(self, completion: Completion, where: usage.Scope | None) -> Completion:
        where = where or usage.current()
        if where.collect is not None:
            where.collect.append(self.usage_call(completion))
            return completion
        for recorder in self.recorders:
            try:
                recorder(completion, where)
            except Exception:  # counting must never cost the user their reply
                log.exception("recording the usage of %s failed", self.name)
        return completion

    def _cost(self, litellm: Any, response: Any) -> float | None:
        hidden = getattr(response, "_hidden_params", None) or {}
        if isinstance(hidden.get("response_cost"), int | float):
            return float(hidden["response_cost"])
        try:
            return float(litellm.completion_cost(completion_response=response, model=self.name))
        except Exception as exc:  # noqa: BLE001 - local and unknown models have no price: None
            log.debug("no cost for %s: %s", self.name, exc)
            return None

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What a call of this size costs by litellm's price map, in dollars (None when the
        model has no price there: a local model, or one litellm does not know)."""
        if not self.name:
            return None
        litellm = load_litellm()
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=self.name, prompt_tokens=int(prompt_tokens),
                completion_tokens=int(completion_tokens))
        except Exception as exc:  # noqa: BLE001 - unknown to litellm: no estimate
            log.debug("no price for %s: %s", self.name, exc)
            return None
        return float(prompt_cost) + float(completion_cost)

    # -- context window ---------------------------------------------------------------------

    def context_window(self) -> int:
        """Input tokens the model accepts (litellm's model map, else the configured fallback)."""
        if not self.name:
            return self.config.context_window_fallback
        if self._context_window is not None:   # the model map does not change: look up once
            return self._context_window
        litellm = load_litellm()
        try:
            info = litellm.get_model_info(self.name)
        except Exception as exc:  # noqa: BLE001 - unknown to litellm: use the configured value
            log.debug("no model info for %s: %s", self.name, exc)
            info = {}
        window = info.get("max_input_tokens") or info.get("max_tokens")
        self._context_window = int(window) if window else self.config.context_window_fallback
        return self._context_window

    def count_tokens(self, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict] | None = None) -> int:
        """Tokens of a prompt, by litellm's counter (tiktoken for models it cannot map)."""
        litellm = load_litellm()
        try:
            # litellm's count is additive over messages (each adds its own tokens to a fixed
            # base), so each message is counted once and remembered: a conversation that grows
            # by one turn costs one message's count, not the whole history's, on the event loop.
            base = self._tokens(litellm, [])
            total = base + sum(self._tokens(litellm, [m]) - base for m in messages)
            if tools and messages:
                # Tools are not additive on their own: their share next to the first message.
                first = [messages[0]]
                total += self._tokens(litellm, first, tools) - self._tokens(litellm, first)
            elif tools:
                total = self._tokens(litellm, [], tools)
            return int(total)
        except Exception as exc:  # noqa: BLE001 - a rough estimate beats no compression
            log.debug("token_counter failed for %s: %s", self.name, exc)
            chars = sum(len(str(m.get("content") or "")) for m in messages)
            return chars // 4 + 4 * len(messages)

    async def count_tokens_off_loop(self, messages: Sequence[dict[str, Any]],
                                    tools: Sequence[dict] | None = None) -> int:
        """:meth:`count_tokens`, on a worker thread when the prompt holds more than
        :data:`COUNT_INLINE_CHARS` characters not counted yet (a long message), or when this
        model has counted nothing yet (the first count loads the tokenizer's tables, ~1 s):
        other turns go on meanwhile. The counts are remembered all the same, so the next
        request counts only its new messages, on the loop."""
        if not self._token_cache or self._uncounted_chars(messages) > COUNT_INLINE_CHARS:
            return await asyncio.to_thread(self.count_tokens, messages, tools)
        return self.count_tokens(messages, tools)

    def _uncounted_chars(self, messages: Sequence[dict[str, Any]]) -> int:
        return sum(len(str(m.get("content") or "")) for m in messages
                   if _token_key([m], None) not in self._token_cache)

    def _tokens(self, litellm: Any, messages: list[dict[str, Any]],
                tools: Sequence[dict] | None = None) -> int:
        key = _token_key(messages, tools)
        count = self._token_cache.get(key)
        if count is None:
            count = int(litellm.token_counter(model=self.name or "", messages=messages,
                                              tools=list(tools) if tools else None))
            if len(self._token_cache) >= TOKEN_CACHE_SIZE:
                self._token_cache.clear()
            self._token_cache[key] = count
        return count
