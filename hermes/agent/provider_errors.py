"""What a provider's error means: worth a retry, never reached, and the one line to show.

litellm wraps provider errors in its own classes and often names a refused connection an
InternalServerError; these helpers look through the causes so a person is told what failed.
"""

from __future__ import annotations

import asyncio
import re
import socket
from types import ModuleType

# HTTP statuses worth another try: timeout, conflict, rate limit, server errors, overloaded.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def status_of(exc: BaseException) -> int | None:
    for candidate in (exc, getattr(exc, "original_exception", None)):
        status = getattr(candidate, "status_code", None)
        if isinstance(status, int):
            return status
        if isinstance(status, str) and status.isdigit():
            return int(status)
    return None


def is_retryable(exc: BaseException, litellm: ModuleType) -> bool:
    """Worth another try: rate limits, server errors, timeouts, lost connections (never a
    context-window or authentication error)."""
    if isinstance(exc, litellm.ContextWindowExceededError | litellm.AuthenticationError):
        return False
    if isinstance(exc, asyncio.TimeoutError | ConnectionError | OSError):
        return True
    if isinstance(
        exc,
        litellm.RateLimitError
        | litellm.ServiceUnavailableError
        | litellm.InternalServerError
        | litellm.APIConnectionError
        | litellm.Timeout,
    ):
        return True
    status = status_of(exc)
    return status in RETRYABLE_STATUS


# Client errors that mean the provider was never reached (litellm reports them as an
# InternalServerError or APIConnectionError, naming neither).
_CONNECT_ERRORS = ("ConnectError", "ClientConnectorError", "ConnectionError")


def connection_failure(exc: BaseException) -> str | None:
    """"connection refused", "host not found" or "could not connect" when the provider could
    not be reached at all, found in the exception's causes; None for any other error."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    connect = False
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror):
            return "host not found"
        connect = connect or type(current).__name__ in _CONNECT_ERRORS
        stack += [current.__cause__, current.__context__,
                  getattr(current, "original_exception", None)]
    return "could not connect" if connect else None


def reason(exc: BaseException) -> str:
    """The first meaningful line of a provider error, without litellm's class-name prefixes
    (a provider that could not be reached is named as such)."""
    unreachable = connection_failure(exc)
    if unreachable:
        return unreachable
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    text = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    text = re.sub(r"(?:litellm\.\w+(?:Error|Timeout)?:\s*)+", "", text)
    text = re.sub(r"\s*Original exception:.*$", "", text)
    text = text.strip() or type(exc).__name__
    kind = type(exc).__name__
    if kind == "MidStreamFallbackError":
        original = getattr(exc, "original_exception", None)
        kind = type(original).__name__ if original is not None else kind
    # litellm repeats the class name inside its message ("InternalServerError: InternalServer
    # Error: ..."): say it once.
    text = re.sub(rf"^(?:{re.escape(kind)}:\s*)+", "", text).strip() or kind
    return f"{kind}: {text[:160]}"
