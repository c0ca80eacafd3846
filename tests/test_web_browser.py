"""The web panel in a real browser: Debian's chromium driven by Playwright, against one daemon
(`hermes run` through tests.daemon_harness, with a scripted model) shared by these tests.

Covered: logging in with the printed token and with the login form (another site's form and
link refused), sending a message with the keyboard and seeing the
reply stream in pieces, a learned fact appearing in the sidebar without a reload (and how long
that took after the commit), 👎 under the next reply dropping that fact's trust, basic memory
edited past its cap and refused inline, a page read without JavaScript, and a phone-width page
without sideways scrolling. A failing test leaves a screenshot in bench-results/ (tests/browser.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.browser import TIMEOUT_MS, browser_mark, launched, screenshot_on_failure
from tests.web_client import HermesProcess, hermes_env

pytestmark = browser_mark()

REPLIES = [
    "Congratulations on the new job at Initech!",                     # turn 1
    json.dumps([{"action": "create", "content": "The user works at Initech as an engineer.",
                 "type": "semantic", "category": "general", "entities": ["Initech"],
                 "tags": []}]),                                         # its extraction
    "You work at Initech, as an engineer.",                           # turn 2 (uses the fact)
    "[]",                                                             # its extraction, if any
]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory) -> Iterator[tuple[HermesProcess, str]]:
    root = tmp_path_factory.mktemp("web-browser")
    (root / "config.yaml").write_text("", encoding="utf-8")
    proc = HermesProcess(["run", "--no-repl"], hermes_env(
        root / "home", root / "config.yaml", HERMES_EXTRACTION__ENABLED="true",
        HERMES_TEST_REPLIES=json.dumps(REPLIES)))
    try:
        link = proc.wait_for(r"Web panel: log in at (\S+)").group(1)
        proc.wait_for(r"hermes: running")
        yield proc, link
    finally:
        code = proc.stop()
        log = "\n".join(proc.seen)
        assert "Traceback" not in log, log
        assert code == 0, log


@pytest.fixture(scope="module")
def browser():
    with launched() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def logged_in(browser, daemon):
    """One browser context, logged in with the token the daemon printed."""
    _, link = daemon
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(link)
    assert page.url.endswith("/chat")
    yield context
    context.close()


def test_chat_streams_learns_live_and_a_thumbs_down_drops_trust(logged_in, daemon):
    page = logged_in.pages[0]
    with screenshot_on_failure(page, "chat"):
        page.goto(page.url.split("/chat")[0] + "/chat")
        page.evaluate("window.__sameDocument = true")
        page.get_by_label("Message").fill("I started at Initech this week as an engineer.")
        page.keyboard.press("Enter")                             # keyboard: Enter sends
        reply = page.locator("article.msg.assistant").last
        reply.get_by_text("Congratulations on the new job at Initech!").wait_for()
        chunks = int(page.locator("#messages").get_attribute("data-chunks"))
        assert chunks > 1                                        # it came in pieces
        fact = page.locator("#facts li.fresh", has_text="The user works at Initech")
        fact.wait_for()
        assert "learned from this reply" in fact.inner_text()
        assert page.evaluate("window.__sameDocument") is True    # no reload
        delay = page.evaluate("""() => { const li = document.querySelector('#facts li.fresh');
            return Number(li.dataset.shownAt) - Number(li.dataset.committedAt); }""")
        print(f"\nfact commit -> sidebar: {delay:.0f} ms")
        assert 0 <= delay < 5000
        assert fact.locator(".trust").inner_text() == "0.50"
        fact_id = fact.get_attribute("id")

        page.get_by_label("Message").fill("Where do I work?")
        page.get_by_role("button", name="Send").click()
        second = page.locator("article.msg.assistant", has_text="You work at Initech")
        second.locator(".shown").wait_for()
        second.get_by_role("button", name="These facts did not help").click()
        page.locator(f"#{fact_id} .trust", has_text="0.40").wait_for()
        assert second.get_by_role("button", name="These facts did not help") \
            .get_attribute("aria-pressed") == "true"
        assert page.evaluate("window.__sameDocument") is True


def test_basic_memory_past_the_cap_is_refused_inline(logged_in):
    page = logged_in.new_page()
    with screenshot_on_failure(page, "memory"):
        base = logged_in.pages[0].url.split("/chat")[0]
        page.goto(base + "/memory")
        page.get_by_label("Add an entry").fill("Runs Debian 13 on the home server")
        page.get_by_role("button", name="Add", exact=True).click()
        page.get_by_text("37 / 8,000 chars").wait_for()
        page.get_by_text("Edit the whole block").click()
        block = page.get_by_label("One entry a line")
        block.fill("Runs Debian 13 on the home server\n" + "word " * 1700)
        page.get_by_text("over the cap: saving will be refused").wait_for()   # the live gauge
        page.get_by_role("button", name="Save all").click()
        alert = page.get_by_role("alert")
        alert.wait_for()
        assert "over its 8,000-character cap" in alert.inner_text()
        assert "[1] Runs Debian 13 on the home server" in alert.inner_text()
        page.get_by_text("37 / 8,000 chars").wait_for()          # nothing was changed
        page.close()


def test_reading_works_without_javascript_and_at_phone_width(browser, daemon, logged_in):
    # Its own fact (words only: no model load), so it passes alone and in any order.
    daemon[0].cli("facts", "add", "The user keeps bees on the roof of the flat.",
                  HERMES_SESSIONS__EMBEDDINGS="false")
    cookies = logged_in.cookies()
    context = browser.new_context(java_script_enabled=False,
                                  viewport={"width": 390, "height": 844})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_cookies(cookies)
    page = context.new_page()
    with screenshot_on_failure(page, "nojs"):
        base = logged_in.pages[0].url.split("/chat")[0]
        for path in ("/chat", "/facts", "/memory", "/sessions"):
            page.goto(base + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (path, width)               # no sideways scrolling
        page.goto(base + "/facts")
        page.get_by_text("The user keeps bees on the roof of the flat.").wait_for()
        page.goto(base + "/chat")
        assert page.locator("#facts li").count() >= 1
    context.close()


def test_the_login_form_works_and_another_sites_form_or_link_is_refused(browser, daemon):
    _, link = daemon
    base, token = link.split("/login?token=")
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    with screenshot_on_failure(page, "login"):
        # Another site's page (here: one with no origin at all) posting the token, and linking
        # to the login link: the browser sends neither the login cookie nor a same-site origin.
        page.set_content(f"""<form method="post" action="{base}/login">
            <input name="token" value="{token}"><input name="csrf" value="guess">
            <button>go</button></form>""")
        page.get_by_role("button", name="go").click()
        page.get_by_text("CSRF token is missing or wrong").wait_for()
        page.goto("about:blank")
        page.set_content(f'<a href="{link}">link</a>')
        page.get_by_role("link", name="link").click()
        page.get_by_text("opened from another site").wait_for()
        assert not [c for c in context.cookies() if c["name"] == "hermes_session"]
        # This site's own form, the token pasted: logged in.
        page.goto(base + "/login")
        page.get_by_label("Login token").fill(token)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/chat")
    context.close()
