"""Checks on text that is about to become memory: secrets and prompt-injection patterns.

Memory is replayed into every future prompt, so a secret written here leaks into every request
to the model provider, and an injected instruction becomes a permanent one.
"""

from __future__ import annotations

import re
import unicodedata

from hermes.errors import RefusedWrite

_SECRET_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("an OpenAI-style API key",
     re.compile(r"\bsk-(?:proj-|ant-|or-)?[A-Za-z0-9_\-]{20,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token",
     re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("a Discord bot token", re.compile(r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}\b")),
    ("a JSON Web Token",
     re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{20,}")),
    (
        "a password or secret assignment",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|api[_\- ]?key"
            r"|access[_\- ]?token|auth[_\- ]?token)"
            r"\s*(?:is|=|:)\s*['\"]?(?=[^\s'\"]*[0-9!@#$%^&*])[^\s'\"]{6,}"
        ),
    ),
    ("credentials in a URL", re.compile(r"[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@", re.I)),
]

_INJECTION_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "an instruction to ignore earlier instructions",
        re.compile(
            r"(?i)\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|"
            r"earlier|all|any|your)\b[^.\n]{0,20}\b(?:instructions?|prompts?|rules?|directives?)"
        ),
    ),
    (
        "a role hijack",
        re.compile(
            r"(?i)(?:^|\n)\s*(?:system|assistant|developer)\s*:|<\|?(?:im_start|im_end|system)\|?>"
            r"|\[/?(?:INST|SYS)\]|\byou are now\b|\bnew (?:system )?instructions?\s*:"
            r"|\bact as (?:the )?system\b|\bfrom now on,? you (?:must|will|are)\b"
        ),
    ),
]

# Zero-width and bidirectional-control characters hide text from a human reader.
_INVISIBLE = {
    "\u200b", "\u200c", "\u2060", "\ufeff", "\u00ad",
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
}


def find_problem(text: str) -> str | None:
    """Why ``text`` must not become memory, or None when it is fine."""
    for label, pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            return f"it looks like it contains {label}; secrets must not be stored in memory"
    for char in text:
        # U+200D (zero-width joiner) is allowed: emoji sequences need it.
        if char in _INVISIBLE or (unicodedata.category(char) == "Cf" and char != "\u200d"):
            return (
                f"it contains an invisible Unicode character (U+{ord(char):04X}), "
                "a known way to hide instructions"
            )
    for label, pattern in _INJECTION_PATTERNS:
        if pattern.search(text):
            return f"it looks like a prompt injection ({label})"
    return None


def check_text(text: str) -> None:
    """Raise RefusedWrite when ``text`` must not become memory."""
    problem = find_problem(text)
    if problem:
        raise RefusedWrite(f"Refused: {problem}. Nothing was changed.")
