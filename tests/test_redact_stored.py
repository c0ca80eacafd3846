"""`hermes sessions redact`: secrets stored before redaction (or with it off) are rewritten once,
in messages, their search index, session titles and summaries and the context file; facts that
hold one are listed. Only the named user's rows are touched."""

from __future__ import annotations

from hermes.memory import context as context_file
from hermes.memory.sessions.store import SessionStore

KEY = "glpat-xY7zK2mN9pQ4rS6tU8vW"


def plant(rt, user: str) -> int:
    """A session recorded as an older Hermes would have: secrets kept as typed."""
    store = SessionStore(rt.db, clock=rt.clock, redact_secrets=False)
    session = store.create(user, "terminal")
    store.append(user, session.id, "user", f"deploy with {KEY} please")
    store.append(user, session.id, "user", "my PIN is 4821")
    store.append(user, session.id, "user", "nothing secret here")
    rt.db.execute("UPDATE sessions SET title = ?, summary = ? WHERE id = ?",
                  [f"Deploy {KEY}", "The user's PIN is 4821.", session.id])
    rt.db.conn.commit()
    return session.id


def fts_hits(rt, phrase: str) -> int:
    return rt.db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                         [f'"{phrase}"']).fetchone()[0]


def test_redact_rewrites_what_was_stored_and_its_index(rt, cli):
    plant(rt, "owner")
    theirs = plant(rt, "bob")
    path = context_file.path_for(rt, "owner")
    context_file.write_atomic(path, f"- deploy with {KEY}\n")
    rt.db.execute("INSERT INTO facts (user, content, content_key, category, kind, tags, "
                  "entity_names, trust, created_at, updated_at, valid_from) VALUES "
                  "('owner', 'The PIN is 4821', 'the pin is 4821', 'general', 'semantic', '[]', "
                  "'[]', 0.5, '2026-01-01', '2026-01-01', '2026-01-01')")
    rt.db.conn.commit()
    assert fts_hits(rt, KEY) == 2
    result = cli("sessions", "redact", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert (report["messages"], report["secrets"], report["sessions"]) == (2, 2, 1)
    assert report["context_file"] is True and len(report["facts_with_secrets"]) == 1
    contents = [r[0] for r in rt.db.execute(
        "SELECT content FROM messages WHERE user = 'owner' ORDER BY id").fetchall()]
    assert contents == ["deploy with [redacted gitlab token …U8vW] please",
                        "my PIN is [redacted PIN]", "nothing secret here"]
    assert fts_hits(rt, KEY) == 1  # bob's row, untouched
    title, summary = rt.db.execute("SELECT title, summary FROM sessions WHERE user = 'owner'"
                                   ).fetchone()
    assert KEY not in title and "4821" not in summary
    assert KEY not in path.read_text(encoding="utf-8")
    bob = rt.memory.sessions.messages("bob", theirs)
    assert KEY in bob[0].content
    again = cli("sessions", "redact", "--json").json()
    assert (again["messages"], again["sessions"], again["context_file"]) == (0, 0, False)


def test_redact_says_what_it_did_in_words(rt, cli):
    plant(rt, "owner")
    out = cli("sessions", "redact").stdout
    assert "2 secret(s) in 2 message(s)" in out and "1 session title(s)" in out


def test_hermes_import_of_an_export_with_secrets_redacts_its_messages(rt, cli, tmp_path):
    from hermes.memory.transfer import export_user

    plant(rt, "owner")
    dump = tmp_path / "owner.jsonl"
    dump.write_text("".join(line + "\n" for line in export_user(rt.db, "owner")),
                    encoding="utf-8")
    assert KEY in dump.read_text(encoding="utf-8")
    fresh = tmp_path / "fresh"
    assert cli("--home", str(fresh), "import", str(dump)).exit_code == 0
    shown = cli("--home", str(fresh), "sessions", "show", "1", "--json").stdout
    assert KEY not in shown and "4821" not in shown and "[redacted gitlab token" in shown
