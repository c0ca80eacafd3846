"""How long a learned fact takes from its commit to the Learned Facts sidebar, in a real
browser, and how much the chat page weighs.

    python scripts/bench_web.py [--facts 30]

Each fact is added to the store (the commit), then handed to the same listener extraction's
commits go to (ExtractionWorker.on_commit); the page stamps Date.now() when it inserts the item,
the listener time.time() right after the commit: one machine, one clock. Debian's chromium
through Playwright (apt-get install chromium; pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from screenshot_web import CHROMIUM_ARGS, seed  # noqa: E402


async def main(n: int) -> None:
    import httpx
    from playwright.async_api import async_playwright

    from hermes.clock import SystemClock
    from hermes.config import load_settings
    from hermes.frontends.web.routes_chat import extraction_listener
    from hermes.frontends.web.server import WebFrontend
    from hermes.learn.consolidate import Consolidation, FactChange
    from hermes.runtime import Runtime

    rt = Runtime(load_settings(home=Path(tempfile.mkdtemp(prefix="hermes-bench-web-")),
                               environ={}), clock=SystemClock())
    session_id, reply_id = seed(rt)
    frontend = WebFrontend(rt.memory, None, port=0)
    await frontend.start()
    link = frontend.login_url(frontend.ctx.tokens.create("owner"))
    chat = f"{frontend.url}/chat?session={session_id}"
    async with httpx.AsyncClient() as client:
        await client.get(link)
        sizes = [len((await client.get(url)).content) for url in
                 (chat, f"{frontend.url}/static/app.css", f"{frontend.url}/static/app.js")]
    listener = extraction_listener(frontend.ctx)
    facts = rt.memory.facts
    delays = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path="/usr/bin/chromium",
                                          args=CHROMIUM_ARGS)
        page = await browser.new_page()
        await page.goto(link)
        await page.goto(chat)
        await page.wait_for_function("() => window.EventSource !== undefined")
        while not frontend.ctx.hub.subscribers("owner"):
            await asyncio.sleep(0.01)
        for i in range(n):
            fact = facts.add("owner", f"Benchmark fact number {i} about Project Zephyr{i}").id
            listener(SimpleNamespace(user="owner", session_id=session_id,
                                     last_message_id=reply_id,
                                     changes=Consolidation(changes=[FactChange("created",
                                                                              fact)])))
            item = page.locator(f"#fact-{fact}")
            await item.wait_for()
            shown, committed = await item.evaluate(
                "li => [Number(li.dataset.shownAt), Number(li.dataset.committedAt)]")
            delays.append(shown - committed)
        await browser.close()
    await frontend.stop()
    rt.close()
    delays.sort()
    print(f"chat page weight: {sum(sizes):,} bytes (HTML {sizes[0]:,}, CSS {sizes[1]:,}, "
          f"JS {sizes[2]:,}; uncompressed, no images or fonts)")
    print(f"fact commit -> sidebar over {n} facts: p50 {statistics.median(delays):.0f} ms, "
          f"p90 {delays[int(0.9 * (n - 1))]:.0f} ms, max {delays[-1]:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=30)
    asyncio.run(main(parser.parse_args().facts))
