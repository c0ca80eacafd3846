"""Small asyncio helpers shared by the daemon and the front-ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable, Iterable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)


async def finish_or_cancel(tasks: Iterable[asyncio.Future[Any]],
                           timeout: float | None) -> set[asyncio.Future[Any]]:
    """Wait up to ``timeout`` s for ``tasks``; cancel those still running and wait for them to
    unwind (their exceptions are swallowed: each task records its own failure).

    Returns the tasks that had to be cancelled (empty when all finished in time).
    """
    pending = {t for t in tasks if not t.done()}
    if not pending:
        return set()
    _, late = await asyncio.wait(pending, timeout=timeout)
    for task in late:
        task.cancel()
    if late:
        await asyncio.gather(*late, return_exceptions=True)
    return late


class KeyedLocks(Generic[K]):
    """One asyncio lock a key (a session), kept only while someone holds or waits for it.

    ``async with locks.hold(key):`` takes the key's lock; a free lock is taken without
    yielding to the loop, and waiters are served first come, first served, so work for one key
    runs in the order it asked."""

    def __init__(self) -> None:
        self._locks: dict[K, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
