"""Small asyncio helpers shared by the daemon and the front-ends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


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
