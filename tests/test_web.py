"""The web panel over HTTP (an in-process ASGI client): login, CSRF, every page and action,
refusals, and one user never reaching another's memory."""

from __future__ import annotations

import re

import pytest

from hermes.assembly import cron_store
from hermes.frontends.web.app import WebContext
from hermes.memory.basic import BasicMemory
from tests.web_client import Panel


@pytest.fixture
async def panel(rt):
    p = await Panel(WebContext(rt)).login()
    yield p
    await p.close()


@pytest.fixture
def facts(rt):
    return rt.memory.facts


# --------------------------------------------------------------------------- who gets in
async def test_pages_need_a_login_and_a_valid_token(rt):
    p = Panel(WebContext(rt))
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
    ctx = WebContext(rt)
    token = ctx.tokens.create("owner")
    stored = ctx.tokens.path.read_text()
    assert token not in stored and ctx.tokens.user_for(token) == "owner"
    assert oct(ctx.tokens.path.stat().st_mode & 0o777) == "0o600"


async def test_a_pasted_token_logs_in_and_logout_ends_the_session(rt):
    p = Panel(WebContext(rt))
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
    p, other = Panel(WebContext(rt)), None
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
    p = Panel(WebContext(rt))
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
    assert ok.status_code == 200 and [e.text for e in basic.entries("owner")] == ["Runs Debian"]


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
    cron_store(rt).add("owner-digest", "owner", "every 1d", "Digest", "terminal")
    alice = await Panel(WebContext(rt)).login("alice")
    try:
        for url in (f"/facts/{owner_fact}", f"/sessions/{owner_session}",
                    f"/chat?session={owner_session}"):
            assert (await alice.get(url)).status_code == 404, url
        for url, data in ((f"/facts/{owner_fact}/forget", {}),
                          (f"/facts/{owner_fact}/purge", {"confirm": "yes"}),
                          (f"/facts/{owner_fact}/update", {"content": "Mine now"}),
                          ("/cron/owner-digest/pause", {}),
                          (f"/chat/rate/{message}", {"rating": "down"}),
                          ("/chat/send", {"session": str(owner_session), "text": "hi"})):
            response = await alice.post(url, data)
            assert response.status_code == 404, url
        listing = await alice.get("/facts")
        assert "hallway" not in listing.text
        assert facts.get("owner", owner_fact).active
        assert cron_store(rt).get("owner-digest").enabled
        assert "owner-digest" not in (await alice.get("/cron")).text
    finally:
        await alice.close()


# --------------------------------------------------------------------------- basic memory
async def test_basic_memory_add_replace_remove_and_the_gauge(panel, rt):
    page = await panel.post("/memory/add", {"text": "Runs Debian 13 on the home server"})
    assert page.status_code == 200 and "Added [1]" in page.text
    assert 'value="37"' in page.text and "37 / 8,000 chars" in page.text
    page = await panel.post("/memory/replace", {"id": "1", "text": "Runs Debian 13"})
    assert "Runs Debian 13" in page.text and "18 / 8,000" in page.text
    page = await panel.post("/memory/remove", {"id": "1"})
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
    assert page.status_code == 200
    assert [e.text for e in basic.entries("owner")] == ["First", "Added in the terminal meanwhile",
                                                         "Third"]
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
    nonsense = await panel.get("/facts", params={"min_trust": "lots"})
    assert nonsense.status_code == 400 and "Trust must be a number" in nonsense.text


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
    page = await panel.post(f"/facts/{new_id}/rate", {"rating": "down"})
    assert "0.50 -&gt; 0.40" in page.text
    history = await panel.get(f"/facts/{new_id}")
    for action in ("update", "forget", "restore", "rate"):
        assert f"<strong>{action}</strong>" in history.text


async def test_purge_needs_confirmation(panel, facts):
    fact_id = facts.add("owner", "The NAS is in the hallway closet").id
    unconfirmed = await panel.post(f"/facts/{fact_id}/purge")
    assert unconfirmed.status_code == 422 and facts.get("owner", fact_id)
    done = await panel.post(f"/facts/{fact_id}/purge", {"confirm": "yes"})
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
    page = await panel.post("/entities/alias", {"entity": "PostgreSQL", "alias": "pg"})
    assert "pg is now another name of PostgreSQL" in page.text
    assert "pg" in facts.entity_store.resolve("owner", "pg").aliases
    empty = await panel.post("/entities/alias", {"entity": "PostgreSQL", "alias": ""})
    assert empty.status_code == 422


# --------------------------------------------------------------------------- the rest
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
    page = await panel.post("/context/refresh")
    assert "Refreshed" in page.text and "The home server runs Debian 13" in page.text
    assert (rt.settings.home_path / "context" / "owner.md").exists()


async def test_cron_pause_resume(panel, rt):
    store = cron_store(rt)
    store.add("digest", "owner", "every 1d", "Summarise my day", "terminal")
    page = await panel.post("/cron/digest/pause")
    assert "Paused digest" in page.text and not store.get("digest").enabled
    await panel.post("/cron/digest/resume")
    assert store.get("digest").enabled
    no_runner = await panel.post("/cron/digest/run")
    assert no_runner.status_code == 400 and "scheduler" in no_runner.text


async def test_stats_page_shows_only_the_users_rows(panel, rt, facts):
    facts.add("owner", "The NAS is in the hallway closet")
    facts.add("alice", "Alice's own fact")
    page = await panel.get("/stats")
    assert "1 active" in page.text
    assert re.search(r"<td>facts</td><td>1</td>", page.text)


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
    p = Panel(WebContext(rt))
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
    assert WebContext(rt).tokens.user_for(token) == "alice"
    again = cli("web", "token", "--user", "alice").stdout.strip()
    assert again != link and WebContext(rt).tokens.user_for(token) == "alice"


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
    assert WebContext(rt).tokens.user_for(link.split("token=", 1)[1]) == "alice"
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
