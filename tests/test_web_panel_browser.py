"""The web panel in a real browser (Debian's chromium through Playwright), served in this
process (tests/live_panel.py) with a model that answers by the message, so that each test
stands alone: every test logs in as a user of its own.

Covered: every write answers with a redirect and a one-time notice, and neither a reload nor
the same form sent again repeats it (a fact's 👎, cron's "Run now"); a reply rendered as
Markdown while it streams, the model's markup never obeyed, and the Stop button; on a phone,
a conversation opening at its newest message and a reply never under the input; a new chat in
the list at its first message, and deleting it; a login that outlives a restart, a login link
that expires, and revoking logins on the Logins page.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from tests.browser import DESKTOP, PHONE, TIMEOUT_MS, browser_mark, launched, screenshot_on_failure
from tests.live_panel import LivePanel

pytestmark = browser_mark()

_users = itertools.count(1)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LivePanel]:
    from tests.fakellm import installed

    panel = LivePanel(tmp_path_factory.mktemp("live-panel"))
    with installed(panel.model):
        panel.start()
        try:
            yield panel
        finally:
            panel.stop()


@pytest.fixture(scope="module")
def browser():
    with launched() as chromium:
        yield chromium


class Visit:
    """A browser context logged in as a user of this test's own."""

    def __init__(self, browser, live: LivePanel, viewport: dict[str, int]) -> None:
        self.live = live
        self.user = f"user{next(_users)}"
        self.context = browser.new_context(viewport=viewport)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.page.goto(live.login_link(self.user))
        assert self.page.url.endswith("/chat"), self.page.url

    def go(self, path: str) -> None:
        self.page.goto(self.live.url + path)


@pytest.fixture
def visit(browser, live, request) -> Iterator[Visit]:
    v = Visit(browser, live, DESKTOP)
    with screenshot_on_failure(v.page, request.node.name):
        yield v
    v.context.close()


@pytest.fixture
def phone(browser, live, request) -> Iterator[Visit]:
    v = Visit(browser, live, PHONE)
    with screenshot_on_failure(v.page, request.node.name):
        yield v
    v.context.close()


def above_the_input(page, locator) -> bool:
    """The element's bottom is on screen and not under the chat's input."""
    box, form = locator.bounding_box(), page.locator("#send").bounding_box()
    return 0 < box["y"] + box["height"] <= form["y"] + 1


def where(page, locator) -> str:
    """Where the element and the input are, for a failed assertion's message."""
    box, form = locator.bounding_box(), page.locator("#send").bounding_box()
    state = page.evaluate("""() => { const end = document.getElementById("end");
        return {end: end.getBoundingClientRect().bottom, scrollY: window.scrollY,
                height: document.documentElement.scrollHeight,
                padding: document.documentElement.style.scrollPaddingBottom}; }""")
    return f"element {box}, input {form}, page {state}"


def settles_above_the_input(page, locator, seconds: float = 10) -> bool:
    """The page opens at #end, then scrolls again once it has measured its input (the
    padding that keeps the end above it): under load a test looked in between."""
    deadline = time.monotonic() + seconds
    while not above_the_input(page, locator):
        if time.monotonic() > deadline:
            return False
        page.wait_for_timeout(50)
    return True


def test_a_write_redirects_with_a_notice_once_and_is_never_repeated(visit, live):
    page, user = visit.page, visit.user
    facts = live.rt.memory.facts
    fact_id = facts.add(user, "The user's NAS is in the hallway closet").id
    visit.go(f"/facts/{fact_id}")
    rate = page.locator(f'form[action="/facts/{fact_id}/rate"]')
    once = rate.locator('input[name="once"]').input_value()
    rate.get_by_role("button", name="unhelpful").click()
    page.get_by_role("status").filter(has_text="Trust 0.50 -> 0.40").wait_for()
    assert page.url.endswith(f"/facts/{fact_id}")                 # a GET: safe to reload
    page.reload()
    page.wait_for_load_state()
    assert page.get_by_role("status").count() == 0                # the notice was once
    assert facts.get(user, fact_id).trust == pytest.approx(0.4)
    # The same form again (the back button's copy of the page, a double click)
    rate.locator('input[name="once"]').evaluate("(input, once) => input.value = once", once)
    rate.get_by_role("button", name="unhelpful").click()
    page.get_by_role("status").filter(has_text="already sent").wait_for()
    assert facts.get(user, fact_id).trust == pytest.approx(0.4)

    from hermes.assembly import cron_store

    live.model.chat["Summarise the NAS"] = "Digest: the NAS is fine."
    cron_store(live.rt.memory).add(f"{user}-digest", user, "every 1d", "Summarise the NAS",
                            f"file:{user}.md")
    visit.go("/cron")
    page.get_by_role("button", name="Run now").click()
    page.get_by_role("status").filter(has_text=f"Ran {user}-digest: ok").wait_for()
    page.reload()
    page.wait_for_load_state()
    assert len(cron_store(live.rt.memory).runs(user=user)) == 1


HOSTILE = ("**Raspberry Pi OS Lite (64-bit)** is the one.\n\n```sh\nsudo apt update\n```\n\n"
           "<script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> "
           "[click](javascript:window.__pwned=3) ![pixel](http://127.0.0.1:9/leak?secret) "
           "<a href=\"#\" onclick=\"window.__pwned = 4\">raw link</a>")


def test_a_reply_renders_as_markdown_while_it_streams_and_stop_keeps_it(visit, live):
    """Markdown is rendered on the server while the reply streams (the model's script and
    markup stay text); Stop ends it there and the page shows what was kept."""
    from tests.live_panel import Stall

    page = visit.page
    live.model.chat["Which OS for the Pi?"] = Stall(HOSTILE)
    page.get_by_label("Message").fill("Which OS for the Pi?")
    page.keyboard.press("Enter")
    reply = page.locator("article.msg.assistant.streaming")
    reply.locator("strong", has_text="Raspberry Pi OS Lite (64-bit)").wait_for()
    reply.locator("pre code", has_text="sudo apt update").wait_for()
    reply.get_by_text("raw link").wait_for()                      # all of it, as text
    page.get_by_role("button", name="Send").wait_for(state="hidden")
    page.get_by_role("button", name="Stop").click()
    page.locator("article.msg.assistant:not(.streaming)", has_text="[stopped]").wait_for()
    page.get_by_role("button", name="Send").wait_for()
    for shown in (page, ):
        messages = shown.locator("#messages")
        assert messages.locator("script, img, iframe, [onerror], [onclick]").count() == 0
        assert messages.locator('a[href^="javascript"]').count() == 0
        assert shown.evaluate("window.__pwned") is None
    (reply_message,) = [m for m in live.rt.memory.sessions.messages(
        visit.user, int(page.url.split("session=")[1])) if m.role == "assistant"]
    assert reply_message.content.endswith("[stopped]")
    page.reload()                                               # rendered by the page itself
    page.locator("article.msg.assistant strong", has_text="Raspberry Pi OS").wait_for()
    assert page.locator("#messages").locator("script, img, [onerror], [onclick]").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_on_a_phone_a_chat_opens_at_its_newest_message_and_no_reply_hides_under_the_input(
        phone, live):
    page, user = phone.page, phone.user
    sessions = live.rt.memory.sessions
    session = sessions.create(user, "web", channel_key=f"web:{user}")
    for i in range(12):
        sessions.append(user, session.id, "user", f"Question number {i}")
        sessions.append(user, session.id, "assistant", f"Answer number {i}\n\n" + "words " * 40)
    phone.go(f"/chat?session={session.id}")
    newest = page.locator("article.msg.assistant", has_text="Answer number 11")
    page.wait_for_function("() => window.scrollY > 0")
    # The reply's own text: the receipt under it (closed, its lines hidden) has a box too
    last_line = newest.locator(".text p").last
    assert settles_above_the_input(page, last_line), where(page, last_line)
    live.model.chat["Tell me a long story"] = "\n\n".join(f"Line {i} of the story."
                                                          for i in range(30))
    page.get_by_label("Message").fill("Tell me a long story")
    page.get_by_role("button", name="Send").click()
    reply = page.locator("article.msg.assistant:not(.streaming)", has_text="Line 29 of")
    reply.wait_for()
    page.get_by_role("button", name="Send").wait_for()
    line = reply.get_by_text("Line 29 of the story.")
    assert above_the_input(page, line), where(page, line)


def test_a_new_chat_joins_the_list_at_its_first_message_and_can_be_deleted(visit, live):
    page, user = visit.page, visit.user
    chats = page.get_by_role("complementary", name="Conversations")
    chats.get_by_text("No web conversations yet").wait_for()
    page.evaluate("window.__sameDocument = true")
    page.get_by_label("Message").fill("Plan the vegetable garden")
    page.keyboard.press("Enter")
    chats.get_by_role("link", name="Plan the vegetable garden").wait_for()
    assert chats.get_by_text("No web conversations yet").count() == 0
    assert page.evaluate("window.__sameDocument") is True             # no reload
    page.locator("article.msg.assistant:not(.streaming)").wait_for()
    (session,) = live.rt.memory.sessions.list_sessions(user, source="web")
    page.reload()
    page.get_by_text("Delete this conversation").click()
    page.get_by_label("Yes, delete it and all 2 of its lines").check()
    page.get_by_role("button", name="Delete", exact=True).click()
    page.get_by_role("status").filter(has_text="Deleted the conversation").wait_for()
    chats.get_by_text("No web conversations yet").wait_for()
    assert live.rt.memory.sessions.list_sessions(user, source="web") == []
    assert live.rt.memory.sessions.search(user, "vegetable garden") == []


def test_a_new_chat_is_titled_in_the_list_from_its_first_exchange(visit, live):
    """The list shows the first message at once, then the background model's title, with no
    reload (the events stream's ``title``)."""
    page, user = visit.page, visit.user
    chats = page.get_by_role("complementary", name="Conversations")
    live.model.title = lambda r: "Pi 5 power supply" if "power supply" in r.prompt else ""
    try:
        page.evaluate("window.__sameDocument = true")
        page.get_by_label("Message").fill("Which power supply does a Raspberry Pi 5 want?")
        page.keyboard.press("Enter")
        chats.get_by_role("link", name="Pi 5 power supply").wait_for()
    finally:
        live.model.title = ""
    assert page.evaluate("window.__sameDocument") is True             # no reload
    (session,) = live.rt.memory.sessions.list_sessions(user, source="web")
    assert session.title == "Pi 5 power supply"


def test_a_login_outlives_a_restart_its_link_expires_and_the_logins_page_revokes(
        browser, visit, live):
    page, user = visit.page, visit.user
    old_link = live.login_link(user)
    live.restart()
    visit.go("/logins")                                    # still logged in
    assert page.url.endswith("/logins")
    mine = page.locator("tr", has_text="(this browser)")
    page.get_by_role("button", name="New login link").click()
    notice = page.get_by_role("status").filter(has_text="A new login link, shown only now")
    new_link = notice.inner_text().split(": ", 1)[1].strip()
    assert page.locator("tbody tr").count() == 3         # the visit's, old_link's, the new one
    live.clock.advance(days=8)
    try:
        other = browser.new_context()
        other.set_default_timeout(TIMEOUT_MS)
        tab = other.new_page()
        for link in (old_link, new_link):                # the ports changed since
            tab.goto(live.url + "/login?" + link.split("?", 1)[1])
            tab.get_by_text("That login link has expired").wait_for()
        page.reload()                                     # a session lasts 30 days
        mine.get_by_role("button", name="Revoke").click()
        page.wait_for_url("**/login")
        visit.go("/chat")
        assert page.url.endswith("/login")
        other.close()
    finally:
        live.clock.advance(days=-8)


def test_a_receipt_under_the_reply_says_what_it_used_and_learned_with_one_tap_fixes(
        visit, live):
    page, user = visit.page, visit.user
    facts = live.rt.memory.facts
    bike = facts.add(user, "The user's bike is a blue Brompton", entities=["Brompton"]).id
    live.model.chat["Which bike do I ride"] = "Your blue Brompton."
    live.model.learn["on Tuesdays"] = [{"action": "create",
                                        "content": "The user rides to work on Tuesdays"}]
    page.get_by_label("Message").fill("I ride to work on Tuesdays. Which bike do I ride?")
    page.keyboard.press("Enter")
    reply = page.locator("article.msg.assistant", has_text="Your blue Brompton.")
    receipt = reply.locator(".receipt")
    receipt.locator("summary", has_text="used 1 fact · learned 1").wait_for()   # live
    learned = receipt.locator(".learned-here li", has_text="rides to work on Tuesdays")
    (tuesdays,) = [f for f in facts.list_facts(user) if "Tuesdays" in f.content]
    used = receipt.locator(f'.shown li[data-fact-id="{bike}"]')
    used.get_by_role("button", name="👍 right").click()
    used.locator(".trust", has_text="0.55").wait_for()
    learned.get_by_role("button", name="Undo").click()
    learned.get_by_text("undone").wait_for()
    assert facts.get(user, tuesdays.id).status == "forgotten"
    used.get_by_role("button", name="Wrong: forget it").click()
    used.get_by_text("forgotten").wait_for()
    assert facts.get(user, bike).status == "forgotten"
    page.reload()                                   # the page itself shows the same receipt
    receipt = page.locator("article.msg.assistant .receipt").last
    receipt.locator("summary", has_text="used 1 fact · learned 1").click()
    receipt.locator(".learned-here li.forgotten", has_text="Tuesdays").wait_for()


def test_pages_stats_by_source_add_a_fact_probe_suggestions_history_and_inline_errors(
        visit, live):
    from hermes.store import usage

    page, user = visit.page, visit.user
    usage.record(live.rt.db, usage.Call("gpt-x", 1000, 250, 0, 40, 0.003),
                 "2026-11-29T11:00:00Z", usage.Scope(user, "chat", None))
    visit.go("/stats")
    row = page.get_by_role("row", name="chat")
    assert row.get_by_role("cell").all_inner_texts() == ["chat", "1", "1,000", "25%", "40",
                                                         "$0.0030"]
    visit.go("/facts")
    page.get_by_text("Add a fact").click()
    page.get_by_label("Fact", exact=True).fill("Project Atlas ships in March")
    page.get_by_label("about").fill("Project Atlas")
    page.get_by_role("button", name="Add", exact=True).click()
    page.get_by_role("status").filter(has_text="Added fact").wait_for()
    assert page.get_by_role("button", name="helpful", exact=False).first.inner_text() \
        .endswith("helpful")                              # words beside the emoji
    visit.go("/facts?mode=probe&q=Atlas")
    page.get_by_role("link", name="Project Atlas").click()
    page.get_by_text("Project Atlas ships in March").wait_for()
    page.get_by_role("link", name="#", exact=False).first.click()
    page.get_by_text("added: \u201cProject Atlas ships in March\u201d").wait_for()
    visit.go("/facts")
    page.get_by_label("trust ≥").fill("high")
    page.get_by_role("button", name="Show").click()
    page.get_by_role("alert").filter(has_text="Trust must be a number").wait_for()
    assert page.get_by_label("trust ≥").input_value() == "high"      # the form, kept


def test_a_temporary_chat_answers_and_leaves_nothing_behind(visit, live):
    page, user = visit.page, visit.user
    live.model.chat["Plan a secret party"] = "A **surprise** party it is."
    live.model.learn["secret party"] = [{"action": "create", "content": "Never learned"}]
    page.get_by_role("link", name="Temporary chat").click()
    page.get_by_text("Temporary chat: neither kept nor learned from").wait_for()
    page.get_by_label("Message").fill("Plan a secret party for Sam")
    page.keyboard.press("Enter")
    page.locator("article.msg.assistant:not(.streaming) strong", has_text="surprise").wait_for()
    assert "session=-" in page.url
    page.reload()                                        # kept while Hermes runs, in memory
    page.locator("article.msg.assistant strong", has_text="surprise").wait_for()
    chats = page.get_by_role("complementary", name="Conversations")
    chats.get_by_text("No web conversations yet").wait_for()
    live.learned()
    assert live.rt.memory.sessions.list_sessions(user) == []
    assert live.rt.memory.facts.list_facts(user, include_inactive=True) == []
