"""More phrasings of a password, a wifi key and an AWS secret (the "more phrasings" rules of
hermes.safety.secrets): each redacted whole, and the near misses beside each left alone
(issue 30)."""

from __future__ import annotations

import pytest

from hermes.safety.secrets import find_secrets, redact_text

DB = "Tr0ub4dor&3"
WIFI = "correcthorsebatterystaple"
AWS_ID = "AKIAZ7QW3ERT5YUI8OPL"
AWS_SECRET = "q7Zx9Lm2Np4Rt6Vb8Hj0Kd3Fg5Sa1We7Yu9Io2Pl"

CAUGHT = [
    # the value on the line after its label (a pasted form, a note)
    (f"Password:\n{DB}", DB),
    (f"password :\n  {DB}\nthanks", DB),
    # a JSON or YAML key
    (f'{{"password": "{DB}", "user": "app"}}', DB),
    (f"db:\n  'password': '{DB}'", DB),
    ('{"db_password": "changeme"}', "changeme"),
    # a lower-case name with a prefix (env files, INI, YAML)
    (f"db_password={DB}", DB),
    ("db_password=changeme", "changeme"),
    (f"mysql.pwd: {DB}", DB),
    (f"smtp-passwd = {DB}", DB),
    # "pass"
    (f"pass: {DB}", DB),
    (f"the db pass = {DB}", DB),
    (f"db_pass={DB}", DB),
    (f"the pass is {DB}", DB),
    # arrows, "password's", "password for X:"
    (f"password -> {DB}", DB),
    (f"password → {DB}", DB),
    (f"my password's {DB}", DB),
    (f"password for postgres: {DB}", DB),
    (f"passphrase for the home NAS: {DB}", DB),
    # the wifi's key
    (f"wifi key is {WIFI}", WIFI),
    (f"the network key for home is {WIFI}", WIFI),
    (f"WiFi: {WIFI}", WIFI),
    (f"the wifi is {WIFI}", WIFI),
    (f"the code for the wifi is {WIFI}", WIFI),
    ("Wi-Fi: Guest-2024!", "Guest-2024!"),
    (f"wi-fi key = {DB}", DB),
    # an AWS secret key after its key id (AKIA: long-term, ASIA: temporary)
    (f"here's my aws key {AWS_ID} and the secret {AWS_SECRET}", AWS_SECRET),
    (f"{AWS_ID} / {AWS_SECRET}", AWS_SECRET),
    # credentials as user / password
    (f"credentials: admin / {DB}", DB),
    (f"creds: admin/{DB}", DB),
    # other languages
    (f"passwort ist {DB}", DB),
    (f"Passwort: {DB}", DB),
    (f"mot de passe : {DB}", DB),
    (f"le mot de passe est {DB}", DB),
    (f"contraseña: {DB}", DB),
    (f"la contraseña es {DB}", DB),
    (f"senha do wifi é {WIFI}", WIFI),
    (f"a senha: {DB}", DB),
]

# Beside each phrasing, what it must not take for a secret
KEPT = [
    "Password:\nForgot it again",
    "Password:\n\nnothing here",
    '{"password": "", "user": "app"}',
    '{"password": null}',
    '{"password": "required"}',
    "db_password=true",
    "pass: the ball",
    "pass the salt",
    "pass: maybe later",
    "a boarding pass: seat 12B",
    "the pass is valid until Friday",
    "password -> see the vault",
    "my password's expired",
    "my password's been changed",
    "password for postgres: ask Dana",
    "the wifi is slow",
    "wifi is down again",
    "the wifi is terrible today",
    "WiFi: connected",
    "WiFi: on",
    "the wifi is 5GHz",
    "the wifi at home is unreliable",
    "the network key for home is in the drawer",
    "wifi key is on the router",
    "the code for the wifi is on the fridge",
    "the network is down",
    "credentials: see the wiki / ask ops",
    "credentials: username / password",
    "mot de passe oublié",
    "mot de passe : oublié",
    "passwort ist geheim",
    "passwort vergessen",
    "contraseña: olvidada",
    "la contraseña es segura",
    "senha do wifi é fácil",
]


@pytest.mark.parametrize(("text", "secret"), CAUGHT)
def test_each_phrasing_is_redacted(text, secret):
    assert find_secrets(text), text
    redacted = redact_text(text)
    assert secret not in redacted
    assert "[redacted " in redacted
    assert redact_text(redacted) == redacted  # markers are never read as secrets


@pytest.mark.parametrize("text", KEPT)
def test_each_near_miss_is_left_alone(text):
    assert find_secrets(text) == [], text


def test_a_value_is_read_to_its_end_and_no_further():
    (found,) = find_secrets(f"pass: {DB}, then log in")
    assert found.value == DB and found.kind == "password"
    (found,) = find_secrets(f'{{"password": "{DB}"}}')
    assert found.value == f'"{DB}"'
    (found,) = find_secrets(f"wifi key is {WIFI}.")
    assert found.value == WIFI
    aws = [f for f in find_secrets(f"my aws key {AWS_ID} and the secret {AWS_SECRET}")
           if f.kind == "aws secret key"]
    assert [f.value for f in aws] == [AWS_SECRET]


def test_a_key_id_alone_gives_no_secret_key():
    kinds = [f.kind for f in find_secrets(
        f"{AWS_ID} is the id; the secret is in the vault, see docs/aws/credentials/readme.md")]
    assert kinds == ["aws key"]  # the id itself, as before
    # 40 characters of one kind (a word, a path) after an id are no secret key
    kinds = [f.kind for f in find_secrets(f"{AWS_ID} in {'abcdefghij' * 4} bucket")]
    assert kinds == ["aws key"]


def test_each_phrasing_rule_is_linear_on_its_own_cues():
    # a text dense with each cue and no value: one pass, no re-reading (2 MB of them is timed
    # by scripts/stress_redaction.py; here 100k must finish at once, not quadratically)
    for cue in ("pass: ", "password's ", "password for a b c ", "wifi is ", "network key ",
                "credentials: a/", "mot de passe : ", "AKIAZ7QW3ERT5YUI8OPL "):
        text = (cue * (100_000 // len(cue)))[:100_000]
        redact_text(text)
