"""The secret screen runs in time linear in its text (issue 30, item 1): hostile texts that made
a rule re-scan what it had scanned (8k characters 0.4-0.9 s, 100k 120 s, a 2 MB attachment
never finished) are read once, and each rewritten rule finds what it found before.

Speed itself is measured in scripts/stress_redaction.py (old and new side by side, 8k ... 2 MB);
the one timed test here is a ceiling a hundred times above the linear time, so that only a rule
that turned quadratic again can fail it."""

from __future__ import annotations

import base64
import importlib
import inspect
import random
import re
import string
import sys
import time

import pytest

from hermes.safety import secrets
from hermes.safety.secrets import find_secrets, redact_text


def test_every_detect_secrets_pattern_was_reviewed_for_linear_time():
    """A new detect-secrets release with a new pattern fails here until someone has read it
    (and added it to secrets._PLUGIN_PATTERNS, as it is or rewritten)."""
    secrets._lazy_requests()
    source = inspect.getsource(secrets._plugin_rules)
    patterns = []
    for module, name in re.findall(r"from (detect_secrets\.plugins\.\w+) import (\w+)", source):
        plugin = getattr(importlib.import_module(module), name)
        patterns += [pattern.pattern for pattern in plugin.denylist]
    assert patterns and [p for p in patterns if p not in secrets._PLUGIN_PATTERNS] == []
    assert [p for p in secrets._PLUGIN_PATTERNS if p not in patterns] == []


def test_folding_is_what_ignorecase_matches_and_keeps_every_position():
    for code in [*range(0x2000), 0x130, 0x131, 0x17F, 0x212A, 0x1E9E, 0xFB05]:
        char = chr(code)
        folded = secrets._fold(char)
        assert len(folded) == 1, hex(code)
        for letter in "abcdefghijklmnopqrstuvwxyz":
            assert bool(re.match(f"(?i){letter}", char)) == (folded == letter), hex(code)
        for cls in (r"\w", r"\s", r"\d"):
            assert bool(re.match(cls, char)) == bool(re.match(cls, folded)), hex(code)
    text = "İstanbul ſecret Kelvin ıi ÄÖÜ password IS"
    assert len(secrets._fold(text)) == len(text)


# Each made one rule of the old screen quadratic (or worse), as the pass found or as read from
# its pattern: a run that every start inside it scanned to its end.
HOSTILE = {
    "password in a URL (the pass's case)": lambda n: "1 " + "y" * n,
    "whitespace after a keyword": lambda n: "pin" + " " * n + "x",
    "whitespace after a verb": lambda n: "the password is" + " " * n + "\n",
    "key phrase, spaces": lambda n: "token" + " " * n + "x",
    "jwt starts in one run": lambda n: "eyJ-" * (n // 4),
    "npm lines of slashes": lambda n: "/" * n,
    "openai starts in one run": lambda n: "sk-" * (n // 3),
    "private key headers without an end": lambda n: "-----BEGIN PRIVATE KEY-----" * (n // 27),
    "a scheme that never ends": lambda n: "a" * n + "1",
    "env names": lambda n: "A" + "_" * n,
    "aws words": lambda n: "aws key " * (n // 8),
}


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_is_screened_in_linear_time(make):
    text = make(100_000)
    start = time.process_time()
    redact_text(text)
    spent = time.process_time() - start
    # Linear: ~0.01-0.05 s here; the old screen took minutes on the first of these.
    assert spent < 3.0


def test_a_secret_after_hostile_runs_is_still_found():
    key = "glpat-xY7zK2mN9pQ4rS6tU8vW"
    for make in HOSTILE.values():
        text = make(5_000) + f"\nmy token is {key} ok"
        assert key not in redact_text(text)


def test_the_rewritten_rules_find_what_the_old_ones_found():
    jwt = ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
           "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
    cases = {
        "-eyJ-eyJ " + jwt: "jwt",
        "see https://alice:hunter2secret@example.com/x": "password in a URL",
        "go to x1.2a3b://alice:hunter2secret@example.com": "password in a URL",
        "name DB_PASSWORD = hunter22": "api key",
        # not a whole word for the env rule; a name joined to a prefix (secrets._phrasing_rules)
        "lowerDB_PASSWORD = hunter22": "password",
        "xPASSWORD=abcdefghij DB_PASSWORD = hunter22": "api key",
        "aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'": "aws secret key",
        "AWS secret key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "aws secret key",
        "mc 0123456789abcdef0123456789abcdef-us12 x": "mailchimp key",
        "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789": "npm token",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----": "private key",
        "pin     is    4821": "PIN",
    }
    for text, kind in cases.items():
        found = find_secrets(text)
        assert [f.kind for f in found][:1] == ([kind] if kind else []), text
    (block,) = find_secrets("a -----BEGIN PRIVATE KEY-----\nAAA\n-----END PRIVATE KEY----- b")
    assert block.value.endswith("-----END PRIVATE KEY-----")
    (mailchimp,) = find_secrets("0123456789abcdef0123456789abcdef-us12")
    assert mailchimp.start == 0 and mailchimp.value.endswith("-us12")
    # telegram: found by its ":", at most 10 digits read back, never into the token before it
    tail = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"
    for text, span in {f"x 123456789012:{tail}": (4, 50),
                       f"1234567:{tail}": None,
                       f"12345678:{tail[:-9]}123456789:{tail}": (0, 44)}.items():
        got = [(f.start, f.end) for f in find_secrets(text) if f.kind == "telegram token"]
        assert got == ([span] if span else []), text
    # social security numbers: found by their first "-"
    for text, found in {"ssn 078-05-1120": True, "1078-05-1120": False, "078-05-11201": False,
                        "000-12-3456": False, "666-12-3456": False, "912-12-3456": False,
                        "078-00-1120": False, "078-05-0000": False, "-078-05-1120": False,
                        "078-05-1120 and 123-45-6789": True}.items():
        kinds = [(f.kind, f.value) for f in find_secrets(text)]
        assert (("national id", "078-05-1120") in kinds or ("national id", "123-45-6789")
                in kinds) == found, text
    # a jwt: detect-secrets' check and the header and payload as JSON, as before (a part whose
    # length leaves 3 over 4 is padded differently by the two)
    assert not find_secrets("eyJhI=joxfQ.eyJhbGciOiJIUzI1NiJ9")


def _dense(template: str, size: int) -> tuple[str, list[str]]:
    """A text of about ``size`` characters, ``template`` filled again and again with different
    values, and the values that must not survive redaction."""
    rng = random.Random(size)
    letters = string.ascii_letters
    text: list[str] = []
    planted: list[str] = []
    while sum(map(len, text)) < size:
        word = "".join(rng.choice(letters) for _ in range(6))
        number = str(rng.randrange(10**7, 10**8))
        digits = [4] + [rng.randrange(10) for _ in range(14)]
        total = sum(d * 2 - 9 * (d > 4) if i % 2 == 0 else d
                    for i, d in enumerate(reversed(digits)))
        card = "".join(map(str, digits + [(10 - total % 10) % 10]))
        values = {"word": word + number[:3], "number": number, "card": card,
                  "token": word * 4, "ssn": f"{rng.randrange(100, 665)}-45-6789"}
        text.append(template.format(**values))
        planted += [v for k, v in values.items() if "{" + k + "}" in template]
    return "".join(text), planted


DENSE = {
    "password is x": "the password is {word} and ",
    "bare passwords": "password {word} ",
    "pw: X": "pw: {word}, ",
    "pins": "pin is {number} ",
    "cards": "{card} ",
    "api keys": "api key is {word}{number} ",
    "env keys": "A_KEY={word} ",
    "URL passwords": "s://u:{word}@h ",
    "ssns": "{ssn} ",
    "tokens": "sk-ant-{token} ",
    "mixed": "pin {number}, {card}, api key is {word}, pw: {word}, B_TOKEN={word}, {ssn}\n",
}


@pytest.mark.parametrize("template", DENSE.values(), ids=DENSE.keys())
def test_every_secret_of_a_text_dense_with_them_is_redacted(template):
    text, planted = _dense(template, 20_000)
    redacted = redact_text(text)
    assert [value for value in planted if value in redacted] == []
    assert redacted.count("[redacted") >= 1


@pytest.mark.parametrize("template", DENSE.values(), ids=DENSE.keys())
def test_a_text_dense_with_secrets_costs_few_python_calls_a_secret(template):
    """The work per match is what made a 2 MB text dense with secrets slow (0.6-2.6 s where
    a text without any takes 0.13): each "password is" measured word by word through helper
    calls, each card number made a record, each "eyJ" that is no token fully decoded. Counted
    in Python function calls, which do not depend on the machine's speed (the screen before:
    3 to 8 a secret found here); scripts/stress_redaction.py has the times."""
    text, _ = _dense(template, 20_000)
    redact_text(text[:200])  # rules compiled, detect-secrets imported
    found = len(find_secrets(text))
    calls = 0

    def count(_frame, event, _arg):
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        redact_text(text)
    finally:
        sys.setprofile(None)
    assert calls / found <= 2.5


def test_the_password_measured_in_the_pattern_is_password_length():
    """"password is X": the rest is measured inside the pattern (a text dense with them measured
    each in Python, ~3 us), as _password_length measures the line's next 160 characters; a rest
    whose first six words reach past those is measured by _password_length itself."""
    rng = random.Random(5)
    words = [*sorted(secrets._DESCRIPTIVE)[:40], "correct", "new", "hunter2", "Tr0ub4dor&3", "x",
             "horse", "battery", "staple", "ab", "(the)", "'a'b'", "wrong.", "two,", "...", "!!",
             '"quoted', 'value"', "İn", "ſame", "w" * 70, "z" * 150]
    checked = 0
    for _ in range(3000):
        rest = "".join(rng.choice(words) + rng.choice([" ", " ", "\t", "  ", "\xa0"])
                       for _ in range(rng.randrange(1, 9)))
        text = f"the password is {rest}\nnext line"
        start = len("the password is ")
        line = text[start:text.index("\n", start)][:secrets._PASSWORD_REST]
        expected = secrets._password_length(line) if line[:1].strip() else 0
        got = [(s - start, e - start) for s, e in secrets._password_spans(
            text, secrets._fold(text)) if s == start]
        assert got == ([(0, expected)] if expected else []), rest
        checked += bool(expected)
    assert checked > 300


def test_the_bare_password_measured_in_the_pattern_is_bare_password_length():
    """"password X" (no verb): the first word is measured inside the pattern (a text dense with
    them measured each in Python), as _bare_password_length measures it: quoted, a key-like
    word (a digit, a symbol, mixed case, 20 characters) without its end marks, no describing
    word, no URL; a word longer than the 160 characters read is measured by it."""
    rng = random.Random(6)
    words = [*sorted(secrets._DESCRIPTIVE)[:30], "Manager", "hunter2", "Tr0ub4dor&3", "abcDef",
             "abcdef", "x", "ab1", "abc1.", "hunter2!!", "(the)", "wrong.", '"a b"', "'q'",
             "“c d”", '"open', "http://x.y", "a:/b", "ab_c", "-=-=", "aBcD)).", "y" * 25,
             "z" * 158 + "!!", "k" * 170 + "1", "ÄbcDé", "abc١٢", ")))))", "ſecret", "İn"]
    checked = 0
    for _ in range(3000):
        rest = rng.choice(words) + rng.choice([" ", "\n", ", ", "  x"]) + rng.choice(words)
        text = f"the password {rest}\nnext"
        start = len("the password ")
        line = text[start:text.index("\n", start)][:secrets._PASSWORD_REST]
        expected = (secrets._bare_password_length(line)
                    if line[:1].strip() and line[0] != "[" and len(line.split()[0]) >= 4
                    or line[:1] in "\"'“" else 0)
        got = [(s - start, e - start) for s, e in secrets._bare_password_spans(
            text, secrets._fold(text)) if s == start]
        assert got == ([(0, expected)] if expected else []), rest
        checked += bool(expected)
    assert checked > 300


def test_a_pattern_tried_at_its_cues_finds_what_it_finds_reading_the_whole_text(monkeypatch):
    """A rule whose pattern starts with an alternation of literals (PIN, national id, the key
    phrase, the password words) or whose match holds one in a name (DB_PASSWORD=) is tried only
    where one of them is, on a long text where they are rare (_matches): the same matches as
    finditer over the whole text, cues inside cues, cues inside an earlier match and cues that
    start no match included."""
    assert {"pin", "unlock code", "lock code", "security code"} <= set(
        secrets._cues_of(secrets._PIN))
    assert secrets._cues_of(secrets._PASSWORD) == ("passphrase", "passwd", "password", "pw")
    monkeypatch.setattr(secrets, "_CUES_FROM", 0)  # every text, however short,
    monkeypatch.setattr(secrets, "_CUE_SPARSE", 1)  # however dense with cues
    rules = [(rule.pattern, rule.folded, rule.cues, rule.cue_run)
             for rule in secrets._rules() if rule.cues]
    rules += [(pattern, True, secrets._cues_of(pattern), "")
              for pattern in (secrets._PASSWORD, secrets._PASSWORD_BARE_MEASURED)]
    assert len(rules) >= 6 and any(cue_run for *_, cue_run in rules)
    # the phrases the rules name, written out (the cues read from the patterns must hold them)
    cues = ["pin", "pin code", "passcode", "unlock code", "door code", "alarm code", "gate code",
            "garage code", "safe code", "lock code", "security code", "cvv", "cvc", "cv2", "ssn",
            "social security", "social security number", "national id", "national insurance",
            "passport", "passport no.", "tax id", "tax number", "nino", "personnummer", "bsn",
            "aadhaar", "steuer-id", "steuerid", "id number", "driver's license", "api key",
            "api_key", "access token", "auth token", "secret", "secret key", "client secret",
            "token", "license key", "recovery key", "recovery code", "bearer", "password",
            "passphrase", "passwd", "pwd", "pw", "sk_live_", "rk_live_", "DB_PASSWORD",
            "MY_API_KEY", "XKEY_AKEY", "A_1_TOKEN", "lowerKEY", "_SECRET", "PASSPWD", "aws key '",
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs", "M", "N"]
    cues += [cue.upper() for cue in cues]
    links = ["", " ", " is ", ": ", " = ", "=", " number ", " code ", " no. ", " for the nas is ",
             "  ", "\t", "\n", "-", "_", "'"]
    values = ["1234", "123-45-6789", "hunter2", "Tr0ub4dor&3", "ab12 cd34 ef56", "abcdefghij1",
              "un", "x", "the", "wrong", "'quoted value'", "", "a" * 40 + "'", "'" + "b" * 40,
              *cues]
    rng = random.Random(30)
    compared = found = 0
    for _ in range(3000):
        text = "".join(rng.choice(cues) + rng.choice(links) + rng.choice(values)
                       + rng.choice(["", " ", ", ", "\n", " and "])
                       for _ in range(rng.randrange(1, 12)))
        for pattern, folded, cues_here, cue_run in rules:
            subject = secrets._fold(text) if folded else text
            whole = [match.regs for match in pattern.finditer(subject)]
            at_cues = [match.regs for match in secrets._matches(
                pattern, subject, cues_here, cue_run)]
            assert at_cues == whole, (pattern.pattern[:40], text)
            compared += 1
            found += len(whole)
    assert compared and found > 2000


def test_a_text_repeating_one_secret_checks_each_value_once():
    """2 MB of one card number was 100k Luhn checks (0.12 s): when a rule's first values
    repeat, each value is checked once, with the same verdicts."""
    text = "4111 1111 1111 1111 x 4111 1111 1111 1112 y " * 50 + "5500 0000 0000 0004"
    spans = [match.span() for match in re.finditer(r"\d{4}(?: \d{4}){3}", text)]
    calls: list[str] = []

    def counted(value: str) -> bool:
        calls.append(value)
        return secrets.luhn_ok(value)

    kept = secrets._checked(spans, text, counted)
    assert kept == [span for span in spans if secrets.luhn_ok(text[slice(*span)])]
    assert len(kept) == 51 and sorted(calls) == sorted(set(calls)) and len(calls) == 3
    varied = [(0, 19), (22, 41)]  # no repeat among the first: checked as they come
    assert secrets._checked(varied, text, counted) == [(0, 19)] and len(calls) == 5


@pytest.mark.parametrize("value", ["4111 1111 1111 1111", "4111-1111-1111-1111",
                                   "4111111111111 1 1 1", "4111 1111 1111 11-1 1",
                                   "4111 1111 1111 111١"])
def test_a_card_marker_shows_the_last_four_digits(value):
    digits = "".join(filter(str.isdecimal, value))  # (an Arabic digit is shown as it is)
    assert secrets._marker("card number", value) == f"[redacted card number …{digits[-4:]}]"


def test_a_rules_overlapping_spans_chained_change_nothing_the_overlap_pass_makes():
    """A rule with a finder of its own hands its overlapping spans to the overlap pass as two
    per run (_chained; 2 MB of "pw: X" is 142k overlapping spans): the findings and their kinds
    are those of every span, whatever other rules found around and inside the run."""
    rules = secrets._rules()
    kinds = {rules[index].kind for index in (3, 20, 40)}
    assert len(kinds) == 3
    rng = random.Random(31)
    chained_away = 0
    for _ in range(20_000):
        size = rng.choice([10, 30, 100])
        own = [(start, start + rng.randint(1, rng.choice([1, 3, 10, 40])))
               for start in (rng.randrange(size) for _ in range(rng.randint(1, 12)))]
        others = [(start, -(start + rng.randint(1, 15)), rng.choice([3, 20, 40]))
                  for start in (rng.randrange(size) for _ in range(rng.randint(0, 6)))]
        index = rng.choice([0, 17, 50])
        every = [(start, -end, index) for start, end in own] + others
        chained = secrets._chained(own, index) + others
        assert (secrets._without_overlaps(chained, rules)
                == secrets._without_overlaps(every, rules)), (own, others, index)
        chained_away += len(every) - len(chained)
    assert chained_away > 20_000


def test_a_national_id_of_digits_is_measured_as_its_parts_measure_it():
    """What follows "ssn", "passport", ... when it is ASCII digits, spaces and hyphens is taken
    whole without reading its parts, as the parts would measure it."""
    rng = random.Random(32)
    taken = 0
    for _ in range(20_000):
        value = "".join(rng.choice("0123456789 --ab\t١") for _ in range(rng.randint(0, 22)))
        assert secrets._id_length(value) == secrets._id_parts_length(value), value
        taken += secrets._id_length(value) == len(value) > 0
    assert taken > 1000


def test_a_jwt_header_is_decoded_once_and_no_payload_is_kept():
    """Tokens of one issuer share their header: its verdicts are kept (a text dense with tokens
    decoded it twice a token); the payload, which may be a secret, is decoded each time and
    never kept, nor a header longer than 200 characters."""
    def part(payload: str) -> str:
        return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")

    secrets._kept_is_json_part.cache_clear()
    secrets._kept_header_may_be_json.cache_clear()
    header = part('{"alg":"HS256","typ":"JWT"}')
    for number in range(20):
        payload = part('{"sub":"' + str(number) + '"}')
        assert secrets._jwt_has_json(f"{header}.{payload}.sig")
    assert secrets._kept_is_json_part.cache_info()[:2] == (19, 1)  # hits, misses
    assert secrets._kept_header_may_be_json.cache_info()[:2] == (19, 1)
    long_header = part('{"alg":"' + "x" * 300 + '"}')
    assert secrets._jwt_has_json(f"{long_header}.{part('{}')}.sig")
    assert not secrets._jwt_has_json(f"{header}.{part('no json')}.sig")
    assert secrets._kept_is_json_part.cache_info().currsize == 1
    assert secrets._kept_header_may_be_json.cache_info().currsize == 1
