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
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REDACTED = "[redacted"
# Never read a marker Hermes wrote as a secret of its own (redaction is idempotent).
_NOT_MARKER = r"(?!\[redacted)"


@dataclass(frozen=True)
class Finding:
    """One secret in a text: what kind, and where (``text[start:end]`` is the secret)."""

    kind: str
    start: int
    end: int
    value: str

    @property
    def marker(self) -> str:
        """``[redacted openai key …a1f3]``: the kind, and the end of a long token."""
        if self.kind == "card number":
            digits = re.sub(r"\D", "", self.value)
            return f"{REDACTED} card number …{digits[-4:]}]"
        compact = self.value.strip()
        if len(compact) >= 16 and "\n" not in compact and self.kind not in _NO_FINGERPRINT:
            return f"{REDACTED} {self.kind} …{compact[-4:]}]"
        return f"{REDACTED} {self.kind}]"


_NO_FINGERPRINT = {"password", "PIN", "national id", "private key", "password in a URL"}


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0  # which group is the secret
    check: Callable[[str], bool] | None = None
    # how much of the matched group is the secret (0: none of it), for a rule that captures
    # more than it needs
    measure: Callable[[str], int] | None = None


# -- detect-secrets' patterns ------------------------------------------------------------------

# The plugins that fit chat text. Left out: the keyword and high-entropy scanners (built for
# source code, they flag ordinary words), public IP addresses (not secrets in a conversation),
# Artifactory (its "AP[0-9A-F]..." shape matches capitalised words), Cloudant, IBM and Softlayer
# (assignment patterns written for config files, covered by the key-assignment rule below).


def _jwt_is_valid(token: str) -> bool:
    # detect-secrets' own check, and the header and payload must decode to JSON.
    from detect_secrets.plugins.jwt import JwtTokenDetector

    return bool(JwtTokenDetector.is_formally_valid(token)) and _jwt_has_json(token)


def _jwt_has_json(token: str) -> bool:
    parts = token.split(".")
    if len(parts) < 2:
        return False
    try:
        for part in parts[:2]:
            padded = part + "=" * (-len(part) % 4)
            json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError):
        return False
    return True


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
            group = 1 if pattern.groups else 0
            check = _jwt_is_valid if plugin is JwtTokenDetector else None
            rules.append(_Rule(kind, pattern, group, check))
    return rules


# -- what chat text needs beyond the plugins -----------------------------------------------------


def luhn_ok(number: str) -> bool:
    digits = [int(d) for d in re.sub(r"\D", "", number)]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _token_like(value: str) -> bool:
    """A value after "the API key is" that looks like a key, not like a word of prose."""
    if len(value) >= 20:
        return True
    return bool(re.search(r"\d", value)) or bool(re.search(r"[a-z][A-Z]|[_\-+/=]", value))


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

# "for the home NAS": up to three words naming what the secret is for (never the verb)
_QUALIFIER = r"(?:(?!(?:is|was|=|:)\s)[\w'.-]+\s+){0,3}?"
# "password is X", "the wifi password: X", "my password for the NAS is X"; the rest of the line
# is captured and _password_length decides how much of it is the password.
_PASSWORD = re.compile(
    r"(?i)\b(?:pass(?:word|phrase|wd)|pwd)\b"
    r"(?:\s+(?:for|to|of|on)\s+" + _QUALIFIER + ")?"
    r"\s*(?:is|was|=|:|would be|will be|is now|is still)[ \t]*[:=\-]?[ \t]*"
    r"(?P<secret>" + _NOT_MARKER + r"\S[^\n]{0,159})"
)
_QUOTED = re.compile(r"\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'|“[^”\n]{1,80}”")
_WORD = re.compile(r"\S+")


def _bare(word: str) -> str:
    return word.lower().strip(".,;:!?\"'()")


def _password_length(rest: str) -> int:
    """How much of ``rest`` (what follows "password is") is the password; 0: none of it.

    Quoted: the quotes and their content. Otherwise the first word, and the words after it up
    to a describing or linking word ("hunter two", but "hunter2 if you need it" is "hunter2");
    a describing first word ("wrong", "in the vault") is no password, unless it is an adjective
    that opens four words none of which describe or link ("correct horse battery staple").
    """
    quoted = _QUOTED.match(rest)
    if quoted:
        return quoted.end()
    words = [m for m in _WORD.finditer(rest)][:6]
    if not words:
        return 0
    taken: list[re.Match[str]] = []
    for index, word in enumerate(words):
        if index and _bare(word.group()) in _DESCRIPTIVE:
            break
        taken.append(word)
        if word.group()[-1:] in ",;!?" or (word.group().endswith(".") and index < len(words) - 1):
            break
    first = _bare(taken[0].group())
    if first in _DESCRIPTIVE and not (
            first in _JUDGEMENT and len(taken) >= 4
            and all(_bare(w.group()) not in _DESCRIPTIVE for w in taken[1:])):
        return 0
    last = taken[-1].group()
    end = taken[-1].end() - (len(last) - len(last.rstrip(".,;:!?")))
    return end if end >= 3 else 0


_PIN = re.compile(
    r"(?i)\b(?:pin(?:\s*(?:code|number))?|passcode|unlock code|door code|alarm code|gate code"
    r"|garage code|safe code|lock code|security code|cvv|cvc|cv2)\b"
    r"\s*(?:is|was|=|:|-|#)?\s*(?:is\s+)?(?P<secret>\d{3,8})\b"
)
_CARD = re.compile(r"(?<![\d-])(?P<secret>[2-6]\d{3}(?:[ -]?\d){9,15})(?![\d-])")
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")
_UK_NINO = re.compile(r"\b[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b")
_NATIONAL_ID = re.compile(
    r"(?i)\b(?:ssn|social security(?: number)?|national (?:id|insurance)(?: number)?|passport"
    r"(?: number| no\.?)?|tax (?:id|number)|nino|personnummer|bsn|aadhaar|steuer-?id|"
    r"id number|driver'?s licen[cs]e(?: number)?)\b\s*(?:is|=|:|#|no\.?)?\s*(?:is\s+)?"
    r"(?P<secret>" + _NOT_MARKER + r"[A-Z0-9][A-Z0-9 -]{4,18}[A-Z0-9])\b"
)
# "the API key for Stripe is X", "token: X", "client secret = X"
_KEY_PHRASE = re.compile(
    r"(?i)\b(?:api[ _-]?key|access[ _-]?(?:key|token)|auth[ _-]?token|secret(?:[ _-]?key)?"
    r"|client[ _-]?secret|token|license key|recovery (?:key|code)|bearer)\b"
    r"(?:\s+(?:for|to|of|on)\s+" + _QUALIFIER + ")?"
    r"\s*(?:is|was|=|:|:=)\s*['\"]?(?P<secret>" + _NOT_MARKER + r"[^\s'\"]{8,})"
)
# OPENAI_API_KEY=..., DB_PASSWORD=...
_ENV_ASSIGNMENT = re.compile(
    r"\b[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD)\s*[=:]\s*['\"]?"
    r"(?P<secret>" + _NOT_MARKER + r"[^\s'\"]{6,})"
)

_OWN_RULES: list[_Rule] = [
    _Rule("private key", re.compile(
        r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----(?:.*?-----END [A-Z ]*PRIVATE KEY"
        r"( BLOCK)?-----|[\s\S]{0,4000})", re.S)),
    _Rule("anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    _Rule("openrouter key", re.compile(r"\bsk-or-[A-Za-z0-9_\-]{20,}")),
    _Rule("openai key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    _Rule("stripe key", re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    _Rule("hugging face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    _Rule("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    _Rule("slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    _Rule("github token",
          re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    _Rule("gitlab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    _Rule("google api key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    _Rule("aws secret key", re.compile(
        r"(?i)\baws.{0,20}?(?:secret|key).{0,20}?(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})"
        r"(?![A-Za-z0-9/+])"), "secret"),
    _Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
          0, _jwt_has_json),
    _Rule("password in a URL", re.compile(
        r"[a-z][a-z0-9+.-]*://[^\s/:@]+:(?P<secret>[^\s/@]+)@", re.I), "secret"),
    _Rule("password", _PASSWORD, "secret", measure=_password_length),
    _Rule("api key", re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/\-]{20,}=*)"), "secret"),
    _Rule("PIN", _PIN, "secret"),
    _Rule("card number", _CARD, "secret", luhn_ok),
    _Rule("national id", _SSN),
    _Rule("national id", _UK_NINO),
    _Rule("national id", _NATIONAL_ID, "secret", lambda v: bool(re.search(r"\d", v))),
    _Rule("api key", _KEY_PHRASE, "secret", _token_like),
    _Rule("api key", _ENV_ASSIGNMENT, "secret"),
]

@functools.cache
def _rules() -> tuple[_Rule, ...]:
    return (*_OWN_RULES, *_plugin_rules())
# Cheap screen: a text with none of these cannot hold a secret any rule finds. Most chat messages
# skip every pattern this way.
_SCREEN = re.compile(
    r"(?i)\d|pass|pwd|key|token|secret|bearer|sk[-_]|rk_|hf_|npm_|xox|gh[pousr]_|github_pat|glpat"
    r"|gl[a-z]+-|akia|asia|a3t|abia|acca|eyj|begin|putty|://|aiza|sg\.|sq0|accountkey|-us\d"
    r"|\bac[a-z0-9]{32}|\bsk[a-z0-9]{32}|\b[mno][a-z\d_-]{23,25}\."
)
# The same screen, about four times faster on ASCII text (nearly every message; the excerpts of
# past conversations in each turn's prompt are screened line by line): its literal alternatives
# as substring tests of the lowered text, the others as patterns over it. Other text is screened
# by _SCREEN itself: re's case folding differs from str.lower there ("ſ" matches "s").
_SCREEN_DIGIT = re.compile(r"\d")
_SCREEN_WORDS = ("pass", "pwd", "key", "token", "secret", "bearer", "sk-", "sk_", "rk_", "hf_",
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
    if not text or not _screened(text):
        return []
    found: list[Finding] = []
    for rule in _rules():
        for match in rule.pattern.finditer(text):
            try:
                start, end = match.span(rule.group)
            except IndexError:
                start, end = match.span()
            if start < 0 or end <= start:
                continue
            value = text[start:end]
            if value.startswith(REDACTED):
                continue
            if rule.check is not None and not rule.check(value):
                continue
            if rule.measure is not None:
                length = rule.measure(value)
                if length <= 0:
                    continue
                end = start + length
                value = text[start:end]
            found.append(Finding(rule.kind, start, end, value))
    return _without_overlaps(text, found)


def _without_overlaps(text: str, found: Iterable[Finding]) -> list[Finding]:
    kept: list[Finding] = []
    for finding in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if kept and finding.start < kept[-1].end:
            if finding.end > kept[-1].end:  # overlapping spans of one secret: cover both
                last = kept[-1]
                kept[-1] = Finding(last.kind, last.start, finding.end,
                                   text[last.start:finding.end])
            continue
        kept.append(finding)
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
    pieces = []
    position = 0
    for finding in findings:
        pieces.append(text[position:finding.start])
        pieces.append(finding.marker)
        position = finding.end
    pieces.append(text[position:])
    return Redaction("".join(pieces), findings)


def redact_text(text: str) -> str:
    return redact(text).text


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
