"""The web panel over HTTP (an in-process ASGI client): login, CSRF, every page and action,
refusals, and one user never reaching another's memory."""

from __future__ import annotations

import re

import httpx
import pytest

from hermes.assembly import cron_store
from hermes.frontends.web.app import WebContext
from hermes.memory.basic import BasicMemory
from tests.web_client import Panel


@pytest.fixture
async def panel(rt):
    p = await Panel(WebContext(rt.memory)).login()
    yield p
    await p.close()


@pytest.fixture
def facts(rt):
    return rt.memory.facts


# --------------------------------------------------------------------------- who gets in
async def test_pages_need_a_login_and_a_valid_token(rt):
    p = Panel(WebContext(rt.memory))
    try:
        response = await p.get("/facts")
        assert response.status_code == 303 and response.headers["location"] == "/login"
        bad = await p.get("/login?token=not-a-token")
        assert bad.status_code == 403 and "not valid" in bad.text
        assert "hermes_session" not in bad.headers.get("set-cookie", "")
        token = p.ctx.tokens.create("owner")
        ok = await p.get(f"/login?token={token}")
        cookie = ok.headers["set-cookie"]
        assert ok.status_code == 303 and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert (await p.get("/facts")).status_code == 200
    finally:
        await p.close()


async def test_only_a_hash_of_the_token_is_kept(rt):
    ctx = WebContext(rt.memory)
    token = ctx.tokens.create("owner")
    stored = ctx.tokens.path.read_text()
    assert token not in stored and ctx.tokens.user_for(token) == "owner"
    assert oct(ctx.tokens.path.stat().st_mode & 0o777) == "0o600"


async def test_a_pasted_token_logs_in_and_logout_ends_the_session(rt):
    p = Panel(WebContext(rt.memory))
    try:
        token = p.ctx.tokens.create("owner")
        form = await p.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        response = await p.client.post("/login", data={"token": token, "csrf": csrf})
        assert response.status_code == 303
        assert "hermes_login=" in response.headers.get_list("set-cookie")[-1]  # deleted
        page = await p.get("/chat")
        p.csrf = re.search(r'name="csrf" content="([^"]+)"', page.text).group(1)
        assert (await p.post("/logout")).status_code == 303
        assert (await p.get("/chat")).status_code == 303      # back to the login page
    finally:
        await p.close()


def _session_cookie(response) -> bool:
    return any(c.startswith("hermes_session=") for c in response.headers.get_list("set-cookie"))


async def test_the_login_form_needs_its_own_csrf_token(rt):
    """Login CSRF: a page of another site must not log this browser in with a token of its
    author's (bob's), so that what its owner then types becomes bob's memory."""
    p, other = Panel(WebContext(rt.memory)), None
    try:
        bob = p.ctx.tokens.create("bob")
        form = await p.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        cookie = form.headers["set-cookie"]
        assert "hermes_login=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        refused = [
            await p.client.post("/login", data={"token": bob}),                    # no token
            await p.client.post("/login", data={"token": bob, "csrf": "x" + csrf}),  # wrong
            await p.client.post("/login", data={"token": bob, "csrf": csrf},          # foreign
                                headers={"Origin": "http://evil.example"}),
            await p.client.post("/login", data={"token": bob, "csrf": csrf},   # other scheme
                                headers={"Origin": "https://testserver"}),
            await p.client.post("/login", data={"token": bob, "csrf": csrf},
                                headers={"Sec-Fetch-Site": "cross-site"}),
        ]
        # A form on another site: the browser sends no SameSite=Strict cookie with it.
        other = Panel(p.ctx)
        refused.append(await other.client.post("/login", data={"token": bob, "csrf": csrf}))
        for response in refused:
            assert response.status_code == 403 and "CSRF" in response.text
            assert not _session_cookie(response)
        ok = await p.client.post("/login", data={"token": bob, "csrf": csrf},
                                 headers={"Origin": "http://testserver",
                                          "Sec-Fetch-Site": "same-origin"})
        assert ok.status_code == 303 and _session_cookie(ok)
    finally:
        await p.close()
        if other is not None:
            await other.close()


async def test_a_login_link_opened_from_another_site_is_refused(rt):
    p = Panel(WebContext(rt.memory))
    try:
        token = p.ctx.tokens.create("bob")
        for site in ("cross-site", "same-site"):  # same-site: another port of this host
            response = await p.get(f"/login?token={token}", headers={"Sec-Fetch-Site": site})
            assert response.status_code == 403 and "another site" in response.text
            assert not _session_cookie(response)
            assert (await p.get("/chat")).status_code == 303
        # Typed, pasted, or clicked in the terminal: the browser says "none".
        ok = await p.get(f"/login?token={token}", headers={"Sec-Fetch-Site": "none"})
        assert ok.status_code == 303 and _session_cookie(ok)
    finally:
        await p.close()


async def test_a_login_outlives_a_restart_and_its_link_and_session_expire(rt, clock):
    first = await Panel(WebContext(rt.memory)).login()
    token = first.ctx.tokens.create("owner")
    restarted = Panel(WebContext(rt.memory))                  # the daemon again, on the same home
    try:
        restarted.client.cookies = first.client.cookies
        assert (await restarted.get("/chat")).status_code == 200
        assert oct((rt.settings.home_path / "web" / "sessions.json").stat().st_mode & 0o777) \
            == "0o600"
        assert first.client.cookies["hermes_session"] not in \
            (rt.settings.home_path / "web" / "sessions.json").read_text()   # only its hash
        clock.advance(days=8)                           # the link: 7 days
        expired = await restarted.get(f"/login?token={token}")
        assert expired.status_code == 403 and "expired" in expired.text
        assert (await restarted.get("/chat")).status_code == 200     # the session: 30 days
        clock.advance(days=23)
        assert (await restarted.get("/chat")).status_code == 303
    finally:
        await first.close()
        await restarted.close()


async def test_a_damaged_sessions_or_tokens_file_is_one_line_not_a_traceback(rt):
    p = await Panel(WebContext(rt.memory)).login()
    try:
        web = rt.settings.home_path / "web"
        (web / "sessions.json").write_text("{not json", encoding="utf-8")
        page = await p.get("/chat")
        assert page.status_code == 500 and "sessions.json is damaged" in page.text
        (web / "tokens.json").write_text("[]", encoding="utf-8")
        login = await p.get("/login?token=abc")
        assert login.status_code == 500 and "tokens.json is damaged" in login.text
    finally:
        await p.close()


async def test_logins_page_lists_and_revokes_only_the_users_own(rt):
    alice = await Panel(WebContext(rt.memory)).login("alice")
    owner = await Panel(alice.ctx).login("owner")
    try:
        (alices,) = alice.ctx.tokens.list("alice")
        page = await owner.get("/logins")
        assert alices.id not in page.text
        refused = await owner.post("/logins/revoke", {"id": alices.id})
        assert refused.status_code == 404 and alice.ctx.tokens.list("alice")
        listing = await alice.get("/logins")
        assert f"<code>{alices.id}</code> <strong>(this browser)</strong>" in listing.text
        made = await alice.post("/logins/new", follow_redirects=True)
        assert "A new login link, shown only now" in made.text
        assert len(alice.ctx.tokens.list("alice")) == 2
        gone = await alice.post("/logins/revoke", {"id": alices.id})
        assert gone.headers["location"] == "/login"              # this browser's own login
        assert (await alice.get("/chat")).status_code == 303
        assert (await owner.get("/chat")).status_code == 200
    finally:
        await alice.close()
        await owner.close()


def test_web_token_list_and_revoke(cli, rt):
    link = cli("web", "token", "--user", "alice", "--days", "1").stdout.strip()
    ctx = WebContext(rt.memory)
    (listed,) = cli("web", "token", "--list", "--json").json()
    assert listed["user"] == "alice" and listed["expires_at"].startswith("2026-11-30T12:00")
    session = ctx.sessions.start("alice", listed["id"])
    table = cli("web", "token", "--list").stdout
    assert listed["id"] in table and "alice" in table
    revoked = cli("web", "token", "--revoke", listed["id"])
    assert revoked.exit_code == 0 and "1 browser(s) logged out" in revoked.stdout
    assert ctx.tokens.user_for(link.split("token=")[1]) is None
    assert WebContext(rt.memory).sessions.get(session.id) is None
    unknown = cli("web", "token", "--revoke", "nope1234")
    assert unknown.exit_code != 0 and "No login token" in unknown.stderr


async def test_every_write_needs_the_csrf_token(panel, rt):
    basic = BasicMemory(rt.db)
    missing = await panel.post("/memory/add", {"text": "Runs Debian"}, csrf=False)
    wrong = await panel.client.post("/memory/add", data={"text": "Runs Debian", "csrf": "x"})
    header = await panel.client.post("/memory/add", data={"text": "Runs Debian"},
                                     headers={"X-CSRF-Token": "x"})
    assert [missing.status_code, wrong.status_code, header.status_code] == [403, 403, 403]
    assert "CSRF" in missing.text and basic.entries("owner") == []
    cross = await panel.post("/memory/add", {"text": "Runs Debian"},
                             headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403 and basic.entries("owner") == []
    ok = await panel.client.post("/memory/add", data={"text": "Runs Debian"},
                                 headers={"X-CSRF-Token": panel.csrf,
                                          "Origin": "http://testserver"})
    assert ok.status_code == 303 and [e.text for e in basic.entries("owner")] == ["Runs Debian"]


async def test_the_user_comes_from_the_login_never_from_the_request(panel, rt):
    await panel.post("/memory/add?user=alice", {"text": "Owner's entry", "user": "alice"})
    basic = BasicMemory(rt.db)
    assert [e.text for e in basic.entries("owner")] == ["Owner's entry"]
    assert basic.entries("alice") == []


async def test_another_users_ids_are_404(rt, facts):
    owner_fact = facts.add("owner", "The owner's NAS is in the hallway").id
    sessions = rt.memory.sessions
    owner_session = sessions.create("owner", "web").id
    message = sessions.append("owner", owner_session, "user", "hello").id
    cron_store(rt.memory).add("owner-digest", "owner", "every 1d", "Digest", "terminal")
    alice = await Panel(WebContext(rt.memory)).login("alice")
    try:
        for url in (f"/facts/{owner_fact}", f"/sessions/{owner_session}",
                    f"/chat?session={owner_session}"):
            assert (await alice.get(url)).status_code == 404, url
        for url, data in ((f"/facts/{owner_fact}/forget", {}),
                          (f"/facts/{owner_fact}/purge", {"confirm": "yes"}),
                          (f"/facts/{owner_fact}/update", {"content": "Mine now"}),
                          ("/cron/owner-digest/pause", {}),
                          (f"/chat/rate/{message}", {"rating": "down"}),
                          (f"/chat/{owner_session}/delete", {"confirm": "yes"}),
                          ("/chat/send", {"session": str(owner_session), "text": "hi"})):
            response = await alice.post(url, data)
            assert response.status_code == 404, url
        listing = await alice.get("/facts")
        assert "hallway" not in listing.text
        assert facts.get("owner", owner_fact).active
        assert cron_store(rt.memory).get("owner-digest").enabled
        assert sessions.get("owner", owner_session).message_count == 1
        assert "owner-digest" not in (await alice.get("/cron")).text
    finally:
        await alice.close()


async def test_every_write_redirects_with_a_notice_once_and_a_form_sent_twice_does_it_once(
        panel, rt, facts):
    """Post/Redirect/Get: a reload of the page after a write reloads the page; the same form
    sent again (its one-time token) changes nothing."""
    fact_id = facts.add("owner", "Carol mentors Bob on Fridays", entities=["Carol"]).id
    cron_store(rt.memory).add("digest", "owner", "every 1d", "Summarise my day", "terminal")
    writes = [("/memory/add", {"text": "Runs Debian"}, "/memory", "Added [1]"),
              (f"/facts/{fact_id}/rate", {"rating": "down"}, f"/facts/{fact_id}",
               "Trust 0.50 -&gt; 0.40"),
              ("/entities/alias", {"entity": "Carol", "alias": "Caz"}, "/entities",
               "Caz is now another name of Carol"),
              ("/context/refresh", {}, "/context", "Refreshed"),
              ("/cron/digest/pause", {}, "/cron", "Paused digest"),
              (f"/facts/{fact_id}/forget", {}, f"/facts/{fact_id}", f"Forgot fact {fact_id}")]
    for url, data, target, notice in writes:
        form = {**data, "once": f"form-{url}"}
        done = await panel.post(url, form)
        assert done.status_code == 303 and done.headers["location"] == target, url
        assert notice in (await panel.get(target)).text, url
        assert notice not in (await panel.get(target)).text, url      # once
        again = await panel.post(url, form, headers={"Referer": f"http://testserver{target}"})
        assert again.status_code == 303 and again.headers["location"] == target
        assert "already sent" in (await panel.get(target)).text
    assert [e.text for e in BasicMemory(rt.db).entries("owner")] == ["Runs Debian"]
    assert facts.get("owner", fact_id).trust == pytest.approx(0.4)
    # A refused write may be sent again (its form was not used up).
    refused = {"text": "x" * 9000, "once": "too-long"}
    assert (await panel.post("/memory/add", refused)).status_code == 422
    assert (await panel.post("/memory/add", refused)).status_code == 422


# --------------------------------------------------------------------------- basic memory
async def test_basic_memory_add_replace_remove_and_the_gauge(panel, rt):
    added = await panel.post("/memory/add", {"text": "Runs Debian 13 on the home server"})
    assert added.status_code == 303 and added.headers["location"] == "/memory"
    page = await panel.get("/memory")
    assert "Added [1]" in page.text
    assert 'value="37"' in page.text and "37 / 8,000 chars" in page.text
    page = await panel.post("/memory/replace", {"id": "1", "text": "Runs Debian 13"},
                            follow_redirects=True)
    assert "Runs Debian 13" in page.text and "18 / 8,000" in page.text
    page = await panel.post("/memory/remove", {"id": "1"}, follow_redirects=True)
    assert BasicMemory(rt.db).entries("owner") == [] and "(empty)" in page.text


async def test_basic_memory_over_the_cap_is_refused_inline_with_usage_and_entries(panel, rt):
    await panel.post("/memory/add", {"text": "Keep this entry"})
    page = await panel.post("/memory/add", {"text": "x" * 8000})
    assert page.status_code == 422
    assert "over its 8,000-character cap" in page.text and "[1] Keep this entry" in page.text
    assert [e.text for e in BasicMemory(rt.db).entries("owner")] == ["Keep this entry"]
    secret = await panel.post("/memory/add", {"text": "the db password is Tr0ub4dor&3"})
    assert secret.status_code == 422 and "secret" in secret.text


async def test_whole_block_edit_is_one_transaction_and_keeps_entries_added_elsewhere(panel, rt):
    basic = BasicMemory(rt.db)
    basic.add("owner", "First")
    basic.add("owner", "Second")
    page = await panel.get("/memory")
    shown = re.search(r'name="shown" value="([^"]*)"', page.text).group(1).replace("&#10;", "\n")
    basic.add("owner", "Added in the terminal meanwhile")
    page = await panel.post("/memory/edit", {"shown": shown, "block": "First\nThird"})
    assert page.status_code == 303
    # "Third" is "Second" edited where it stood: that entry, changed (its place in the order)
    assert [e.text for e in basic.entries("owner")] == ["First", "Third",
                                                         "Added in the terminal meanwhile"]
    refused = await panel.post("/memory/edit", {"shown": "First", "block": "First\n" + "y" * 8000})
    assert refused.status_code == 422 and "Nothing was changed" in refused.text
    assert len(basic.entries("owner")) == 3


# --------------------------------------------------------------------------- facts
async def test_fact_search_probe_reason_and_filters(panel, facts):
    facts.add("owner", "Alice Johnson deployed redis for Project Atlas", category="project")
    facts.add("owner", "Bob reviewed the Atlas rollout with Alice Johnson",
              entities=["Bob", "Alice Johnson", "Project Atlas"])
    low = facts.add("owner", "Carol mentors Bob on Fridays", entities=["Carol", "Bob"]).id
    facts.rate("owner", low, False)
    found = await panel.get("/facts", params={"q": "who deployed redis?"})
    assert "deployed redis" in found.text and "Carol" not in found.text
    probe = await panel.get("/facts", params={"q": "alice johnson", "mode": "probe"})
    assert "deployed redis" in probe.text and "reviewed the Atlas" in probe.text
    reason = await panel.get("/facts", params={"q": "Carol, Project Atlas", "mode": "reason"})
    assert "Carol → Bob → Project Atlas" in reason.text
    category = await panel.get("/facts", params={"category": "project"})
    assert "deployed redis" in category.text and "Bob reviewed" not in category.text
    trust = await panel.get("/facts", params={"max_trust": "0.45"})
    assert "Carol mentors" in trust.text and "deployed redis" not in trust.text
    entity = await panel.get("/facts", params={"entity": "Carol"})
    assert "Carol mentors" in entity.text and "deployed redis" not in entity.text
    nonsense = await panel.get("/facts", params={"min_trust": "lots", "q": "redis"})
    assert nonsense.status_code == 422 and "Trust must be a number" in nonsense.text
    assert 'id="min_trust" name="min_trust" value="lots"' in nonsense.text   # the form, kept
    assert 'id="q" name="q" type="search" value="redis"' in nonsense.text


async def test_probe_suggests_entity_names_holding_the_words(panel, facts):
    facts.add("owner", "Project Atlas ships in March", entities=["Project Atlas"])
    facts.add("owner", "Atlas Copco makes the compressor", entities=["Atlas Copco"])
    facts.add("alice", "Alice's Atlas Mountains trip", entities=["Atlas Mountains"])
    page = await panel.get("/facts", params={"q": "Atlas", "mode": "probe"})
    assert "Did you mean" in page.text
    assert '/facts?mode=probe&amp;q=Project%20Atlas">Project Atlas</a>' in page.text
    assert "Atlas Copco" in page.text and "Atlas Mountains" not in page.text
    exact = await panel.get("/facts", params={"q": "Project Atlas", "mode": "probe"})
    assert "ships in March" in exact.text and "Did you mean" not in exact.text


async def test_a_fact_added_by_hand_and_its_history_read_as_changes(panel, facts):
    added = await panel.post("/facts/add", {"content": "Carol mentors Bob on Fridays",
                                            "entities": "Carol, Bob", "category": "person"})
    fact_id = int(added.headers["location"].rsplit("/", 1)[1])
    fact = facts.get("owner", fact_id)
    assert fact.category == "person" and set(fact.entities) >= {"Carol", "Bob"}
    await panel.post(f"/facts/{fact_id}/rate", {"rating": "down"})
    new = await panel.post(f"/facts/{fact_id}/update", {"content": "Carol mentors Bob on "
                                                                   "Mondays"})
    new_id = int(new.headers["location"].rsplit("/", 1)[1])
    old_page = (await panel.get(f"/facts/{fact_id}")).text
    assert "added: \u201cCarol mentors Bob on Fridays\u201d (trust 0.50, person" in old_page
    assert "unhelpful: trust 0.50 \u2192 0.40" in old_page
    assert f"replaced by #{new_id}" in old_page
    new_page = (await panel.get(f"/facts/{new_id}")).text
    assert ("\u201cCarol mentors Bob on Fridays\u201d \u2192 \u201cCarol mentors Bob on Mondays"
            "\u201d") in new_page
    assert "{&#34;" not in new_page and '{"' not in new_page           # no raw JSON
    refused = await panel.post("/facts/add", {"content": "the db password is Tr0ub4dor&3"})
    assert refused.status_code == 422 and "secret" in refused.text       # kept to fix


async def test_a_fact_added_by_hand_replaces_the_one_it_contradicts(panel, facts):
    """What the user states outright supersedes the fact it contradicts (issue 31)."""
    first = await panel.post("/facts/add", {"content": "My doctor is Dr. Smith"})
    smith = int(first.headers["location"].rsplit("/", 1)[1])
    second = await panel.post("/facts/add", {"content": "My doctor is Dr. Jones"})
    jones = int(second.headers["location"].rsplit("/", 1)[1])
    page = (await panel.get(second.headers["location"])).text
    assert f"It replaces fact {smith}, which it contradicts." in page
    assert facts.get("owner", smith).superseded_by == jones
    assert facts.get("owner", jones).content == "The user's doctor is Dr. Jones"


async def test_fact_edit_forget_restore_rate_and_history(panel, facts):
    fact_id = facts.add("owner", "Carol mentors Bob on Fridays").id
    edited = await panel.post(f"/facts/{fact_id}/update",
                              {"content": "Carol mentors Bob on Mondays"})
    new_id = int(edited.headers["location"].rsplit("/", 1)[1])
    assert facts.get("owner", fact_id).superseded_by == new_id
    page = await panel.get(f"/facts/{fact_id}")
    assert "superseded" in page.text and f"/facts/{new_id}" in page.text
    same = await panel.post(f"/facts/{new_id}/update", {"content": "Carol mentors Bob on Mondays"})
    assert same.status_code == 422 and "same as the old" in same.text
    await panel.post(f"/facts/{new_id}/forget")
    assert facts.get("owner", new_id).status == "forgotten"
    await panel.post(f"/facts/{new_id}/restore")
    assert facts.get("owner", new_id).active
    page = await panel.post(f"/facts/{new_id}/rate", {"rating": "down"}, follow_redirects=True)
    assert "0.50 -&gt; 0.40" in page.text
    history = await panel.get(f"/facts/{new_id}")
    for action in ("update", "forget", "restore", "rate"):
        assert f"<strong>{action}</strong>" in history.text


async def test_purge_needs_confirmation(panel, facts):
    fact_id = facts.add("owner", "The NAS is in the hallway closet").id
    unconfirmed = await panel.post(f"/facts/{fact_id}/purge")
    assert unconfirmed.status_code == 422 and facts.get("owner", fact_id)
    done = await panel.post(f"/facts/{fact_id}/purge", {"confirm": "yes"},
                            follow_redirects=True)
    assert done.status_code == 200 and "deleted" in done.text
    assert (await panel.get(f"/facts/{fact_id}")).status_code == 404


async def test_a_fact_shows_its_source_messages_with_links_into_the_session(panel, rt, facts):
    sessions = rt.memory.sessions
    session_id = sessions.create("owner", "discord").id
    said = sessions.append("owner", session_id, "user", "I moved to Lisbon", speaker="ana").id
    fact_id = facts.add("owner", "The user lives in Lisbon", source_session_id=session_id,
                        source_message_ids=[said]).id
    page = await panel.get(f"/facts/{fact_id}")
    assert f'/sessions/{session_id}?around={said}#m{said}' in page.text
    assert "I moved to Lisbon" in page.text
    session = await panel.get(f"/sessions/{session_id}?around={said}")
    assert f'id="m{said}" class="user match"' in session.text


async def test_aliases(panel, facts):
    facts.add("owner", "PostgreSQL runs on the NAS", entities=["PostgreSQL"])
    page = await panel.post("/entities/alias", {"entity": "PostgreSQL", "alias": "pg"},
                            follow_redirects=True)
    assert "pg is now another name of PostgreSQL" in page.text
    assert "pg" in facts.entity_store.resolve("owner", "pg").aliases
    empty = await panel.post("/entities/alias", {"entity": "PostgreSQL", "alias": ""})
    assert empty.status_code == 422


# --------------------------------------------------------------------------- the rest
async def test_deleting_a_conversation_takes_its_messages_and_keeps_what_was_learned(
        panel, rt, facts):
    sessions = rt.memory.sessions
    sid = sessions.create("owner", "web").id
    said = sessions.append("owner", sid, "user", "My bike is a blue Brompton").id
    reply = sessions.append("owner", sid, "assistant", "A blue Brompton, noted.").id
    learned = facts.add("owner", "The user's bike is a blue Brompton", source_session_id=sid,
                        source_message_ids=[said]).id
    rt.memory.ratings.record_shown("owner", reply, [learned])
    refused = await panel.post(f"/chat/{sid}/delete")
    assert refused.status_code == 400 and "Tick the box" in refused.text
    done = await panel.post(f"/chat/{sid}/delete", {"confirm": "yes"}, follow_redirects=True)
    assert "Deleted the conversation" in done.text and "(2 messages)" in done.text
    assert sessions.search("owner", "Brompton") == []
    assert rt.db.execute("SELECT count(*) FROM shown_facts WHERE message_id = ?",
                         [reply]).fetchone()[0] == 0
    assert facts.get("owner", learned).active                 # the fact stays
    assert (await panel.get(f"/facts/{learned}")).status_code == 200


async def test_sessions_browse_and_search_with_the_match_in_context(panel, rt):
    sessions = rt.memory.sessions
    sid = sessions.create("owner", "discord", title="Docker networking").id
    sessions.append("owner", sid, "user", "Containers can't resolve each other")
    sessions.append("owner", sid, "assistant", "Create a user-defined network: docker network "
                    "create homelab")
    listing = await panel.get("/sessions")
    assert "Docker networking" in listing.text
    hits = await panel.get("/sessions", params={"q": "docker network"})
    assert 'class="match"' in hits.text and "Containers can" in hits.text
    nothing = await panel.get("/sessions", params={"q": "?!"})
    assert nothing.status_code == 200 and "no words" in nothing.text


async def test_context_file_refresh_now(panel, rt, facts):
    facts.add("owner", "The home server runs Debian 13")
    before = await panel.get("/context")
    assert "No context file yet" in before.text
    page = await panel.post("/context/refresh", follow_redirects=True)
    assert "Refreshed" in page.text and "The home server runs Debian 13" in page.text
    assert (rt.settings.home_path / "context" / "owner.md").exists()


async def test_cron_pause_resume(panel, rt):
    store = cron_store(rt.memory)
    store.add("digest", "owner", "every 1d", "Summarise my day", "terminal")
    page = await panel.post("/cron/digest/pause", follow_redirects=True)
    assert "Paused digest" in page.text and not store.get("digest").enabled
    await panel.post("/cron/digest/resume")
    assert store.get("digest").enabled
    no_runner = await panel.post("/cron/digest/run")
    assert no_runner.status_code == 400 and "scheduler" in no_runner.text


async def test_stats_page_shows_model_usage_and_cost_per_source_as_hermes_stats(panel, rt,
                                                                               facts):
    from hermes.store import usage

    facts.add("owner", "The NAS is in the hallway closet")
    call = usage.Call("gpt-x", 1200, 600, 0, 80, 0.0021)
    usage.record(rt.db, call, "2026-11-29T11:00:00Z", usage.Scope("owner", "chat", None))
    usage.record(rt.db, call, "2026-11-29T11:01:00Z", usage.Scope("owner", "extraction", None))
    usage.record(rt.db, call, "2026-11-29T11:02:00Z", usage.Scope("alice", "chat", None))
    page = await panel.get("/stats")
    assert re.search(r"<td>chat</td><td>1</td><td>1,200</td><td>50%</td><td>80</td>"
                     r"<td>\$0.0021</td>", page.text)
    assert re.search(r"<td>all</td><td>2</td><td>2,400</td>.*<td>\$0.0042</td>", page.text)
    assert "1 active" in page.text and "Your rows" not in page.text


async def test_unknown_ids_and_bad_numbers_are_one_line(panel):
    assert (await panel.get("/facts/999")).status_code == 404
    assert (await panel.get("/facts/abc")).status_code == 400
    assert (await panel.get("/sessions/99999999999999999999999")).status_code in (400, 404)


def test_config_defaults():
    from hermes.config import Settings

    web = Settings().web
    assert (web.enabled, web.host, web.port) == (True, None, 8765)


def test_nothing_is_loaded_from_another_site():
    from hermes.frontends.web.app import HERE

    for path in [*(HERE / "templates").glob("*.html"), *(HERE / "static").glob("*")]:
        text = path.read_text()
        assert "http://" not in text and "https://" not in text, path


async def test_static_files_are_served_without_login(rt):
    p = Panel(WebContext(rt.memory))
    try:
        css = await p.get("/static/app.css")
        assert css.status_code == 200 and "text/css" in css.headers["content-type"]
    finally:
        await p.close()


def test_web_token_prints_a_login_link_for_that_user(cli, rt):
    result = cli("web", "token", "--user", "alice")
    assert result.exit_code == 0
    link = result.stdout.strip()
    assert link.startswith("http://127.0.0.1:8765/login?token=")
    token = link.split("token=", 1)[1]
    assert WebContext(rt.memory).tokens.user_for(token) == "alice"
    again = cli("web", "token", "--user", "alice").stdout.strip()
    assert again != link and WebContext(rt.memory).tokens.user_for(token) == "alice"


async def test_a_no_js_post_goes_back_only_to_a_page_of_this_site(panel):
    from starlette.requests import Request

    from hermes.frontends.web.app import back

    def request(referer: str | None) -> Request:
        headers = [(b"host", b"testserver")]
        if referer:
            headers.append((b"referer", referer.encode()))
        return Request({"type": "http", "method": "POST", "path": "/x", "headers": headers,
                        "query_string": b"", "scheme": "http", "server": ("testserver", 80)})

    assert back(request("http://testserver/chat?session=3"), "/chat") \
        .headers["location"] == "/chat?session=3"
    assert back(request("http://evil.example/steal?x=1"), "/chat").headers["location"] == "/chat"
    assert back(request(None), "/facts").headers["location"] == "/facts"


def test_web_open_makes_a_token_for_the_user_and_hands_its_link_to_the_server(cli, rt,
                                                                             monkeypatch):
    import hermes.cli.web as web_cli

    served = []

    async def serve(runtime, link):
        served.append(link)

    monkeypatch.setattr(web_cli, "_serve", serve)
    assert cli("web", "--open", "--user", "alice").exit_code == 0
    (link,) = served
    assert WebContext(rt.memory).tokens.user_for(link.split("token=", 1)[1]) == "alice"
    assert cli("web").exit_code == 0 and served[1] is None     # no --open: no new token


def test_web_open_with_the_daemon_running_opens_its_panel_with_a_new_token(cli, rt,
                                                                             monkeypatch):
    import webbrowser

    import hermes.cli.web as web_cli
    import hermes.local_socket

    opened = []
    monkeypatch.setattr(hermes.local_socket, "daemon_running", lambda settings: True)
    monkeypatch.setattr(webbrowser, "open", opened.append)
    monkeypatch.setattr(web_cli, "_serve", lambda *a: pytest.fail("a second panel was started"))
    result = cli("web", "--open", "--user", "alice")
    assert result.exit_code == 0, result.stderr
    (link,) = opened
    assert link.startswith("http://127.0.0.1:8765/login?token=") and link in result.stderr
    assert WebContext(rt).tokens.user_for(link.split("token=", 1)[1]) == "alice"
    monkeypatch.setenv("HERMES_WEB__ENABLED", "false")
    off = cli("web", "--open")
    assert off.exit_code == 1 and off.stderr.startswith("Error: The Hermes daemon on this home "
                                                        "runs without the web panel")


def test_hermes_web_on_a_port_in_use_is_one_line(cli, hermes_home, monkeypatch):
    """`hermes web` alone stops with one `Error:` line (the log line goes to hermes.log only);
    in `hermes run` the panel's log line is the notice and the rest keeps running."""
    import logging
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("HERMES_WEB__PORT", str(port))
        root = logging.getLogger()
        before = list(root.handlers), root.level
        try:
            result = cli("web")
        finally:
            for handler in list(root.handlers):
                if handler not in before[0]:
                    root.removeHandler(handler)
                    handler.close()
            root.handlers[:], root.level = before
    assert result.exit_code == 1 and result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if "cannot listen" in line]
    assert errors == [f"Error: The web panel cannot listen on 127.0.0.1:{port} (Address already "
                      "in use); set web.port to a free port (HERMES_WEB__PORT=8780 hermes web)."]
    assert f"web: cannot listen on 127.0.0.1:{port}" in (hermes_home / "hermes.log").read_text()


async def test_a_fact_shows_its_tombstone_and_settles_a_pending_question(panel, facts, rt):
    """Issue 31: a forgotten fact's tombstone is on its page; an inference waiting for the
    user's word is decided there."""
    gone = facts.add("owner", "The NAS is in the attic").fact
    await panel.post(f"/facts/{gone.id}/forget")
    page = await panel.get(f"/facts/{gone.id}")
    assert "Tombstone" in page.text and "not learned again" in page.text
    lisbon = facts.add("owner", "The user lives in Lisbon", tags=["fastlane"]).fact
    question = facts.ask_before_overriding("owner", lisbon.id, "The user lives in Porto")
    page = await panel.get(f"/facts/{lisbon.id}")
    assert "Waiting for your word" in page.text and "The user lives in Porto" in page.text
    listed = (await panel.get("/facts")).text          # the list says which fact waits
    assert "Waiting for your word" in listed and f'<a href="/facts/{lisbon.id}">' in listed
    settled = await panel.post(f"/facts/{lisbon.id}/settle",
                               {"question": str(question.id), "decision": "accept"})
    new_id = int(settled.headers["location"].rsplit("/", 1)[1])
    assert facts.get("owner", new_id).content == "The user lives in Porto"
    assert "Waiting for your word" not in (await panel.get(f"/facts/{new_id}")).text
    bob = facts.add("bob", "Bob lives in Lisbon", tags=["fastlane"]).fact
    theirs = facts.ask_before_overriding("bob", bob.id, "Bob lives in Porto")
    assert "Waiting for your word" not in (await panel.get("/facts")).text  # bob's: not shown
    refused = await panel.post(f"/facts/{new_id}/settle",
                               {"question": str(theirs.id), "decision": "accept"})
    assert refused.status_code == 404 and facts.get("bob", bob.id).active


async def test_a_body_over_the_limit_is_refused_even_by_an_app_that_catches_the_read():
    """The MCP SDK reads the body in a try/except and answered a chunked 64 MiB body with 500
    Internal Server Error (review rev4). Whatever the app says then, the answer is the 413."""
    from hermes.frontends.web.body_limit import MAX_BODY_BYTES, BodyLimit

    async def swallowing(scope, receive, send):
        try:
            while (await receive()).get("more_body"):
                pass
            status = 200
        except Exception:  # noqa: BLE001 - as the SDK does
            status = 500
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"app"})

    async def streamed():
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"a" * 65536

    transport = httpx.ASGITransport(app=BodyLimit(swallowing))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post("/mcp", content=streamed())
        assert answer.status_code == 413 and answer.text.startswith("Refused: a request body")
        assert (await client.post("/mcp", content=b"small")).text == "app"


async def test_a_body_over_the_limit_is_refused_before_it_is_read(rt):
    """Issue 30: /login read 128 MiB before its 403; a 16 MiB chat message was stored."""
    from hermes.frontends.web.body_limit import MAX_BODY_BYTES

    p = Panel(WebContext(rt.memory))
    try:
        big = {"token": "x" * (MAX_BODY_BYTES + 1), "csrf": "y"}
        refused = await p.client.post("/login", data=big)
        assert refused.status_code == 413
        assert refused.text == ("Refused: a request body over 1 MiB (a message is at most "
                                "64,000 characters).")

        async def streamed():                      # no Content-Length: counted as it comes
            for _ in range(MAX_BODY_BYTES // 65536 + 2):
                yield b"a" * 65536

        chunked = await p.client.post("/login", content=streamed(),
                                      headers={"content-type": "application/x-www-form-urlencoded"})
        assert chunked.status_code == 413
        await p.login()
        assert (await p.get("/chat")).status_code == 200
        assert rt.memory.sessions.list_sessions("owner") == []
    finally:
        await p.close()
