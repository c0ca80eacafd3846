"""Time as a dependency: code that needs "now" takes a Clock, so tests never sleep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that only moves when told to. Used by tests and benchmarks."""

    def __init__(self, start: datetime | str = "2026-11-29T12:00:00+00:00") -> None:
        self._now = parse_ts(start) if isinstance(start, str) else start

    def now(self) -> datetime:
        return self._now

    def advance(self, **kwargs: float) -> datetime:
        self._now = self._now + timedelta(**kwargs)
        return self._now

    def set(self, when: datetime | str) -> None:
        self._now = parse_ts(when) if isinstance(when, str) else when


def to_ts(when: datetime) -> str:
    """Stored timestamp format: ISO 8601 in UTC with microseconds, so text order is time order."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(text: str) -> datetime:
    """Parse a stored or user-given ISO timestamp; naive values are taken as UTC."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
