"""Take the screenshots of the web panel's chat page, on a desktop (docs/chat.png) and on a
phone (docs/chat-phone.png, 390x844), and measure the page's weight: the bytes of its HTML, CSS
and JavaScript.

    python scripts/screenshot_web.py [--out docs/chat.png]

A temporary home with a short conversation whose reply is Markdown (rendered), the receipt under
it unfolded (the fact it used, the fact learned from it), and that fact arriving live in the
sidebar (through the same listener extraction uses); the panel on a free port; Debian's chromium
through Playwright (apt-get install chromium; pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def seed(rt) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    from hermes.memory.basic import BasicMemory
    from hermes.store.db import write_transaction

    facts, sessions = rt.memory.facts, rt.memory.sessions
    BasicMemory(rt.db).add("owner", "Runs Debian 13 on the home server")
    old = facts.add("owner", "The user lives in Porto", entities=["Porto"]).id
    facts.add("owner", "The home server's backups go to the NAS in the hallway closet")
    editor = facts.add("owner", "The user's favourite editor is Helix", category="user_pref").id
    facts.update("owner", old, "The user lives in Lisbon", note="moved")
    older = sessions.create("owner", "web", channel_key="web:1", title="Backup plan for the NAS")
    sessions.append("owner", older.id, "user", "Where do the backups go?")
    session = sessions.create("owner", "web", channel_key="web:2")
    sessions.append("owner", session.id, "user", "Which editor do I like again? I'm setting up "
                    "the new laptop and starting at Acme Corp on Monday.")
    reply = sessions.append("owner", session.id, "assistant",
                            "**Helix**: it's your favourite editor. On the new laptop:\n\n"
                            "```sh\nsudo apt install hx\n```\n\n"
                            "and `hx --tutor` for a refresher. Good luck at *Acme Corp* on "
                            "Monday!")
    with write_transaction(rt.db):
        rt.db.execute("INSERT INTO shown_facts (message_id, fact_id) VALUES (?, ?)",
                      [reply.id, editor])
    return session.id, reply.id


async def main(out: Path) -> None:
    import httpx
    from playwright.async_api import async_playwright

    from hermes.clock import SystemClock
    from hermes.config import load_settings
    from hermes.frontends.web.routes_chat import extraction_listener
    from hermes.frontends.web.server import WebFrontend
    from hermes.learn.consolidate import Consolidation, FactChange
    from hermes.runtime import Runtime

    home = Path(tempfile.mkdtemp(prefix="hermes-shot-"))
    rt = Runtime(load_settings(home=home, environ={}), clock=SystemClock())
    session_id, reply_id = seed(rt)
    frontend = WebFrontend(rt.memory, None, port=0)
    await frontend.start()
    link = frontend.login_url(frontend.ctx.tokens.create("owner"))
    async with httpx.AsyncClient() as client:
        await client.get(link)
        html = (await client.get(f"{frontend.url}/chat?session={session_id}")).content
        css = (await client.get(f"{frontend.url}/static/app.css")).content
        js = (await client.get(f"{frontend.url}/static/app.js")).content
    print(f"chat page weight: {len(html) + len(css) + len(js):,} bytes "
          f"(HTML {len(html):,}, CSS {len(css):,}, JS {len(js):,}; uncompressed, no images)")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path="/usr/bin/chromium",
                                          args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 640})
        await page.goto(link)
        await page.goto(f"{frontend.url}/chat?session={session_id}")
        await page.wait_for_timeout(300)          # the event stream connects
        new = rt.memory.facts.add("owner", "The user starts at Acme Corp on Monday",
                                             entities=["Acme Corp"],
                                             source_session_id=session_id,
                                             source_message_ids=[reply_id - 1])
        changes = Consolidation(created=1, changes=[FactChange("created", new.id)])
        extraction_listener(frontend.ctx)(SimpleNamespace(
            user="owner", session_id=session_id, last_message_id=reply_id, changes=changes))
        await page.locator("#facts li.fresh").wait_for()
        await page.locator(".receipt summary").last.click()
        await page.locator(".receipt .learned-here li").last.wait_for()
        out.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(out))
        phone = await browser.new_page(viewport={"width": 390, "height": 844},
                                       device_scale_factor=1)
        await phone.goto(link)
        await phone.goto(f"{frontend.url}/chat?session={session_id}")
        await phone.locator(".receipt summary").last.click()
        await phone.locator(".receipt").last.scroll_into_view_if_needed()
        phone_out = out.with_name(out.stem + "-phone" + out.suffix)
        await phone.screenshot(path=str(phone_out))
        print(f"wrote {phone_out}")
        await browser.close()
    await frontend.stop()
    rt.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "chat.png")
    asyncio.run(main(parser.parse_args().out))
