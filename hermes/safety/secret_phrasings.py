"""More ways people write a password down, for the secret screen (hermes.safety.secrets).

The screen's own password rules read "password is X", "password: X", "password X" and the
upper-case ``DB_PASSWORD=X``. These read what they miss (issue 30, "every occurrence is
redacted"; the review found 21 of 50 phrasings that leaked whole): a value on the line after
"Password:", a JSON or YAML key (``"password": "X"``), a lower-case name with a prefix
(``db_password=X``), "pass: X", "password -> X", "my password's X", "password for postgres: X",
the wifi's key ("wifi key is X", "WiFi: X", "the code for the wifi is X"), an AWS secret key
after its key id, "credentials: admin / X", and the word in German, French, Spanish and
Portuguese.

A looser cue needs a stricter value: most of these read one word and keep it only when it looks
like a key (a digit, mixed case, a symbol, or 20 characters), so "the wifi is slow", "pass: the
ball" and "mot de passe oublié" stay as they are; only a value quoted under a key's name or
assigned to a joined name (``db_password=changeme``), where nothing but a value can stand, is
taken as it is. Every pattern starts with its cue word (the screen skips a rule whose cue the
text lacks) and reads a bounded stretch after it, so each runs in time linear in its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from hermes.safety.secrets import _DESCRIPTIVE, REDACTED, _cues_of, _matches, _Rule

# a value: quoted, or one run of non-space (the rest of the line is not read)
_VALUE = re.compile(r"\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|“[^”\n]{1,200}”|«[^»\n]{1,200}»"
                    r"|`[^`\n]{1,200}`|\S{1,160}")
_OPENING_QUOTES = "\"'“«`"
_VALUE_ENDS = ".,;:!?)]}\"'”»`"
_NO_VALUE = _DESCRIPTIVE | {"true", "false", "yes", "null", "none", "nil", "undefined"}
_KEY_SYMBOL = re.compile(r"[@#$%^&*_+=/\\~|<>]")  # (none of them ends a value: _VALUE_ENDS)
_KEY_DIGIT = re.compile(r"\d")
_KEY_MIXED = re.compile(r"[a-z][A-Z]")


def _looks_like_key(value: str) -> bool:
    """A word that is a key rather than a word of prose: a digit, mixed case, a symbol (not a
    hyphen: "half-broken"), or 20 characters ("correcthorsebatterystaple")."""
    return (len(value) >= 20 or _KEY_DIGIT.search(value) is not None
            or _KEY_MIXED.search(value) is not None or _KEY_SYMBOL.search(value) is not None)


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



def phrasing_rules() -> list[_Rule]:
    """The rules this module adds to the screen (its ``_rules``)."""
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
