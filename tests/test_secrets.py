"""The secret detector and redaction (hermes.safety.secrets) on a corpus of true and false
positives (tests/data/secrets_corpus.tsv), and redaction where a message is recorded."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hermes.safety.secrets import (
    RedactingFilter,
    find_secrets,
    luhn_ok,
    redact,
    redact_json,
    removed_note,
)

CORPUS = Path(__file__).parent / "data" / "secrets_corpus.tsv"


def corpus(expect: str) -> list[tuple[str, str]]:
    rows = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, text, *rest = line.split("\t")
        if kind == expect:
            rows.append((text.replace("\\n", "\n"), rest[0] if rest else ""))
    return rows


@pytest.mark.parametrize(("text", "secret"), corpus("secret"))
def test_every_planted_secret_is_redacted(text, secret):
    redacted = redact(text)
    assert redacted.findings, text
    assert secret not in redacted.text
    assert "[redacted " in redacted.text
    assert redact(redacted.text).text == redacted.text  # markers are never redacted again


@pytest.mark.parametrize(("text", "_"), corpus("clean"))
def test_ordinary_text_is_left_alone(text, _):
    assert find_secrets(text) == [], text


def test_the_corpus_is_big_enough_to_mean_something():
    assert len(corpus("secret")) >= 40 and len(corpus("clean")) >= 40


def test_marker_names_the_kind_and_ends_long_tokens_only():
    key = "sk-proj-Xa81kQ9vLmN2pR7sT4uW6yZ0bC3dE5fG8hJ1a1f3"
    assert redact(f"key {key}").text == "key [redacted openai key …a1f3]"
    # a short secret gets no fingerprint: four characters of a PIN would be most of it
    assert redact("my PIN is 4821").text == "my PIN is [redacted PIN]"
    assert redact("the wifi password is sunflower").text == \
        "the wifi password is [redacted password]"
    assert redact("card 4111 1111 1111 1111 exp 12/29").text == \
        "card [redacted card number …1111] exp 12/29"


def test_password_phrasing_takes_the_password_and_not_the_rest():
    assert redact("my password is hunter2 if you need it").text == \
        "my password is [redacted password] if you need it"
    assert redact("the password is hunter two.").text == "the password is [redacted password]."


def test_card_numbers_must_pass_luhn():
    assert luhn_ok("4111 1111 1111 1111") and not luhn_ok("4111 1111 1111 1112")
    assert find_secrets("ticket 4111 1111 1111 1112") == []


def test_jwt_must_decode():
    assert find_secrets("eyJhbGciOiJIUzI1NiJ9x.eyJzdWIiOiIxMjM0NTY3ODkwIn0x.abc") == []


def test_json_stays_json_and_loses_its_secrets():
    raw = json.dumps({"content": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                      "n": [1, {"k": "pin 4821"}]})
    out = json.loads(redact_json(raw))
    assert "ghp_" not in out["content"] and out["n"][1]["k"] == "pin [redacted PIN]"
    assert redact_json('{"a": "plain"}') == '{"a": "plain"}'
    assert "ghp_" not in redact_json("not json ghp_abcdefghijklmnopqrstuvwxyz0123456789")


def test_the_note_names_what_was_removed_once():
    text = "my PIN is 4821 and my PIN is 4821"
    note = removed_note(text, redact(text).text)
    assert note is not None and note.count("[redacted PIN]") == 1
    assert removed_note("hello", "hello") is None
    # a marker the user typed is not a secret Hermes removed
    assert removed_note("see [redacted PIN]", "see [redacted PIN]") is None


def test_log_filter_redacts_message_arguments_and_tracebacks():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))

    handler = Keep()
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("hermes.test.redaction")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("not stored: %s", "my password is hunter2")
        try:
            raise ValueError("bad key sk-proj-Xa81kQ9vLmN2pR7sT4uW6yZ0bC3dE5fG8hJ1a1f3")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    text = "\n".join(records)
    assert "hunter2" not in text and "Xa81kQ9" not in text
    assert "[redacted password]" in text and "[redacted openai key …a1f3]" in text


# -- recording ----------------------------------------------------------------------------------

def test_a_message_is_redacted_when_recorded_and_so_in_its_search_index(rt):
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    message = store.append("owner", session.id, "user",
                           "deploy with glpat-xY7zK2mN9pQ4rS6tU8vW please")
    assert message.content == "deploy with [redacted gitlab token …U8vW] please"
    assert store.messages("owner", session.id)[0].content == message.content
    hits = rt.db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                         ['"xY7zK2mN9pQ4rS6tU8vW"']).fetchone()[0]
    assert hits == 0
    tool = store.append("owner", session.id, "tool", "ok", tool_name="facts",
                        tool_args=json.dumps({"content": "my PIN is 4821"}))
    assert "4821" not in (tool.tool_args or "")


def test_redaction_can_be_turned_off_for_messages_but_never_for_summaries(
        monkeypatch, clock):
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    monkeypatch.setenv("HERMES_SESSIONS__REDACT_SECRETS", "false")
    rt = Runtime(load_settings(), clock=clock)
    try:
        store = rt.memory.sessions
        session = store.create("owner", "terminal")
        assert store.append("owner", session.id, "user", "my PIN is 4821").content == \
            "my PIN is 4821"
        store.set_summary("owner", session.id, title="PIN 4821", summary="PIN is 4821")
        stored = store.get("owner", session.id)
        assert "4821" not in (stored.title or "") and "4821" not in (stored.summary or "")
    finally:
        rt.close()


def test_the_fast_screen_says_what_the_screen_pattern_says():
    """secrets._screened (substring tests on ASCII text) must pass every text _SCREEN passes:
    a text it wrongly screened out would keep its secret."""
    import random

    from hermes.safety import secrets

    rng = random.Random(13)
    pieces = ["pass", "PWD", "Key", "toKen", "secret", "Bearer", "sk-", "SK_", "rk_", "hf_",
              "npm_", "xoxb", "github_pat", "glpat", "AKIA", "asia", "a3t", "abia", "acca",
              "eyJ", "BEGIN", "putty", "://", "AIza", "sg.", "sq0", "AccountKey", "-us1", "7",
              "ghp_", "GHO_", "gl-", "glab-", "gl9-", " ac" + "a" * 32, "sk" + "B" * 32,
              " m" + "x" * 24 + ".", "N" + "a_-" * 8 + ".", "s", "k", "g", "h", "a", "-", "_",
              ".", " ", "x", "é", "ſ", "K"]
    texts = ["", "hello there", "the tiles in Porto were blue", "ſecret", "paſs", "KEY",
             # the shortest text each of the lowered patterns matches (the screen's shortcut)
             "n" + "a" * 23 + ".", "ac" + "0" * 32, "ghs_", "gla-", "x ghu_ y", "the glen-side",
             "n" + "a" * 22 + ".", "ac" + "0" * 31, "right_now", "English-speaking gh_"]
    for _ in range(20_000):
        texts.append("".join(rng.choice(pieces) if rng.random() < 0.3 else rng.choice(
            "abcdeghklmnoprstuxyz -_.:/") for _ in range(rng.randint(1, 40))))
    for text in texts:
        assert secrets._screened(text) == bool(secrets._SCREEN.search(text)), text
