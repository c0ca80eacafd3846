"""Finding secrets in text, and redacting them before the text is kept anywhere.

A key pasted into a chat must not spread: not into the message store and its search index, not
into summaries, the context file, extraction or summary model calls, nor ``hermes.log``. A
message is redacted when it is recorded, so everything downstream only ever sees the redacted
text. Each secret is replaced by a short marker that says what was there without saying what it
was: ``[redacted openai key …a1f3]`` (the last four characters of a long token, as a provider's
own dashboard shows them; a short secret such as a PIN or a password gets no fingerprint at all,
because four characters of it, or a hash, would give it away).

Detection is patterns, no model. The provider-token shapes come from the ``detect-secrets``
plugins (Yelp's maintained list: AWS, GitHub, GitLab, Slack, Stripe, npm, JWT, private keys ...),
used as patterns only: its scanning engine is built for source files (2.6 ms a line and many false
positives on prose, measured), its verifiers call the internet. Hermes adds what chat text needs
and the plugins miss: newer token shapes (``sk-proj-``, ``github_pat_``, ``hf_``, bare ``npm_``),
passwords and PINs in "my password is ..." phrasing, card numbers (Luhn-checked), national id
shapes, and "the API key for X is ...".

Every rule runs in time linear in its text (issue 30: one pattern took 120 s on 100k characters
and never finished a 2 MB attachment): no quantifier re-scans what another start scanned
(possessive runs, the first candidate of a run tried and a failed run consumed, gaps bounded),
and a rule starts with a literal where it can, so ``re`` jumps to its candidates. Case-insensitive
rules run on a case-folded copy (``_fold``) for the same reason. ``scripts/stress_redaction.py``
measures it. A text dense with secrets (2 MB of card numbers: 100k findings) is bounded by the
work per match, so a match is a tuple of ints until the overlaps are gone, the checks run only
where a cheap test cannot say no, and a match inside one already found is not checked again
(tests/test_secrets_linear.py counts the Python calls a secret costs). Where it runs: a message
is redacted before its write transaction opens (``SessionStore.append``, an import's batch is
parsed and redacted before its transaction), so it never holds the write lock; on the daemon it
runs on the event loop with the turn, which the size limit on every way in (a message is at most
``MAX_MESSAGE_CHARS``) keeps to milliseconds.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import dataclasses
import functools
import json
import logging
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REDACTED = "[redacted"
# Never read a marker Hermes wrote as a secret of its own (redaction is idempotent).
_NOT_MARKER = r"(?!\[redacted)"


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret in a text: what kind, and where (``text[start:end]`` is the secret)."""

    kind: str
    start: int
    end: int
    value: str

    @property
    def marker(self) -> str:
        """``[redacted openai key …a1f3]``: the kind, and the end of a long token."""
        return _marker(self.kind, self.value)


def _marker(kind: str, value: str) -> str:
    if kind == "card number":
        tail = value[-4:]
        if tail.isascii() and tail.isdecimal():  # (nearly every card: no separator among them)
            return f"{REDACTED} card number …{tail}]"
        digits = value.replace(" ", "").replace("-", "")  # what the card rule finds
        if not (digits.isascii() and digits.isdecimal()):  # (a span that grew over more)
            digits = "".join(filter(str.isdecimal, value))  # what \d is
        return f"{REDACTED} card number …{digits[-4:]}]"
    if kind in _NO_FINGERPRINT:
        return f"{REDACTED} {kind}]"
    compact = value.strip()
    if len(compact) >= 16 and "\n" not in compact:
        return f"{REDACTED} {kind} …{compact[-4:]}]"
    return f"{REDACTED} {kind}]"


_NO_FINGERPRINT = {"password", "PIN", "national id", "private key", "password in a URL"}
_PLAIN_MARKERS = {kind: f"{REDACTED} {kind}]" for kind in _NO_FINGERPRINT}


@dataclass(frozen=True)
class _Rule:
    """One pattern of the screen. Every pattern runs in time linear in its text (no quantifier
    whose failure re-scans what another start already scanned: possessive runs, starts anchored
    at the first candidate of a run, bounded gaps) and starts with a literal where it can, so
    that ``re`` skips to its candidates instead of trying every position."""

    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0  # which group is the secret
    check: Callable[[str], bool] | None = None
    # how much of the matched group is the secret (0: none of it), for a rule that captures
    # more than it needs: from the text, the text the pattern ran on and the group's span
    measure: Callable[[str, str, int, int], int] | None = None
    # written in lower case for the case-folded text (_fold): a case-insensitive rule whose
    # literals ``re`` can search for (``(?i)`` makes it try every position)
    folded: bool = False
    # where the secret starts, from the text the pattern ran on and the match: for a rule that
    # finds its literal first and reads what comes before it (None: no secret here)
    begin: Callable[[str, re.Match[str]], int | None] | None = None
    # the secret starts this many characters before the group (a prefix the pattern searched
    # for and read back in a lookbehind, or a prefix outside a group that says the run was no
    # token when it did not match)
    back: int = 0
    # a finder of its own, for what a pattern alone cannot do in linear time: from the text and
    # the text the pattern runs on
    spans: Callable[[str, str], Iterable[tuple[int, int]]] | None = None
    # substrings of which the text (folded for a folded rule) holds one if the rule can match:
    # a text without any skips the rule
    needs: tuple[str, ...] = ()
    # every match holds a digit (``\d``): a text without one skips the rule (a pattern that
    # starts with a class tries every position: 15-70 ms on 2 MB)
    digit: bool = False
    # literals one of which starts every match (in the text the pattern runs on), read from the
    # pattern (_leading_literals) for a pattern that starts with an alternation of them: on a
    # text where they are rare the pattern is tried only where they are (_matches)
    cues: tuple[str, ...] = ()
    # with cues: a match starts where the run of these characters that holds its cue starts
    # (the cue is inside a name: "DB_PASSWORD=")
    cue_run: str = ""
    # its spans overlap one another where it is dense (the six words read after each "pw:"):
    # each run of them handed on as two (_chained)
    chained: bool = False


def _fold(text: str) -> str:
    """``text`` with every character that ``(?i)`` matches to a lower-case ASCII letter made that
    letter, and nothing else changed in a way a pattern of this module can see (the same
    length, so spans carry over): ``str.lower`` but for "İ" (two characters in lower case),
    "ſ" and "ı" (which ``(?i)`` reads as "s" and "i", and lower leaves as they are)."""
    if text.isascii():
        return text.lower()
    return text.replace("İ", "i").lower().replace("ſ", "s").replace("ı", "i")


def _run_start(text: str, end: int, chars: str) -> int:
    """Where the run of ``chars`` that ends at ``end`` starts (linear in the run's length)."""
    size = 64
    while True:
        low = max(0, end - size)
        window = text[low:end]
        kept = len(window.rstrip(chars))
        if kept or low == 0:
            return low + kept
        size *= 4


def _after_word_start(length: int) -> str:
    """A lookbehind for just after a literal of ``length`` characters that says the literal
    starts a word (what ``\\b`` before it says; placed after it, ``re`` can search for the
    literal)."""
    return rf"(?<!\w.{{{length}}})"


# -- detect-secrets' patterns ------------------------------------------------------------------

# The plugins that fit chat text. Left out: the keyword and high-entropy scanners (built for
# source code, they flag ordinary words), public IP addresses (not secrets in a conversation),
# Artifactory (its "AP[0-9A-F]..." shape matches capitalised words), Cloudant, IBM and Softlayer
# (assignment patterns written for config files, covered by the key-assignment rule below).


def _jwt_is_valid(token: str) -> bool:
    # detect-secrets' own check, and the header and payload must decode to JSON (its check
    # decoded them too, the same way unless a part's length leaves 3 over 4: it pads "===")
    from detect_secrets.plugins.jwt import JwtTokenDetector

    if not (_jwt_header_may_be_json(token) and JwtTokenDetector.is_formally_valid(token)):
        return False
    parts = token.split(".", 2)
    if len(parts) < 2:
        return False
    return (len(parts[0]) % 4 != 3 and len(parts[1]) % 4 != 3) or _jwt_has_json(token)


_JSON_SPACE = b" \t\n\r"
_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _jwt_header_may_be_json(token: str) -> bool:
    """False when the header (what starts the token, up to its first dot) is certainly no JSON:
    it decodes to a "{" that no "}" closes. A text dense with "eyJ..." that is no token spent
    ~10 us on each in the full checks (an exception from a decoder each time)."""
    header = token.partition(".")[0]
    if len(header) <= _HEADER_KEPT:
        return _kept_header_may_be_json(header)
    return _header_may_be_json(header)


# Tokens of one issuer share their header ({"alg":...,"typ":"JWT"}: no secret in it), so a
# short one's verdicts are kept (a text dense with tokens decoded it twice a token, ~3 us); the
# payload, which may be one, is never kept.
_HEADER_KEPT = 200


def _header_may_be_json(header: str) -> bool:
    try:  # base64.urlsafe_b64decode without its layers of Python
        decoded = binascii.a2b_base64(header.encode("ascii").translate(_URLSAFE)
                                      + b"=" * (-len(header) % 4))
    except ValueError:
        return True  # the full check decides (and says no)
    return not decoded.lstrip(_JSON_SPACE).startswith(b"{") or (
        decoded.rstrip(_JSON_SPACE).endswith(b"}"))


def _jwt_has_json(token: str) -> bool:
    parts = token.split(".")
    if len(parts) < 2 or not _jwt_header_may_be_json(token):
        return False
    header = parts[0]
    return ((_kept_is_json_part(header) if len(header) <= _HEADER_KEPT else _is_json_part(header))
            and _is_json_part(parts[1]))


def _is_json_part(part: str) -> bool:
    padded = part + "=" * (-len(part) % 4)
    try:
        json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError):
        return False
    return True


_kept_header_may_be_json = functools.lru_cache(maxsize=64)(_header_may_be_json)
_kept_is_json_part = functools.lru_cache(maxsize=64)(_is_json_part)


def _lazy_requests() -> None:
    """Let detect-secrets ``import requests`` without running it: its plugins use requests only
    in their verifiers (which call the internet; Hermes never calls them), and running it was 80
    of the 100 ms of CPU that loading the plugins cost each `hermes ask` or search that redacts
    (the past messages a turn recalls are redacted again). Until then ``requests`` is a stand-in
    module: the first attribute anything reads from it imports the real one, which from then on
    is the module everyone gets. (importlib's LazyLoader cannot do this: the next ``import
    requests`` reads ``__spec__`` and so runs the module at once.)"""
    import importlib
    import importlib.util
    import sys
    import types

    if "requests" in sys.modules:
        return
    spec = importlib.util.find_spec("requests")
    if spec is None:
        return  # detect-secrets will say so itself
    stand_in = types.ModuleType("requests")
    stand_in.__spec__ = spec

    def real(name: str) -> object:
        if sys.modules.get("requests") is stand_in:
            del sys.modules["requests"]
        return getattr(importlib.import_module("requests"), name)

    stand_in.__getattr__ = real  # type: ignore[method-assign]  # PEP 562
    sys.modules["requests"] = stand_in


def _plugin_rules() -> list[_Rule]:
    # Imported on first use: detect-secrets costs about 20 ms (with requests not run, see
    # _lazy_requests), which a command that never looks at a secret should not pay at start.
    _lazy_requests()
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    plugins: list[tuple[type, str]] = [
        (AWSKeyDetector, "aws key"),
        (AzureStorageKeyDetector, "azure storage key"),
        (BasicAuthDetector, "password in a URL"),
        (DiscordBotTokenDetector, "discord token"),
        (GitHubTokenDetector, "github token"),
        (GitLabTokenDetector, "gitlab token"),
        (JwtTokenDetector, "jwt"),
        (MailchimpDetector, "mailchimp key"),
        (NpmDetector, "npm token"),
        (OpenAIDetector, "openai key"),
        (PrivateKeyDetector, "private key"),
        (PypiTokenDetector, "pypi token"),
        (SendGridDetector, "sendgrid key"),
        (SlackDetector, "slack token"),
        (SquareOAuthDetector, "square key"),
        (StripeDetector, "stripe key"),
        (TelegramBotTokenDetector, "telegram token"),
        (TwilioKeyDetector, "twilio key"),
    ]
    rules = []
    for plugin, kind in plugins:
        for pattern in plugin.denylist:  # type: ignore[attr-defined]
            check = _jwt_is_valid if plugin is JwtTokenDetector else None
            rules.append(_plugin_rule(kind, pattern, check))
    return rules


# The plugins' patterns as reviewed for linear time (detect-secrets 1.5.0). Each is used as it
# is (None) or replaced by the same pattern written to run in linear time and to start with a
# literal; a pattern not listed here (a new detect-secrets) is refused by the test that reads
# this table (tests/test_secrets_linear.py) until someone has read it.
def _preceded_by(pattern: re.Pattern[str], reach: int,
                 ) -> Callable[[str, re.Match[str]], int | None]:
    """For a rule found by its secret: the secret's start (its group's) when ``pattern``
    matches in the ``reach`` characters before the match and ends where the match starts."""
    def begin(text: str, match: re.Match[str]) -> int | None:
        start = match.start(match.re.groups and 1)
        if pattern.search(text, max(0, start - reach), start) is None:
            return None
        return start
    return begin


# 40 characters of a key, alone (folded)
_AWS_SECRET = re.compile(r"[a-z0-9/+](?<![a-z0-9/+].)[a-z0-9/+]{39}(?![a-z0-9/+])")
_AWS_BEFORE = _preceded_by(re.compile(
    r"aws" + _after_word_start(3) + r".{0,20}(?:secret|key).{0,20}\Z"), 49)
_AWS_REACH = 49  # the most characters between an "aws" and its secret's start
_AWS_DENSE = 400  # an "aws" every this many characters or less: the whole text is searched


def _aws_secret_spans(_text: str, folded: str) -> list[tuple[int, int]]:
    """What _AWS_SECRET finds that "aws ... secret/key" precedes, searched for only after each
    "aws" (the whole text cost ~40 ms on 2 MB that holds an "aws" by chance). A window reads
    from an "aws" to 49 characters after it where a secret may start and 41 more (its 40
    characters and the one after them that says the run ends); overlapping windows are one."""
    size = len(folded)
    if folded.count("aws") * _AWS_DENSE > size:
        windows = [(0, size, size)]
    else:
        windows = []
        position = folded.find("aws")
        while position >= 0:
            last = position + _AWS_REACH  # the latest start this window may find
            if windows and position < windows[-1][1]:
                windows[-1] = (windows[-1][0], last + 41, last)
            else:
                windows.append((position, last + 41, last))
            position = folded.find("aws", position + 1)
    spans = []
    for low, high, last in windows:
        for match in _AWS_SECRET.finditer(folded, low, high):
            start = match.start()
            if start > last:
                break
            if _AWS_BEFORE(folded, match) is not None:
                spans.append((start, match.end()))
    return spans


# a telegram token's ":" and what follows it, with 8 digits before it
_TELEGRAM_TAIL = re.compile(r":(?<=\d{8}:)[0-9A-Za-z_-]{35}")


def _telegram_spans(text: str, _subject: str) -> Iterable[tuple[int, int]]:
    """What ``\\d{8,10}:[0-9A-Za-z_-]{35}`` finds: from each ":" found, the run of up to 10
    digits before it, never reaching back into the token found before (the search went on
    from its end)."""
    last = 0
    for match in _TELEGRAM_TAIL.finditer(text):
        colon = match.start()
        start = colon
        while start > last and colon - start < 10 and text[start - 1].isdecimal():  # \d
            start -= 1
        if colon - start >= 8:
            yield start, match.end()
            last = match.end()


_C = "[A-Za-z0-9=_-]"      # detect-secrets' [A-Za-z0-9-_=] ("9-_" is no range there)
_C_OPENAI = "[A-Za-z0-9_-]"
_PLUGIN_PATTERNS: dict[str, _Rule | None] = {
    # literals, and bounded runs after a literal
    "(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}": None,
    "AccountKey=[a-zA-Z0-9+\\/=]{88}": None,
    "[MNO][a-zA-Z\\d_-]{23,25}\\.[a-zA-Z\\d_-]{6}\\.[a-zA-Z\\d_-]{27}": None,
    "(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}": None,
    "(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)": None,
    "GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)": None,
    "glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)": None,
    "glimt-[A-Za-z0-9_\\-]{25}(?!\\w)": None,
    "glptt-[A-Za-z0-9_\\-]{40}(?!\\w)": None,
    "glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)": None,
    "gloas-[A-Za-z0-9_\\-]{64}(?!\\w)": None,
    "BEGIN DSA PRIVATE KEY": None,
    "BEGIN EC PRIVATE KEY": None,
    "BEGIN OPENSSH PRIVATE KEY": None,
    "BEGIN PGP PRIVATE KEY BLOCK": None,
    "BEGIN PRIVATE KEY": None,
    "BEGIN RSA PRIVATE KEY": None,
    "BEGIN SSH2 ENCRYPTED PRIVATE KEY": None,
    "PuTTY-User-Key-File-2": None,
    "pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}": None,
    "pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}": None,
    "SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}": None,
    "sq0csp-[0-9A-Za-z\\\\\\-_]{43}": None,
    "(?:r|s)k_live_[0-9a-zA-Z]{24}": None,
    # from every digit, 8 to 10 digits were tried: found by its ":", the digits read back
    "\\d{8,10}:[0-9A-Za-z_-]{35}": _Rule("telegram token", _TELEGRAM_TAIL,
                                       spans=_telegram_spans),
    "AC[a-z0-9]{32}": None,
    "SK[a-z0-9]{32}": None,
    # the user part stops at ":", the password at "@": one scan after each "://"
    "://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:"
    "([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@": None,
    # "xoxb-" then digit groups: each "\\d+-" ends at its own dash
    "xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+": _Rule(
        "slack token", re.compile(r"xox[abposr]-(?:\d++-)+[a-z0-9]+"), folded=True),
    "https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+": _Rule(
        "slack token", re.compile(
            r"https://hooks\.slack\.com/services/t[a-z0-9_]++/b[a-z0-9_]++/[a-z0-9_]++"),
        folded=True),
    # (?i) made every position a start; folded, "aws" is searched for
    "aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?"
    "[\\'\\\"]([0-9a-zA-Z/+]{40})[\\'\\\"]": _Rule(
        "aws key", re.compile(r"['\"]([0-9a-z/+]{40})(?=['\"])"), 1, folded=True, needs=("aws",),
        begin=_preceded_by(re.compile(
            r"aws.{0,20}(?:key|pwd|pw|password|pass|token).{0,20}['\"]\Z"), 52)),
    # 32 characters, then "-us": found by "-us", its 32 read back
    "[0-9a-z]{32}-us[0-9]{1,2}": _Rule(
        "mailchimp key", re.compile(r"-us(?<=[0-9a-z]{32}-us)[0-9]{1,2}"),
        back=32),
    # Every "eyJ" of a run re-scanned the run to its end: the first of a run is tried, and a
    # run that is no token is consumed whole (every later "eyJ" in it ends at the same place)
    "eyJ[A-Za-z0-9-_=]+\\.[A-Za-z0-9-_=]+\\.?[A-Za-z0-9-_.+/=]*?": _Rule(
        "jwt", re.compile(rf"eyJ(?:(?P<t>{_C}++\.{_C}++\.?)|{_C}*+)"), "t",
        back=3),
    # the first "sk-" of a run is tried (a later one can only find less), and a run that
    # holds no key is consumed whole
    "sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}": _Rule(
        "openai key", re.compile(
            rf"sk-(?:(?P<t>{_C_OPENAI}*[A-Za-z0-9]{{20}}T3BlbkFJ[A-Za-z0-9]{{20}})"
            rf"|{_C_OPENAI}*+)"), "t",
        back=3),
    # ".+" backed off to every "/" of the line from every "//": one try from the line's first
    # "//" (the match ends at a line's end, so every search starts at one)
    "\\/\\/.+\\/:_authToken=\\s*((npm_.+)|([A-Fa-f0-9-]{36})).*": _Rule(
        "npm token", re.compile(
            r"(?m)^(?>[^\n]*?//).+/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*"), 1,
        needs=("/:_authToken=",)),
}


def _plugin_rule(kind: str, pattern: re.Pattern[str],
                 check: Callable[[str], bool] | None) -> _Rule:
    if pattern.pattern not in _PLUGIN_PATTERNS:
        # Not reviewed: used as detect-secrets wrote it (the test says so before a release).
        return _Rule(kind, pattern, 1 if pattern.groups else 0, check)
    rule = _PLUGIN_PATTERNS[pattern.pattern]
    if rule is None:
        return _Rule(kind, pattern, 1 if pattern.groups else 0, check)
    return dataclasses.replace(rule, check=check) if check is not None else rule


# -- what chat text needs beyond the plugins -----------------------------------------------------


_LUHN_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


# a digit's byte to its doubled digit's (Luhn): summed as bytes, in C, not a call a digit
_LUHN_DOUBLED_BYTE = bytes.maketrans(b"0123456789", bytes(48 + d for d in _LUHN_DOUBLED))


def luhn_ok(number: str) -> bool:
    digits = number.replace(" ", "").replace("-", "")
    if not (digits.isascii() and digits.isdigit()):
        digits = "".join(str(int(d)) for d in number if d.isdecimal())  # what \d is
    if not 13 <= len(digits) <= 19:
        return False
    raw = digits.encode("ascii")
    total = sum(raw[-1::-2]) + sum(raw[-2::-2].translate(_LUHN_DOUBLED_BYTE)) - 48 * len(raw)
    return total % 10 == 0


def _token_like(value: str) -> bool:
    """A value after "the API key is" that looks like a key, not like a word of prose."""
    if len(value) >= 20:
        return True
    return _DIGIT.search(value) is not None or _MIXED_OR_SYMBOL.search(value) is not None


_DIGIT = re.compile(r"\d")
_MIXED_OR_SYMBOL = re.compile(r"[a-z][A-Z]|[_\-+/=]")


# Words that describe a password rather than being one ("the password is wrong").
_DESCRIPTIVE = {
    "a", "an", "the", "my", "your", "his", "her", "their", "our", "its", "this", "that", "same",
    "not", "no", "too", "very", "really", "quite", "still", "now", "also", "just", "already",
    "wrong", "right", "correct", "incorrect", "invalid", "valid", "required", "needed", "optional",
    "expired", "expiring", "changed", "reset", "set", "saved", "stored", "kept", "written",
    "managed", "encrypted", "hashed", "hidden", "secret", "private", "safe", "secure", "insecure",
    "strong", "weak", "long", "short", "easy", "hard", "simple", "complex", "empty", "blank",
    "missing", "unknown", "different", "case", "being", "in", "on", "at", "under", "inside",
    "somewhere", "here", "there", "ok", "okay", "fine", "good", "bad", "great", "shared",
    "sent", "given", "known", "forgotten", "lost", "new", "old", "default", "generated",
    "random", "unique", "protected", "printed", "taped", "stuck", "what", "which", "whatever",
    "for", "to", "of", "and", "or", "but", "so", "because", "if", "when", "like", "about",
    "probably", "definitely", "usually", "always", "never", "supposed", "going", "mentioned",
    "listed", "noted", "below", "above", "attached", "included", "something", "nothing",
    "none", "null", "unset", "asdf", "again", "today", "yesterday", "last", "next", "soon",
}
# Describing words that may still open a passphrase of four words or more
_JUDGEMENT = {"correct", "right", "wrong", "strong", "weak", "simple", "easy", "hard", "long",
              "short", "good", "bad", "great", "new", "old", "random", "secret", "private"}

_W = _after_word_start
# "for the home NAS": up to three words naming what the secret is for (never the verb). Runs
# are possessive: a word ends where the space after it starts, so backing off cannot help.
_QUALIFIER = r"(?:(?!(?:is|was|=|:)\s)[\w'.-]++\s++){0,3}?"
_PASSWORD_WORD = (r"(?:password" + _W(8) + "|passphrase" + _W(10) + "|passwd" + _W(6) + "|pwd"
                  + _W(3) + "|pw" + _W(2) + r")\b")
# "password is X", "the wifi password: X", "my password for the NAS is X", "pw: X"; the rest of
# the line is read (in a lookahead: the match ends before it, so a second "password is" on the
# line is found too) and _password_length decides how much of it is the password. Folded.
_PASSWORD_REST = 160  # how much of the line after "password is" _password_length reads
_PASSWORD_AT = (
    _PASSWORD_WORD + r"(?:\s++(?:for|to|of|on)\s++" + _QUALIFIER + ")?"
    r"\s*+(?:is|was|=|:|would be|will be|is now|is still)[ \t]*+[:=\-]?[ \t]*+"
    r"(?=" + _NOT_MARKER + r"\S)"
)
# "password Tr0ub4dor&3", "the wifi passphrase correcthorsebatterystaple": no verb, so only a
# word that looks like a key (_bare_password_length), never "password manager". Folded.
_PASSWORD_BARE = re.compile(
    _PASSWORD_WORD + r"[ \t]++(?=[\"'“]|\S{4})(?=(?P<secret>" + _NOT_MARKER
    + r"[^\s\[][^\n]{0,159}))")
_QUOTED = re.compile(r"\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'|“[^”\n]{1,80}”")
_QUOTES = "\"'“"
_WORD = re.compile(r"\S+")


_BARE_EDGES = ".,;:!?\"'()"
# where the first 1 ... 6 words of a text end
_WORDS_END = [re.compile(rf"\S+(?:\s+\S+){{{more}}}") for more in range(6)]


def _bare(word: str) -> str:
    return word.lower().strip(_BARE_EDGES)


def _password_length(rest: str) -> int:
    """How much of ``rest`` (what follows "password is") is the password; 0: none of it.

    Quoted: the quotes and their content. Otherwise the first word, and the words after it up
    to a describing or linking word ("hunter two", but "hunter2 if you need it" is "hunter2");
    a describing first word ("wrong", "in the vault") is no password, unless it is an adjective
    that opens four words none of which describe or link ("correct horse battery staple").
    """
    if rest[0] in _QUOTES:
        quoted = _QUOTED.match(rest)
        if quoted:
            return quoted.end()
    # The first six words, lowered as _bare lowers them (str.split and \S+ agree on what a
    # word is): a text dense with "password is" measures one rest after another, ~1 us a word
    words = rest.lower().split(None, 6)[:6]
    count = 0  # how many words are the password
    for index, word in enumerate(words):
        if index and word.strip(_BARE_EDGES) in _DESCRIPTIVE:
            break
        count += 1
        if word[-1] in ",;!?" or (word[-1] == "." and index < len(words) - 1):
            break
    if not count:
        return 0
    first = words[0].strip(_BARE_EDGES)
    # (the words after the first are none of them describing: the loop stopped at one)
    if first in _DESCRIPTIVE and not (first in _JUDGEMENT and count >= 4):
        return 0
    end = _WORDS_END[count - 1].match(rest).end()  # type: ignore[union-attr]
    end -= len(words[count - 1]) - len(words[count - 1].rstrip(".,;:!?"))
    return end if end >= 3 else 0


def _one_of(words: Iterable[str]) -> str:
    """An alternation of ``words`` written as a trie ("a(?:nd?|t)|the"): ``re`` tries an
    alternation's branches one by one, so 150 words cost 150 tries a word, the trie a few."""
    words = sorted(set(words))
    if words == [""]:
        return ""
    prefix = os.path.commonprefix(words)
    if prefix:
        rest = _one_of([w[len(prefix):] for w in words])
        return re.escape(prefix) + (f"(?:{rest})" if rest else "")
    branches: dict[str, list[str]] = {}
    for word in words:
        if word:
            branches.setdefault(word[0], []).append(word)
    parts = [_one_of(group) for _, group in sorted(branches.items())]
    if "" in words:
        parts.append("")
    return "|".join(parts)


def _word_in(words: Iterable[str]) -> str:
    """A word (a run of \\S, folded) that ``_bare`` finds in ``words``: edge characters around
    one of them and nothing else."""
    edges = "[" + re.escape(_BARE_EDGES) + "]*+"
    return rf"{edges}(?:{_one_of(words)}){edges}(?!\S)"


# _password_length as part of the pattern (a text dense with "password is" measured each rest
# in Python, ~3 us): the quoted value; else a first word that does not describe and up to five
# more, each after a word that ends no clause (",;!?.") and none describing; else a judgement
# word opening at least three more such; else nothing (the match stands, as before, and
# consumes what it did: "secret" unset, the match's end is where the rest starts). Words stop
# at the line's end. "far": where the last word the measure read ends: after a secret the word
# that stopped it, if any (a describing word; one word more than it read otherwise); with no
# secret the first four (a judgement word with up to two more and the one that stopped them;
# another describing first word is no password whatever follows). When that is past the 160
# characters _password_length reads (it would read a word cut short there), the rest is
# measured by it instead. (Re-reading the first six words for this cost ~0.06 s on 2 MB of
# "pw: X".)
_NEXT_WORD = r"(?<![,;!?.])[^\S\n]++(?!" + _word_in(_DESCRIPTIVE) + r")\S++"
_PASSWORD = re.compile(
    _PASSWORD_AT
    + r"(?=(?:(?P<secret>\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'|“[^”\n]{1,80}”"
    + r"|(?!" + _word_in(_DESCRIPTIVE) + r")\S++(?:" + _NEXT_WORD + "){0,5}"
    + r"|(?=" + _word_in(_JUDGEMENT) + r")\S++(?:" + _NEXT_WORD + "){3,5})"
    + r"(?:[^\S\n]++\S++)?|\S++(?:[^\S\n]++\S++){0,3})(?P<far>))"
)
_FOLDED_AWAY = "İſı"  # what _fold makes a letter and str.lower does not


def _password_spans(text: str, folded: str) -> list[tuple[int, int]]:
    """The passwords _PASSWORD finds, measured as _password_length measures them."""
    # (the rest starts where the match ends; groups by number: secret 1, far 2)
    matches = [(match.end(), match.end(1), match.end(2))
               for match in _matches(_PASSWORD, folded, _cues_of(_PASSWORD))]
    limit = _PASSWORD_REST
    if not text.isascii() and any(c in text for c in _FOLDED_AWAY):
        # a letter that _fold reads otherwise than str.lower: such a rest is measured in Python
        ours = []
        for start, end, far in matches:
            if any(text.find(c, start, far) >= 0 for c in _FOLDED_AWAY):
                far = start + limit
            ours.append((start, end, far))
        matches = ours
    # measured by the pattern: its end marks off (a comprehension: a text dense with them)
    spans = [(start, stop) for start, end, far in matches if far - start < limit and end > start
             for stop in (start + len(text[start:end].rstrip(".,;:!?")),) if stop - start >= 3]
    for start, _end, _far in [match for match in matches if match[2] - match[0] >= limit]:
        line = text.find("\n", start, start + limit)
        length = _password_length(text[start:line if line >= 0 else start + limit])
        if length:
            spans.append((start, start + length))
    return spans


def _bare_password_length(rest: str) -> int:
    """After "password" with no verb: its first word, when it looks like a key (a digit, mixed
    case, a symbol, or 20 characters), else none of it ("password manager", "password reset")."""
    quoted = _QUOTED.match(rest)
    if quoted:
        return quoted.end()
    word = _WORD.match(rest)
    if word is None:
        return 0
    value = word.group().rstrip(".,;:!?)")
    # (_bare and _token_like written out: this runs for every "password" and a word)
    if len(value) < 4 or value.lower().strip(_BARE_EDGES) in _DESCRIPTIVE or "://" in value:
        return 0
    if (len(value) >= 20 or _DIGIT.search(value) is not None
            or _MIXED_OR_SYMBOL.search(value) is not None):
        return len(value)
    return 0


# _bare_password_length as part of the pattern (a text dense with "password X" measured each
# rest in Python, ~3 us): "q" the quoted value; "v" the first word without the ".,;:!?)" that
# end it, "w" where the word ends; "d" the word is a describing one, "u" it holds "://", "s" a
# digit or a symbol (none of them is an end character, so the word holds one when its value
# does). Only a word of letters alone is read in Python (mixed case, on the text itself).
_PASSWORD_BARE_MEASURED = re.compile(
    _PASSWORD_WORD + r"[ \t]++(?=[\"'“]|\S{4})(?=" + _NOT_MARKER + r"[^\s\[])"
    r"(?=(?P<q>\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'|“[^”\n]{1,80}”)?)"
    r"(?=(?P<v>[^\s.,;:!?)]*+(?:[.,;:!?)]++[^\s.,;:!?)]++)*+)[.,;:!?)]*+(?P<w>))"
    r"(?=(?P<d>" + _word_in(_DESCRIPTIVE) + r")?)"
    r"(?=(?P<u>[^\s:]*+(?::(?!//)[^\s:]*+)*+://)?)"
    r"(?=(?P<s>[^\s\d_+/=\-]*+[\d_+/=\-])?)"
)
_MIXED_CASE = re.compile(r"[a-z][A-Z]")


def _bare_password_spans(text: str, folded: str) -> list[tuple[int, int]]:
    """The passwords _PASSWORD_BARE finds, measured as _bare_password_length measures them."""
    if not text.isascii() and any(c in text for c in _FOLDED_AWAY):
        # (a letter that _fold reads otherwise than str.lower: the measure reads the text)
        spans = []
        for match in _PASSWORD_BARE.finditer(folded):
            start, end = match.span("secret")
            length = _bare_password_length(text[start:end])
            if length > 0:
                spans.append((start, start + length))
        return spans
    limit = _PASSWORD_REST
    # (groups by number: q 1, v 2, w 3, d 4, u 5, s 6)
    matches = [(*match.span(2), match.end(1), match.end(3), match.start(4) < 0 > match.start(5),
                match.start(6)) for match in _matches(
                    _PASSWORD_BARE_MEASURED, folded, _cues_of(_PASSWORD_BARE_MEASURED))]
    # a word with a digit or a symbol, or of 20 characters: nothing of Python to run
    spans = [(start, end) for start, end, quoted, ends, plain, symbol in matches
             if quoted < 0 and ends - start < limit and plain
             and (symbol >= 0 and end - start >= 4 or end - start >= 20)]
    mixed = _MIXED_CASE.search
    for start, end, quoted, ends, plain, symbol in matches:
        if quoted >= 0:
            spans.append((start, quoted))
        elif ends - start >= limit:  # longer than the measure reads: it measures
            line = text.find("\n", start, start + limit)
            length = _bare_password_length(text[start:line if line >= 0 else start + limit])
            if length > 0:
                spans.append((start, start + length))
        elif (4 <= end - start < 20 and symbol < 0 and plain
              and mixed(text, start, end) is not None):
            spans.append((start, end))
    return spans


_PIN = re.compile(  # folded
    r"(?:pin" + _W(3) + r"(?:\s*+(?:code|number))?|passcode" + _W(8) + "|unlock code" + _W(11)
    + "|door code" + _W(9) + "|alarm code" + _W(10) + "|gate code" + _W(9) + "|garage code"
    + _W(11) + "|safe code" + _W(9) + "|lock code" + _W(9) + "|security code" + _W(13)
    + "|cvv" + _W(3) + "|cvc" + _W(3) + "|cv2" + _W(3) + r")\b"
    r"\s*+(?:is|was|=|:|-|#)?\s*+(?:is\s++)?(?P<secret>\d{3,8})\b"
)
_CARD = re.compile(r"(?P<secret>[2-6](?<![\d-].)\d{3}(?:[ -]?\d){9,15})(?![\d-])")
# found by its first "-", its first three digits read in lookbehinds (from every digit, "\d"
# first was tried at each; the match starts 3 before the "-")
_SSN = re.compile(
    r"-(?<=\d\d\d-)(?<![\d-]\d\d\d-)(?<!000-)(?<!666-)(?<!9\d\d-)\d\d(?<!00)-\d{4}(?<!0000)"
    r"(?![\d-])")
_UK_NINO = re.compile(r"[A-CEGHJ-PR-TW-Z](?<!\w.)[A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b")
_NATIONAL_ID = re.compile(  # folded
    r"(?:ssn" + _W(3) + "|social" + _W(6) + r" security(?: number)?|national" + _W(8)
    + r" (?:id|insurance)(?: number)?|passport" + _W(8) + r"(?: number| no\.?)?|tax" + _W(3)
    + r" (?:id|number)|nino" + _W(4) + "|personnummer" + _W(12) + "|bsn" + _W(3) + "|aadhaar"
    + _W(7) + "|steuer" + _W(6) + r"-?id|id" + _W(2) + r" number|driver" + _W(6)
    + r"'?s licen[cs]e(?: number)?)\b\s*+(?:is|=|:|#|no\.?)?\s*+(?:is\s++)?"
    r"(?P<secret>" + _NOT_MARKER + r"[a-z0-9][a-z0-9 -]{4,18}[a-z0-9])\b"
)
_ID_PART = re.compile(r"[^\s-]+")
_ID_NUMBER = "0123456789 -"


def _id_length(value: str) -> int:
    """How much of what follows "passport", "tax id", ... is the number (0: none of it): the
    parts (split at spaces and hyphens) up to the first word of three letters or more without a
    digit, when they hold a digit. "passport expires in 2029" names no number; "passport number
    is 123 456 789 and ..." is "123 456 789"."""
    if value[-1:].isdigit() and not value.strip(_ID_NUMBER):
        # ASCII digits, spaces and hyphens that end with a digit: all of it, as the parts
        # would say (a text dense with "ssn 123-45-6789" read each in parts, ~3 us)
        return len(value) if len(value) >= 5 else 0
    return _id_parts_length(value)


def _id_parts_length(value: str) -> int:
    end = 0
    for part in _ID_PART.finditer(value):
        text = part.group()
        if len(text) >= 3 and not any(c.isdigit() for c in text):
            break
        end = part.end()
    taken = value[:end]
    return end if end >= 5 and any(c.isdigit() for c in taken) else 0


# "the API key for Stripe is X", "token: X", "client secret = X" (folded)
_KEY_PHRASE = re.compile(
    r"(?:api" + _W(3) + r"[ _-]?key|access" + _W(6) + r"[ _-]?(?:key|token)|auth" + _W(4)
    + r"[ _-]?token|secret" + _W(6) + r"(?:[ _-]?key)?|client" + _W(6) + r"[ _-]?secret|token"
    + _W(5) + "|license" + _W(7) + " key|recovery" + _W(8) + r" (?:key|code)|bearer" + _W(6)
    + r")\b(?:\s++(?:for|to|of|on)\s++" + _QUALIFIER + ")?"
    r"\s*+(?:is|was|=|:|:=)\s*+['\"]?(?P<secret>" + _NOT_MARKER + r"[^\s'\"]{8,})"
)
# OPENAI_API_KEY=..., DB_PASSWORD=...: an upper-case name (a letter first, a word's start) that
# ends with one of these words. The name is read from its first letter to the first of the words
# that an "=" or ":" follows (a run of name characters is read once, from its start: no other
# position inside it starts a word); the value in a lookahead (a refused name consumes no value).
_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASS", "PWD")  # one of which every name holds
_ENV_NAME = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_ENV_ASSIGNMENT = re.compile(
    r"[A-Z](?<!\w.)[A-Z0-9_]*?(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD)\s*+[=:]\s*+['\"]?"
    r"(?=(?P<secret>" + _NOT_MARKER + r"[^\s'\"]{6,}))"
)


_SCHEME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789+.-"
_LETTER = re.compile(r"[a-z]")


def _scheme_before(text: str, match: re.Match[str]) -> int | None:
    """The password's start when a scheme (``[a-z][a-z0-9+.-]*``, folded) ends at the match's
    "://"."""
    end = match.start()
    if not (end and "a" <= text[end - 1] <= "z"):
        start = _run_start(text, end, _SCHEME_CHARS)
        if _LETTER.search(text, start, end) is None:
            return None
    return match.start("secret")


_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY( BLOCK)?-----")
_PEM_BODY = 4000  # a header with no end: this much after it


def _private_key_spans(text: str, _subject: str) -> Iterable[tuple[int, int]]:
    """Each private key block: its header to the first end line after it, or to 4,000
    characters on. (As a pattern, ".*?-----END" read to the end of the text from every header
    that had none.)"""
    ends: list[int] | None = None
    position = 0
    while (header := _PEM_BEGIN.search(text, position)) is not None:
        if ends is None:
            ends = [m.start() for m in re.finditer("-----END ", text)
                    if _PEM_END.match(text, m.start())]
        index = bisect.bisect_left(ends, header.end())
        end_line = _PEM_END.match(text, ends[index]) if index < len(ends) else None
        end = end_line.end() if end_line else min(len(text), header.end() + _PEM_BODY)
        yield header.start(), end
        position = end


def _of_value(measure: Callable[[str], int]) -> Callable[[str, str, int, int], int]:
    """A rule's measure from one that reads the matched value."""
    return lambda text, _subject, start, end: measure(text[start:end])


_JWT_CHARS = "[A-Za-z0-9_-]"
_OWN_RULES: list[_Rule] = [
    _Rule("private key", _PEM_BEGIN, spans=_private_key_spans),
    _Rule("anthropic key", re.compile(r"sk-ant-" + _W(7) + r"[A-Za-z0-9_\-]{20,}")),
    _Rule("openrouter key", re.compile(r"sk-or-" + _W(6) + r"[A-Za-z0-9_\-]{20,}")),
    _Rule("openai key", re.compile(
        r"sk-" + _W(3) + r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    _Rule("stripe key", re.compile(r"sk_(?:live|test)_" + _W(8) + r"[0-9A-Za-z]{16,}")),
    _Rule("stripe key", re.compile(r"rk_(?:live|test)_" + _W(8) + r"[0-9A-Za-z]{16,}")),
    _Rule("hugging face token", re.compile(r"hf_" + _W(3) + r"[A-Za-z0-9]{30,}")),
    _Rule("npm token", re.compile(r"npm_" + _W(4) + r"[A-Za-z0-9]{36}\b")),
    _Rule("slack token", re.compile(r"xox[abposr]-" + _W(5) + r"[A-Za-z0-9-]{10,}")),
    _Rule("github token", re.compile(r"gh[pousr]_" + _W(4) + r"[A-Za-z0-9]{30,}")),
    _Rule("github token", re.compile(r"github_pat_" + _W(11) + r"[A-Za-z0-9_]{30,}")),
    _Rule("gitlab token", re.compile(r"glpat-" + _W(6) + r"[A-Za-z0-9_\-]{20,}")),
    _Rule("google api key", re.compile(r"AIza" + _W(4) + r"[0-9A-Za-z_\-]{35}\b")),
    # "aws ... secret/key ... <40>": found by its 40 characters, the words looked for in the
    # 49 before them (from every "aws", the gaps were tried at every length)
    _Rule("aws secret key", _AWS_SECRET, spans=_aws_secret_spans, folded=True,
          needs=("aws",)),
    # every "eyJ" of a run re-scanned it; the first is tried, a run that is no token consumed
    _Rule("jwt", re.compile(
        r"eyJ" + _W(3) + rf"(?:(?P<t>{_JWT_CHARS}{{8,}}+\.eyJ{_JWT_CHARS}{{8,}}+\."
        rf"{_JWT_CHARS}*+)|{_JWT_CHARS}*+)"), "t", _jwt_has_json, back=3),
    # found by its "://", the scheme read back (from every letter, "[a-z]+://" re-read the run);
    # nothing to read when a letter ends it (nearly every URL), no scheme when no scheme
    # character does
    _Rule("password in a URL", re.compile(
        r"://(?<=[a-z]://)[^\s/:@]++:(?P<secret>[^\s/@]++)@"), "secret", folded=True),
    _Rule("password in a URL", re.compile(
        r"://(?<=[0-9+.\-]://)[^\s/:@]++:(?P<secret>[^\s/@]++)@"), "secret", folded=True,
          begin=_scheme_before),
    _Rule("password", _PASSWORD, spans=_password_spans, folded=True,
          needs=("pass", "pw"), chained=True),
    _Rule("password", _PASSWORD_BARE, spans=_bare_password_spans, folded=True,
          needs=("pass", "pw")),
    _Rule("api key", re.compile(r"bearer" + _W(6) + r"\s++(?P<secret>[a-z0-9._~+/\-]{20,}=*)"),
          "secret", folded=True),
    _Rule("PIN", _PIN, "secret", folded=True,
          needs=("pin", "passcode", "code", "cvv", "cvc", "cv2"), digit=True),
    _Rule("card number", _CARD, "secret", luhn_ok, digit=True),
    _Rule("national id", _SSN, back=3, digit=True),
    _Rule("national id", _UK_NINO, digit=True),
    _Rule("national id", _NATIONAL_ID, "secret", measure=_of_value(_id_length), folded=True,
          needs=("ssn", "social", "national", "passport", "tax", "nino", "personnummer", "bsn",
                 "aadhaar", "steuer", "id", "driver")),
    _Rule("api key", _KEY_PHRASE, "secret", _token_like, folded=True,
          needs=("key", "token", "secret", "bearer", "code")),
    _Rule("api key", _ENV_ASSIGNMENT, "secret", needs=_ENV_WORDS, cues=_ENV_WORDS,
          cue_run=_ENV_NAME),
]


# -- more phrasings of a password, a wifi key, an AWS secret ------------------------------------

# The screen's own password rules read "password is X", "password: X", "password X" and the
# upper-case ``DB_PASSWORD=X``. These read what they miss (issue 30, "every occurrence is
# redacted"; the review found 21 of 50 phrasings that leaked whole): a value on the line after
# "Password:", a JSON or YAML key (``"password": "X"``), a lower-case name with a prefix
# (``db_password=X``), "pass: X", "password -> X", "my password's X", "password for postgres: X",
# the wifi's key ("wifi key is X", "WiFi: X", "the code for the wifi is X"), an AWS secret key
# after its key id, "credentials: admin / X", and the word in German, French, Spanish and
# Portuguese.
#
# A looser cue needs a stricter value: most of these read one word and keep it only when it looks
# like a key (a digit, mixed case, a symbol, or 20 characters), so "the wifi is slow", "pass: the
# ball" and "mot de passe oublié" stay as they are; only a value quoted under a key's name or
# assigned to a joined name (``db_password=changeme``), where nothing but a value can stand, is
# taken as it is. Every pattern starts with its cue word (the screen skips a rule whose cue the
# text lacks) and reads a bounded stretch after it, so each runs in time linear in its text.


# a value: quoted, or one run of non-space (the rest of the line is not read)
_VALUE = re.compile(r"\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|“[^”\n]{1,200}”|«[^»\n]{1,200}»"
                    r"|`[^`\n]{1,200}`|\S{1,160}")
_OPENING_QUOTES = "\"'“«`"
_VALUE_ENDS = ".,;:!?)]}\"'”»`"
_NO_VALUE = _DESCRIPTIVE | {"true", "false", "yes", "null", "none", "nil", "undefined"}
_KEY_SYMBOL = re.compile(r"[@#$%^&*_+=/\\~|<>]")  # (none of them ends a value: _VALUE_ENDS)


def _looks_like_key(value: str) -> bool:
    """A word that is a key rather than a word of prose: a digit, mixed case, a symbol (not a
    hyphen: "half-broken"), or 20 characters ("correcthorsebatterystaple")."""
    return (len(value) >= 20 or _DIGIT.search(value) is not None
            or _MIXED_CASE.search(value) is not None or _KEY_SYMBOL.search(value) is not None)


# a word with a digit or a symbol, without the punctuation that ends it: the value of nearly
# every match, read without a call of Python (a text dense with "pass: X": ~2 us a match)
_KEY_WORD = re.compile(
    r"(?![\"'“«`\[])(?!\S{0,157}?://)(?=\S{0,159}?[\d@#$%^&*_+=/\\~|<>])\S{1,160}?"
    r"(?=[.,;:!?)\]}\"'”»`]*+(?:\s|\Z))")


def _value_span(text: str, start: int, shortest: int, any_word: bool) -> tuple[int, int] | None:
    """The secret at ``start`` (after its cue): a quoted value whole, or the first word without
    the punctuation that ends it, when it looks like a key (``any_word``: any word that names no
    value, "changeme" in ``db_password=changeme``) and is at least ``shortest`` long."""
    match = _VALUE.match(text, start)
    if match is None or text.startswith(REDACTED, start):
        return None
    value = match.group()
    if value[0] in _OPENING_QUOTES and len(value) >= 2 and match.end() - start > 2:
        inner = value[1:-1].strip()
        if len(inner) < 3 or inner.lower() in _NO_VALUE or inner.startswith(REDACTED):
            return None
        return start, match.end()
    word = value.rstrip(_VALUE_ENDS)
    if (len(word) < shortest or word.lower().strip(_VALUE_ENDS) in _NO_VALUE
            or "://" in word or not (any_word or _looks_like_key(word))):
        return None
    return start, start + len(word)


def _words(*words: str) -> str:
    """An alternation of ``words`` (folded), each a whole word: the literal first, so that ``re``
    searches for it, then a lookbehind that says it starts a word ("_" may come before it, as in
    "db_password"); a pattern that starts with a lookbehind is tried at every position."""
    return "(?:" + "|".join(rf"{re.escape(word)}(?<![a-z0-9].{{{len(word)}}})"
                            for word in words) + ")(?![a-z0-9])"


# "for postgres", "for the home NAS": up to three words naming what the secret is for
_FOR = r"[\w.@'-]{1,40}+(?:[ \t]++[\w.@'-]{1,40}+){0,2}?"

def _rule_spans(pattern: re.Pattern[str], shortest: int = 4,
                ) -> Callable[[str, str], Iterable[tuple[int, int]]]:
    """A ``spans`` finder: each match of ``pattern`` (folded) ends where its value starts; the
    value is read from the text itself (its case says whether it looks like a key). A match
    whose group "any..." took part takes any word."""
    cues = _cues_of(pattern)
    loose = [index for name, index in pattern.groupindex.items() if name.startswith("any")]

    def spans(text: str, folded: str) -> list[tuple[int, int]]:
        key_word = _KEY_WORD.match
        # (comprehensions over ints: a text dense with "pass: X" is 130k matches)
        matched = [match.span() for match in _matches(pattern, folded, cues)]
        words = [key_word(text, end) for _, end in matched]
        found = [(word.start(), word.end()) for word in words
                 if word is not None and word.end() - word.start() >= shortest]
        for start, end in [span for span, word in zip(matched, words, strict=True)
                           if word is None or word.end() - word.start() < shortest]:
            match = pattern.match(folded, start)  # (the same match: read its groups)
            any_word = match is not None and any(match.start(index) >= 0 for index in loose)
            span = _value_span(text, end, shortest, any_word)
            if span is not None:
                found.append(span)
        return found
    return spans


# One rule for password, passwd, passphrase, pwd and "pass" (a text dense with "password" reads
# each once). What the screen's "password: X" rule cannot read: "Password:\nX" (the value on the
# next line), a quoted key ('"password": "X"'), "password's X", "password -> X", "password for
# postgres: X" (its "for ..." stops at a word that ends in ":"), and a name joined to a prefix
# ("db_password=X", "mysql.pwd: X": the screen reads upper-case names only). "pass" is a word of
# prose too ("pass the salt"): "pass: X", "the db pass = X", "pass is X", with a value that looks
# like a key. Groups "any", "any_joined": a quoted key or a joined name, whose value is taken
# whatever word it is. Each "p" is tried once, its alternatives gated by what follows the word
# (a text dense with "password is" fails each at its next character).
_PASSWORDS = re.compile(
    r"p(?<![a-z0-9].)(?:(?<=[_.\-]p)(?P<joined>)|)"
    r"(?:ass(?:word|wd|phrase)|wd|(?P<short>ass))(?![a-z0-9])"
    r"(?:(?P<any>[\"'][ \t]*+[:=])[ \t]*+"
    r"|'s[ \t]++"
    r"|[ \t]*+(?:->|=>|→)[ \t]*+"
    r"|[ \t]*+[:=][ \t]*+(?:\r?\n[ \t]*+|(?(joined)(?P<any_joined>)|(?(short)|(?!))))"
    r"|[ \t]++(?(short)(?:is|was)[ \t]++|(?:for|to|of|on)[ \t]++" + _FOR
    + r"[ \t]*+[:=][ \t]*+))"
    r"(?=\S)")

# German, French, Spanish, Portuguese: "passwort ist X", "mot de passe : X", "contraseña: X",
# "senha do wifi é X" (the word, what it is for, then a verb or a colon)
_PASSWORD_ELSEWHERE = re.compile(
    _words("passwort", "mot de passe", "contraseña", "contrasena", "senha")
    + r"(?:[ \t]++(?:do|da|de|del|du|des|der|für|vom|for)[ \t]++" + _FOR + r")?"
    r"(?:[ \t]*+(?:[:=]|->)|[ \t]++(?:ist|lautet|est|es|é|is))[ \t]*+:?[ \t]*+(?=\S)")

# The wifi's key: "wifi key is X", "the network key for home is X", "WiFi: X", "the wifi is X",
# "the code for the wifi is X" (the screen reads "wifi password is X"). A wifi "is" many things
# ("slow", "down"): the value must look like a key, and be 8 characters (a WPA key's least).
_WIFI_AFTER = (
    r"(?:[ \t]++(?:for|at|in|on|of)[ \t]++" + _FOR + r")?"
    r"(?:[ \t]*+[:=]|[ \t]++(?:is|was))[ \t]*+(?=\S)")
# ("the code for the wifi is X" is "the wifi is X" with more before it)
_WIFI = re.compile(r"wi(?<![a-z0-9].{2})-?fi(?![a-z0-9])"
                   r"(?:[ \t]++(?:key|code|pin|passcode)(?![a-z0-9]))?" + _WIFI_AFTER)
_NETWORK_KEY = re.compile(r"network(?<![a-z0-9].{7})[ \t]++(?:key|code)(?![a-z0-9])"
                          + _WIFI_AFTER)
_WIFI_KEY_LEAST = 8

# "credentials: admin / X", "creds: admin/X": the second of a user and a password
_CREDENTIALS = re.compile(
    _words("credentials", "credential", "creds")
    + r"[ \t]*+[:=][ \t]*+[^\s/|]{1,64}+[ \t]*+[/|][ \t]*+(?=\S)")


def _aws_pair_check(value: str) -> bool:
    """40 characters after a key id are its secret when they mix two of digits, lower and upper
    case (a random key nearly always holds all three; a path or a word does not)."""
    kinds = (any(c.isdigit() for c in value), any(c.islower() for c in value),
             any(c.isupper() for c in value))
    return sum(kinds) >= 2


# "here's my aws key AKIA... and the secret q7Zx...": 40 characters within 60 after a key id
# (the screen reads them after "aws ... secret/key" only). Case kept: an id is upper case.
_AWS_PAIR = re.compile(
    r"A[KS]IA(?<![A-Za-z0-9].{4})[0-9A-Z]{16}(?![0-9A-Za-z])"
    r"[^\n]{0,60}?(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")



def _phrasing_rules() -> list[_Rule]:
    """The rules of this section (added to the screen by ``_rules``)."""
    return [
        _Rule("password", _PASSWORDS, spans=_rule_spans(_PASSWORDS), folded=True,
              needs=("pass", "pwd")),
        _Rule("password", _PASSWORD_ELSEWHERE, spans=_rule_spans(_PASSWORD_ELSEWHERE),
              folded=True, needs=("passwort", "mot de passe", "contrase", "senha")),
        _Rule("password", _WIFI, spans=_rule_spans(_WIFI, _WIFI_KEY_LEAST), folded=True,
              needs=("wifi", "wi-fi")),
        _Rule("password", _NETWORK_KEY, spans=_rule_spans(_NETWORK_KEY, _WIFI_KEY_LEAST),
              folded=True, needs=("network",)),
        _Rule("password", _CREDENTIALS, spans=_rule_spans(_CREDENTIALS), folded=True,
              needs=("cred",)),
        _Rule("aws secret key", _AWS_PAIR, "secret", _aws_pair_check,
              needs=("AKIA", "ASIA")),
    ]


@functools.cache
def _rules() -> tuple[_Rule, ...]:
    return tuple(_with_cues(_with_needs(rule))
                 for rule in (*_OWN_RULES, *_phrasing_rules(), *_plugin_rules()))


def _with_cues(rule: _Rule) -> _Rule:
    """``rule`` searched only at its cues on a text where they are rare, when its pattern starts
    with an alternation of literals that share no prefix (``re`` tries such a pattern at every
    position that holds a first character of one: PIN, national id and key phrase cost ~25 ms
    each on 2 MB of letters; a prefix they share, ``re`` searches for itself)."""
    if rule.spans is not None or rule.cues:
        return rule
    cues = _cues_of(rule.pattern)
    if not cues or os.path.commonprefix(cues):  # (re searches for a common prefix itself)
        return rule
    return dataclasses.replace(rule, cues=cues)


@functools.cache
def _cues_of(pattern: re.Pattern[str]) -> tuple[str, ...]:
    """``_leading_literals`` of ``pattern`` when there are two or more, else ()."""
    cues = _leading_literals(pattern)
    return cues if len(cues) >= 2 else ()


_CUES_MAX = 64  # the most literals a pattern's start is read as


def _leading_literals(pattern: re.Pattern[str]) -> tuple[str, ...]:
    """Literals one of which starts every match of ``pattern`` (() when that is not known), read
    from the parsed pattern: its leading literal characters, through groups without flags of
    their own, alternations of such and zero-width assertions ("pin(?<!\\w.{3})" starts with
    "pin"). Each is as long as the pattern says for sure."""
    if pattern.flags & re.IGNORECASE:
        return ()
    from re import _parser  # type: ignore[attr-defined]  # the parser re compiles with

    def lead(items: Iterable[tuple[object, object]]) -> tuple[set[str], bool]:
        # the literals a match of ``items`` starts with; whether they are the whole of it
        heads = {""}
        for op, value in items:
            if op is _parser.LITERAL:
                heads = {head + chr(value) for head in heads}  # type: ignore[arg-type]
            elif op in (_parser.ASSERT, _parser.ASSERT_NOT, _parser.AT):
                continue  # zero width
            elif op is _parser.IN and all(
                    item is _parser.LITERAL for item, _ in value):  # type: ignore[attr-defined]
                # a class of a few characters ("['\"]"; none negated, no range)
                chars = [chr(char) for _, char in value]  # type: ignore[attr-defined]
                if len(heads) * len(chars) > _CUES_MAX:
                    return heads, False
                heads = {head + char for head in heads for char in chars}
            elif op is _parser.SUBPATTERN and not (value[1] or value[2]):  # type: ignore[index]
                tails, whole = lead(value[3])  # type: ignore[index]
                if len(heads) * len(tails) > _CUES_MAX:
                    return heads, False
                heads = {head + tail for head in heads for tail in tails}
                if not whole:
                    return heads, False
            elif op is _parser.BRANCH:
                branches = [lead(branch) for branch in value[1]]  # type: ignore[index]
                tails = set().union(*(branch for branch, _ in branches))
                if len(heads) * len(tails) > _CUES_MAX:
                    return heads, False
                heads = {head + tail for head in heads for tail in tails}
                if not all(whole for _, whole in branches):
                    return heads, False
            else:
                return heads, False
        return heads, True

    heads, _ = lead(_parser.parse(pattern.pattern, pattern.flags))
    if "" in heads:
        return ()
    # (a literal that starts with another is found with it: "pwd" where "pw" is)
    return tuple(sorted(head for head in heads
                        if not any(head != other and head.startswith(other) for other in heads)))


_CUE_SPARSE = 400  # a cue every this many characters or more: the pattern is tried at each
_CUES_FROM = 4096  # a text this long or longer (a chat message is read by the pattern)
_CUE_SAMPLE = 16  # a long text's first 1/16 holds too many: its cues are not looked for


def _matches(pattern: re.Pattern[str], subject: str, cues: tuple[str, ...],
             cue_run: str = "") -> Iterable[re.Match[str]]:
    """``pattern.finditer(subject)``, for a pattern every match of which starts with one of
    ``cues`` (or, with ``cue_run``, where the run of those characters that holds one starts):
    where they are rare, the pattern tried at each (``re`` reads the whole text at the
    pattern's pace, ~12 ns a character for an alternation of words, ``str.find`` each cue at
    ~0.5 ns). The same matches: finditer's are the first match at or after each end, and each
    starts at a cue."""
    size = len(subject)
    if not cues or size < _CUES_FROM:
        return pattern.finditer(subject)
    most = size // _CUE_SPARSE
    anchors = _anchors(cues)
    if size >= _CUE_SAMPLE * _CUES_FROM:  # (a text dense with them: no search of each in vain)
        sample = subject[:size // _CUE_SAMPLE]
        if sum(sample.count(anchor) for anchor, _ in anchors) * _CUE_SAMPLE > most:
            return pattern.finditer(subject)
    starts: list[int] = []
    find, starts_with = subject.find, subject.startswith
    seen = 0
    for anchor, placed in anchors:
        position = find(anchor)
        while position >= 0:
            seen += 1
            if seen > most:
                return pattern.finditer(subject)
            starts += [position - offset for cue, offset in placed
                       if position >= offset and starts_with(cue, position - offset)]
            position = find(anchor, position + 1)
    starts.sort()
    if cue_run:
        starts = _run_starts(subject, starts, cue_run)
    return _matches_at(pattern, subject, starts)


_ANCHOR_MIN = 4  # the shortest piece of a cue looked for in its place


@functools.cache
def _anchors(cues: tuple[str, ...]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """What to look for to find ``cues``: pieces of them, each with the cues that hold it and
    where (a piece several share is looked for once: "code" for nine of PIN's 13), chosen
    greedily, the piece most uncovered cues hold first, then the longest; a cue shorter than
    four characters is its own piece."""
    left = set(cues)
    chosen = []
    while left:
        pieces = {cue[i:j] for cue in left for i in range(len(cue))
                  for j in range(i + min(_ANCHOR_MIN, len(cue)), len(cue) + 1)}
        piece = max(sorted(pieces), key=lambda p: (sum(p in cue for cue in left), len(p)))
        holders = sorted(cue for cue in left if piece in cue)
        # (a cue may hold its piece twice: each place is a start to try)
        placed = tuple((cue, offset) for cue in holders for offset in range(len(cue))
                       if cue.startswith(piece, offset))
        chosen.append((piece, placed))
        left -= set(holders)
    return tuple(chosen)


def _run_starts(text: str, cues_at: list[int], chars: str) -> list[int]:
    """Where the run of ``chars`` that reaches each of ``cues_at`` (sorted) starts, each once;
    the text is read back from each cue to the one before it, no further (a cue with only
    ``chars`` back to the one before is in its run: nothing new)."""
    starts: list[int] = []
    before = 0  # the cue before this one
    for cue_at in cues_at:
        kept = len(text[before:cue_at].rstrip(chars))
        if kept or not starts:
            starts.append(before + kept)
        before = cue_at
    return starts


def _matches_at(pattern: re.Pattern[str], subject: str,
                starts: list[int]) -> Iterable[re.Match[str]]:
    # (a match is never empty: it starts with a cue; lookbehinds see the text before ``start``)
    match_at = pattern.match
    after = 0
    for start in starts:
        if start < after:
            continue
        match = match_at(subject, start)
        if match is not None:
            yield match
            after = match.end()


def _with_needs(rule: _Rule) -> _Rule:
    """``rule`` skipped on a text without the literal its every match holds: ``str.__contains__``
    reads 2 MB in ~0.2 ms, ``re`` looking for the same literal ~2 ms (40 rules start with one)."""
    if rule.needs:
        return rule
    literal = _required_literal(rule.pattern)
    return dataclasses.replace(rule, needs=(literal,)) if literal else rule


def _required_literal(pattern: re.Pattern[str]) -> str:
    """The longest run of literal characters that every match of ``pattern`` holds ("" when it
    has none it can be sure of): read from the parsed pattern's top level, groups included."""
    if pattern.flags & re.IGNORECASE:
        return ""
    from re import _parser  # type: ignore[attr-defined]  # the parser re compiles with

    runs = [""]

    def walk(items: Iterable[tuple[object, object]]) -> None:
        for op, value in items:
            if op is _parser.LITERAL:
                runs[-1] += chr(value)  # type: ignore[arg-type]
            elif op is _parser.SUBPATTERN and not (value[1] or value[2]):  # type: ignore[index]
                walk(value[3])  # type: ignore[index]  # a group without flags of its own
            elif op is _parser.ATOMIC_GROUP:
                walk(value)  # type: ignore[arg-type]
            else:
                runs.append("")
    walk(_parser.parse(pattern.pattern, pattern.flags))
    return max(runs, key=len)
# Cheap screen: a text with none of these cannot hold a secret any rule finds. Most chat messages
# skip every pattern this way.
_SCREEN = re.compile(
    r"(?i)\d|pass|pw|key|token|secret|bearer|wi-?fi|wlan|contrase|senha|cred"
    r"|sk[-_]|rk_|hf_|npm_|xox|gh[pousr]_|github_pat|glpat"
    r"|gl[a-z]+-|akia|asia|a3t|abia|acca|eyj|begin|putty|://|aiza|sg\.|sq0|accountkey|-us\d"
    r"|\bac[a-z0-9]{32}|\bsk[a-z0-9]{32}|\b[mno][a-z\d_-]{23,25}\."
)
# The same screen, about four times faster on ASCII text (nearly every message; the excerpts of
# past conversations in each turn's prompt are screened line by line): its literal alternatives
# as substring tests of the lowered text, the others as patterns over it. Other text is screened
# by _SCREEN itself: re's case folding differs from str.lower there ("ſ" matches "s").
_SCREEN_DIGIT = re.compile(r"\d")
_SCREEN_WORDS = ("pass", "pw", "key", "token", "secret", "bearer", "wifi", "wi-fi", "wlan",
                 "contrase", "senha", "cred", "sk-", "sk_", "rk_", "hf_",
                 "npm_", "xox", "github_pat", "glpat", "akia", "asia", "a3t", "abia", "acca",
                 "eyj", "begin", "putty", "://", "aiza", "sg.", "sq0", "accountkey")
_SCREEN_LOWERED = re.compile(
    r"gh[pousr]_|gl[a-z]+-|\b(?:ac|sk)[a-z0-9]{32}|\b[mno][a-z\d_-]{23,25}\.")
# A match of _SCREEN_LOWERED holds "gh" and "_", or "gl" and "-", or is a run of 25 characters
# or more without a space (34 of [a-z0-9], or [mno], 23 of [a-z0-9_-] and a dot): a text with
# none of these skips the pattern, which re tries at every position (~10 µs a message line,
# half the screen; "gh" and "gl" alone are in "right" and "English").
_LONG_RUN = 25


def _screened(text: str) -> bool:
    """Whether ``text`` may hold a secret: ``_SCREEN.search(text)``, faster."""
    if not text.isascii():
        return _SCREEN.search(text) is not None
    if _SCREEN_DIGIT.search(text):
        return True
    low = text.lower()
    if any(map(low.__contains__, _SCREEN_WORDS)):
        return True
    if not (("gh" in low and "_" in low) or ("gl" in low and "-" in low)
            or max(map(len, low.split()), default=0) >= _LONG_RUN):
        return False
    return _SCREEN_LOWERED.search(low) is not None


def find_secrets(text: str) -> list[Finding]:
    """Every secret in ``text``, in order, without overlaps (the earliest, then longest, wins)."""
    return [Finding(kind, start, end, text[start:end]) for start, end, kind in _secret_spans(text)]


def _secret_spans(text: str) -> list[tuple[int, int, str]]:
    """``find_secrets`` as (start, end, kind). In a text dense with secrets (2 MB of card
    numbers: 100k findings) the work per match is the cost, so a match is a tuple of ints until
    the overlaps are gone, a rule with nothing to run per match is read in a comprehension, and
    a match inside one that a rule with checks already found is not checked again."""
    if not text or not _screened(text):
        return []
    rules = _rules()
    # (start, -end, rule's index): sorted, the earliest, then the longest, then the first rule
    found: list[tuple[int, int, int]] = []
    # the longest end found for a start: a match inside it can change nothing (the overlap
    # pass drops it), so its check and measure are skipped
    ends: dict[int, int] = {}
    markers = REDACTED in text  # a marker Hermes wrote is never a secret (idempotent)
    folded: str | None = None
    digits: bool | None = None
    for index, rule in enumerate(rules):
        subject = text
        if rule.folded:
            if folded is None:
                folded = _fold(text)
            subject = folded
        if rule.needs and not any(map(subject.__contains__, rule.needs)):
            continue
        if rule.digit:
            if digits is None:  # (an ASCII text: ten searches for a byte beat one for \d)
                digits = (any(map(text.__contains__, "0123456789")) if text.isascii()
                          else _SCREEN_DIGIT.search(text) is not None)
            if not digits:
                continue
        if rule.spans is not None:
            spans = rule.spans(text, subject)
            found += (_chained(spans, index) if rule.chained
                      else [(start, -end, index) for start, end in spans])
            continue
        group, begin, check, measure = rule.group, rule.begin, rule.check, rule.measure
        matches = _matches(rule.pattern, subject, rule.cues, rule.cue_run)
        if begin is None and measure is None:
            # nothing but a check to run a match: read in comprehensions, no loop of Python
            back = rule.back
            spans = [(start - back, end) for match in matches
                     for start, end in (match.span(group),) if start < end]
            if markers:
                spans = [(start, end) for start, end in spans
                         if not text.startswith(REDACTED, start, end)]
            if check is not None:
                ends_get = ends.get
                spans = _checked([(start, end) for start, end in spans
                                  if ends_get(start, -1) < end], text, check)
                ends.update({start: end for start, end in spans if end > ends_get(start, -1)})
            found += [(start, -end, index) for start, end in spans]
            continue
        for match in matches:
            start, end = match.span(group)
            if start < 0 or end <= start:
                continue
            if begin is not None:
                begun = begin(subject, match)
                if begun is None:
                    continue
                start = begun
            if markers and text.startswith(REDACTED, start, end):
                continue
            if check is not None or measure is not None:
                if ends.get(start, -1) >= end:
                    continue
                if check is not None and not check(text[start:end]):
                    continue
                if measure is not None:
                    length = measure(text, subject, start, end)
                    if length <= 0:
                        continue
                    end = start + length
            found.append((start, -end, index))
            if end > ends.get(start, -1):
                ends[start] = end
    return _without_overlaps(found, rules)


_REPEATS_SAMPLE = 64  # the first this many values of a rule: checked once each when one repeats


def _checked(spans: list[tuple[int, int]], text: str,
             check: Callable[[str], bool]) -> list[tuple[int, int]]:
    """The spans whose value passes ``check``. A text that repeats one secret (a log, 2 MB of
    one card number: 100k Luhn checks, 0.12 s) checks each value once: when the first values
    already repeat one, the values are checked through a table of their verdicts."""
    values = [text[start:end] for start, end in spans]
    sample = values[:_REPEATS_SAMPLE]
    if len(set(sample)) == len(sample):
        return [span for span, value in zip(spans, values, strict=True) if check(value)]
    verdicts = {value: check(value) for value in dict.fromkeys(values)}
    return [span for span, value in zip(spans, values, strict=True) if verdicts[value]]


def _chained(spans: Iterable[tuple[int, int]], index: int) -> list[tuple[int, int, int]]:
    """One rule's spans as ``found`` entries (start, -end, rule's index), each run of spans that
    overlap one another as two: its first (the longest at its start) and one from the last
    character of that to the run's end. _without_overlaps makes of them what it made of the
    run: whatever other rules found, a span that starts inside the run joins it as before, and
    the run keeps its first span's place in the order (a text dense with "pw: X" is 142k
    overlapping spans: ~0.04 s of entries, sorting and joining)."""
    ordered = sorted(spans)
    found: list[tuple[int, int, int]] = []
    run_start = first_end = run_end = -1
    count = 0  # how many spans the run holds
    for start, end in ordered:
        if start < run_end:
            count += 1
            if end > run_end:
                run_end = end
            if start == run_start and end > first_end:
                first_end = end
            continue
        if count:
            found += _run_entries(run_start, first_end, run_end, index, ordered, count)
        run_start, first_end, run_end, count = start, end, end, 1
    if count:
        found += _run_entries(run_start, first_end, run_end, index, ordered, count)
    return found


def _run_entries(start: int, first_end: int, end: int, index: int,
                 ordered: list[tuple[int, int]], count: int) -> list[tuple[int, int, int]]:
    if end == first_end:  # (the others inside the first: nothing they can change)
        return [(start, -first_end, index)]
    if first_end - 1 > start:
        return [(start, -first_end, index), (first_end - 1, -end, index)]
    # a first span of one character: its run as it was
    at = bisect.bisect_left(ordered, (start,))
    return [(s, -e, index) for s, e in ordered[at:at + count]]


def _without_overlaps(found: list[tuple[int, int, int]],
                      rules: tuple[_Rule, ...]) -> list[tuple[int, int, str]]:
    """Sorted, each span that overlaps the one kept before it joins it (overlapping spans of
    one secret: cover both); the kept span keeps its kind."""
    found.sort()
    kept: list[tuple[int, int, str]] = []
    last_end = -1
    for start, negative_end, index in found:
        end = -negative_end
        if start < last_end:
            if end > last_end:
                kept[-1] = (kept[-1][0], end, kept[-1][2])
                last_end = end
            continue
        kept.append((start, end, rules[index].kind))
        last_end = end
    return kept


@dataclass(frozen=True)
class Redaction:
    text: str
    findings: list[Finding]

    @property
    def markers(self) -> list[str]:
        return [f.marker for f in self.findings]


def redact(text: str) -> Redaction:
    """``text`` with every secret replaced by its marker."""
    findings = find_secrets(text)
    if not findings:
        return Redaction(text, [])
    return Redaction(_replaced(text, [(f.start, f.end, f.kind) for f in findings]), findings)


def redact_text(text: str) -> str:
    spans = _secret_spans(text)
    return _replaced(text, spans) if spans else text


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    pieces = []
    position = 0
    for start, end, kind in spans:
        pieces.append(text[position:start])
        # (the same marker for every value of these: no call a secret)
        pieces.append(_PLAIN_MARKERS.get(kind) or _marker(kind, text[start:end]))
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def redact_json(raw: str) -> str:
    """Redact the strings inside a JSON document (tool-call arguments), keeping it valid JSON;
    text that is not JSON is redacted as text."""
    if not _screened(raw):
        return raw
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return redact_text(raw)
    try:
        redacted = _redact_value(value)
    except RecursionError:
        return redact_text(raw)
    return raw if redacted == value else json.dumps(redacted, ensure_ascii=False)


def _redact_value(value: object) -> object:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_redact_value(v) for v in value]
    if isinstance(value, dict):
        return {redact_text(str(k)): _redact_value(v) for k, v in value.items()}
    return value


_MARKER = re.compile(r"\[redacted [^\]\n]{1,60}\]")


def removed_note(original: str, recorded: str) -> str | None:
    """What the reply tells the user when recording ``original`` redacted secrets from it."""
    if original == recorded:
        return None
    before = set(_MARKER.findall(original))
    markers = list(dict.fromkeys(m for m in _MARKER.findall(recorded) if m not in before))
    if not markers:
        return None
    what = "A secret" if len(markers) == 1 else f"{len(markers)} secrets"
    return (f"({what} in your message {'was' if len(markers) == 1 else 'were'} removed from "
            f"memory and not sent to the model: {', '.join(markers)}. Memory keeps only the "
            "marker; keep the secret in a password manager.)")


class RedactingFilter(logging.Filter):
    """A filter for Hermes' log handlers: a log line never holds a secret (a refused write, a
    model error quoting its input, a traceback's locals all pass through here)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True
