"""The web panel served for a real browser, in this process: uvicorn on a thread of its own
(its own event loop), with the agent, the extraction worker and the cron runner wired as
`hermes run` wires them, and a model whose reply is chosen by what it is asked.

A test that shares one panel must not depend on the order of the others, so the model is not a
queue here: ``panel.model.chat["Where do I work?"] = "At Initech."`` answers a chat message
containing that text, ``panel.model.learn["Initech"] = [...]`` is what extraction learns from a
conversation containing that text (nothing otherwise). ``Stall(text)`` sends ``text`` and then
waits until the turn is stopped.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes.clock import FakeClock
from tests.fakellm import TITLE_MARK, FakeRequest, Reply, ScriptedLLM, _chunk, _pieces

EXTRACTION_MARK = "You maintain the long-term memory"


@dataclass
class Stall:
    """A reply that streams ``text`` and then never finishes (until the turn is stopped)."""

    text: str


class RoutedLLM(ScriptedLLM):
    """Replies looked up by the request: chat by the newest user message, extraction by the
    conversation it reads. Unknown chat: "OK."; unknown extraction: nothing learned."""

    def __init__(self) -> None:
        super().__init__()
        self.chat: dict[str, str | Stall | Callable[[FakeRequest], str]] = {}
        self.learn: dict[str, list[dict[str, Any]]] = {}

    def route(self, request: FakeRequest) -> Reply | Stall:
        if TITLE_MARK in request.system:  # a new chat's title: `title` ("" by default: none)
            title = self.title(request) if callable(self.title) else self.title
            return Reply(text=str(title))
        if EXTRACTION_MARK in request.system:
            for key, actions in self.learn.items():
                if key in request.prompt:
                    return Reply(text=json.dumps([{"type": "semantic", "category": "general",
                                                   "entities": [], "tags": [], **a}
                                                  for a in actions]))
            return Reply(text="[]")
        for key, answer in self.chat.items():
            if key in request.tail:
                if callable(answer):
                    answer = answer(request)
                return answer if isinstance(answer, Stall) else Reply(text=answer, chunk_size=6)
        return Reply(text="OK.")

    async def acompletion(self, *args: Any, **kw: Any) -> Any:
        request = self._record(kw, stream=False)
        step = self.route(request)
        return self._response(step if isinstance(step, Reply) else Reply(text=step.text),
                              request)

    def astreaming(self, *args: Any, **kw: Any) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        return self._routed(self._record(kw, stream=True))

    async def _routed(self, request: FakeRequest) -> AsyncIterator[dict[str, Any]]:
        step = self.route(request)
        if isinstance(step, Stall):
            for piece in _pieces(step.text, 4):
                yield _chunk(text=piece)
            await asyncio.Event().wait()            # until the turn is cancelled
        else:
            for chunk in self._chunks(step, request):
                yield chunk


class LivePanel:
    """``start()`` serves the panel on a free port; ``call(coro)`` runs on its loop;
    ``login_link(user)`` a fresh login link; ``stop()``."""

    def __init__(self, root: Path, *, config: str = "") -> None:
        from hermes.config import load_settings

        self.root = root
        (root / "config.yaml").write_text(
            "sessions:\n  embeddings: false\nextraction:\n  enabled: true\n" + config,
            encoding="utf-8")
        self.settings = load_settings(root / "config.yaml", home=root / "home",
                                      environ={"HERMES_MODEL__NAME": "fake/scripted"})
        self.clock = FakeClock("2026-11-29T12:00:00+00:00")
        self.model = RoutedLLM()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="live-panel",
                                        daemon=True)
        self.frontend: Any = None
        self.rt: Any = None
        self.worker: Any = None

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def start(self) -> LivePanel:
        self._thread.start()
        self.call(self._start())
        return self

    async def _start(self) -> None:
        from hermes.assembly import build_agent, cron_runner
        from hermes.runtime import Runtime

        self.rt = Runtime(self.settings, clock=self.clock)
        self.agent, self.worker = build_agent(self.rt)
        self.runner = cron_runner(self.rt.memory, self.agent)
        await self._serve()

    async def _serve(self) -> None:
        from hermes.frontends.web.server import WebFrontend

        self.frontend = WebFrontend(self.rt.memory, self.agent, worker=self.worker,
                                    runner=self.runner, port=0)
        assert await self.frontend.start()

    def restart(self) -> None:
        """The panel stops and starts again (a new port: a browser's cookies ignore ports)."""
        async def again() -> None:
            await self.frontend.stop()
            await self._serve()

        self.call(again())

    @property
    def url(self) -> str:
        return self.frontend.url

    def login_link(self, user: str = "owner") -> str:
        return self.frontend.login_url(self.frontend.ctx.tokens.create(user))

    def learned(self, timeout: float = 10) -> None:
        """Wait until extraction has nothing left to do."""
        if self.worker is not None:
            self.call(self.worker.drain(timeout))

    def stop(self) -> None:
        async def stop() -> None:
            await self.frontend.stop()
            if self.worker is not None:
                await self.worker.drain(5)
            self.rt.close()

        async def cancel_the_rest() -> None:
            # (litellm's logging worker, the event streams): ended here, not destroyed pending
            # when the interpreter exits
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            self.call(stop())
            self.call(cancel_the_rest())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
