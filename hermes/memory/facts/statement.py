"""What the user asked to be remembered, as the fact to store: one function for every surface.

"Remember that my doctor is Dr. Smith", ``/remember``, MCP's ``facts_add``, ``hermes facts
add``: each hands the user's words to :func:`normalise_statement`, which returns the fact's
text. Facts say "the user", so first-person words are rewritten, but only where the rewrite is
certain: a pronoun and a closed class of words after it (``my`` -> ``the user's``, ``I'm`` ->
``the user is``, ``I can``, ``I don't`` -> ``the user doesn't``). A lexical verb after "I" is
never inflected by rule ("I moved" would become "moveds", "I read" is present or past), nor
are "we", "our", words inside quotes or another language's first person: then the user's own
words are kept whole, as ``The user said: "..."`` (:attr:`Statement.verbatim`), and background
extraction, which has the model, writes the clean version as an update of that fact.

A statement whose substance is a secret (a redaction marker: recording redacts secrets before
anything reads a message) is refused: memory never keeps a marker as if it were a fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hermes.errors import RefusedWrite

SUBJECT = "the user"
POSSESSIVE = "the user's"
VERBATIM_PREFIX = "The user said: "
# The tag a fact stored in the user's own words carries until extraction rewrites it.
VERBATIM_TAG = "verbatim"

SECRET_REFUSAL = ("Refused: Hermes does not keep secrets (passwords, keys, tokens, card numbers) "
                  "in memory; keep them in a password manager. Nothing was stored.")

_MARKER = re.compile(r"\[redacted [^\]\n]{1,60}\]")

# After "I" (and adverbs): the closed class of words whose third-person form is known.
_ADVERBS = (
    r"really|also|usually|always|never|often|sometimes|mostly|still|just|only|actually|"
    r"generally|typically|absolutely|definitely|now|currently|already|rarely|normally|"
    r"probably|certainly|seriously|totally|honestly"
)
_AFTER_I: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(?:am|'m|’m)\b"), "is"),
    (re.compile(r"^(?:have|'ve|’ve)\b"), "has"),
    (re.compile(r"^(?:will|'ll|’ll)\b"), "will"),
    (re.compile(r"^(?:'d|’d)(?=\s+(?:like|love|prefer|rather|hate)\b)"), "would"),
    (re.compile(r"^do\s+not\b"), "does not"),
    (re.compile(r"^(?:don't|don’t|dont)\b"), "doesn't"),
    (re.compile(r"^do\b"), "does"),
]
# Words after "I" that are the same for "the user": modals and past auxiliaries.
_SAME = re.compile(
    r"^(?:was|wasn't|wasn’t|had|hadn't|did|didn't|didn’t|can|can't|can’t|cannot|could|"
    r"couldn't|should|shouldn't|would|wouldn't|will|won't|won’t|must|mustn't|might|may|shall)\b",
    re.I)
_I = re.compile(r"(?<![\w'’])(?:I|i)(?=(?:'|’)(?:m|ve|ll|d)\b|\s|$)")
_ADVERB_RUN = re.compile(rf"^\s+((?:(?:{_ADVERBS})\s+)*)", re.I)
_ME = re.compile(r"(?<![\w'’])(?:my|mine|me)(?![\w'’])", re.I)
# First person whose rewrite is not certain: the household's "we" and a reflexive.
_UNCERTAIN = re.compile(
    r"(?<![\w'’])(?:we|we're|we’re|we've|we’ve|we'll|we’ll|we'd|us|our|ours|ourselves|myself)"
    r"(?![\w'’])", re.I)
# The first person of the languages people most often write to Hermes in besides English,
# matched as written in lower case (the text's first letter lowered): "Mia" and "Io" are names.
_FOREIGN = re.compile(
    r"(?<![\w'’])(?:mi|mis|mío|mía|yo|nosotros|nuestra|nuestro|meu|minha|meus|minhas|eu|nosso|"
    r"nossa|je|mon|ma|mes|moi|nous|notre|ich|mein|meine|meinen|meinem|meiner|mich|mir|wir|"
    r"unser|unsere|io|mio|mia|miei|mie|ik|mijn|wij)(?![\w'’])|[我私僕俺나내저제]")
# "Remember that ..." in the languages people most often write to Hermes in besides English
# (pt, es, fr, de, it, nl): the request, then the word joining it to what is to be remembered
# ("que", "dass", "che", "dat") or a colon. Imperatives only: "¿Recuerdas ...?", "Lembras-te
# ...?", "Ti ricordi ...?" ask, and "je ne me souviens pas" says, what is not a request.
FOREIGN_REQUEST = (
    r"(?:lembra(?:-te|-se)?|lembre(?:-se)?|n[ãa]o\s+(?:te\s+|se\s+)?esque[çc]as?|"
    r"anota(?:\s+a[íi])?|anote|regista|registe|memoriza|memorize|tom[ae]\s+nota|"
    r"recuerd[ae]|acu[ée]rd(?:ate|ese)|no\s+(?:te\s+|se\s+)?olvid(?:es|e)|apunt[ae]|"
    r"t(?:en|enga)\s+en\s+cuenta|memorice|"
    r"souviens-toi|souvenez-vous|rappelle-toi|rappelez-vous|n['’]oubli(?:e|ez)\s+pas|"
    r"not(?:e|ez)|retiens|retenez|m[ée]moris(?:e|ez)|gard(?:e|ez)\s+en\s+t[êe]te|"
    r"merke?\s+dir|merken\s+sie\s+sich|vergiss\s+nicht|vergessen\s+sie\s+nicht|"
    r"denke?\s+daran|denken\s+sie\s+daran|notiere?(?:\s+dir)?|notieren\s+sie|"
    r"ricorda(?:ti)?|non\s+dimenticar(?:e|ti)|tieni\s+(?:a\s+mente|presente)|prendi\s+nota|"
    r"annota|memorizza|onthoud|vergeet\s+niet|noteer)"
    r"(?:\s+(?:bien|bem|bitte|ben|aí|ai))?(?:\s+(?:de|di|do|da|del)\b)?"
    r"(?:\s*,?\s*(?:que|qu['’]|dass|daß|che|ch['’]|dat)(?:\s+|(?<=['’]))|\s*(?P<colon>:)\s*)"
)
# "Please" in those languages, and "Hermes," before a request.
FOREIGN_POLITE = (r"(?:(?:por\s+favor|porfa|s['’]il\s+(?:te|vous)\s+pla[iî]t|bitte|"
                  r"per\s+favore|alsjeblieft|hermes)\s*,?\s+){0,2}")
_FOREIGN_REQUEST = re.compile(rf"^¡?\s*{FOREIGN_POLITE}{FOREIGN_REQUEST}(?=\S)", re.I)
# "Remember that ..." typed where the request is already implied (/remember, facts add).
_REQUEST = re.compile(
    r"^(?:please\s*,?\s+)?(?:remember|memori[sz]e|note|keep\s+in\s+mind|"
    r"(?:don'?t|don’t|do\s+not|never)\s+forget)\s*[:,-]?\s+(?=\S)", re.I)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|(?<!\w)'[^']*'(?!\w)|«[^»]*»")


@dataclass(frozen=True)
class Statement:
    """The fact to store for what the user said."""

    content: str
    # The user's own words, kept because a rewrite was not certain (extraction rewrites it).
    verbatim: bool = False

    @property
    def tags(self) -> list[str]:
        return [VERBATIM_TAG] if self.verbatim else []


def holds_secret(text: str) -> bool:
    """Whether ``text`` holds a redaction marker (a secret removed when it was recorded)."""
    return bool(_MARKER.search(text))


def is_verbatim(content: str) -> bool:
    return content.startswith(VERBATIM_PREFIX)


def normalise_statement(text: str, *, sentence: bool = False,
                        as_said: bool = False) -> Statement:
    """The fact for ``text``, the words the user asked to be remembered (a "remember that" in
    front of them, as typed into ``hermes facts add``, is dropped). RefusedWrite when there is
    nothing to store or it is a secret.

    The user's spelling is kept; a statement that now opens with "the user" opens with a
    capital. ``sentence``: ``text`` was cut from a sentence ("remember that the NAS is ...",
    the fast lane), so a first word in lower case is capitalised too ("iPhone" is not).
    ``as_said``: the request was made in another language ("Recuerda que ..."): its words are
    kept whole, never rewritten by English rules (French and Spanish "me" is no English
    "me")."""
    body = re.sub(r"\s+", " ", text).strip()
    foreign = _FOREIGN_REQUEST.match(body)
    english = _REQUEST.match(body)
    request = foreign or english
    if request:     # the rest was cut from the user's sentence
        body, sentence = body[request.end():].strip(), True
        # (a colon after "Note" is English too: the rules read what follows)
        as_said = as_said or (foreign is not None and not (foreign.group("colon") and english))
    body = re.sub(r"^that\s+", "", body, flags=re.I).strip()
    if sentence:    # cut from a sentence: its end punctuation is the sentence's
        body = re.sub(r"[\s.!;,]+$", "", body)
    if not body.rstrip(".!;, "):
        raise RefusedWrite("Refused: a fact needs non-empty text.")
    if holds_secret(body):
        raise RefusedWrite(SECRET_REFUSAL)
    if as_said:
        return Statement(f'{VERBATIM_PREFIX}"{body}"', verbatim=True)
    if re.match(r"^to\s+\w", body, re.I) and not _first_person(body):
        # "don't forget to call the dentist": an intention of the user
        return Statement(_capitalised(f"{SUBJECT} needs {body}"))
    rewritten = _rewrite(body)
    if rewritten is None:
        return Statement(f'{VERBATIM_PREFIX}"{body}"', verbatim=True)
    if rewritten.startswith(SUBJECT) or (sentence and re.match(r"[a-z]+\b", rewritten)):
        return Statement(_capitalised(rewritten))
    return Statement(rewritten)


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _first_person(text: str) -> bool:
    return bool(_I.search(text) or _ME.search(text) or _UNCERTAIN.search(text)
                or _FOREIGN.search(text[:1].lower() + text[1:]))


def _rewrite(body: str) -> str | None:
    """``body`` with its first person as "the user", or None when a rewrite is not certain."""
    if _UNCERTAIN.search(body) or _FOREIGN.search(body[:1].lower() + body[1:]):
        return None
    for quoted in _QUOTED.finditer(body):
        if _first_person(quoted.group()):
            return None     # a quotation is kept as said
    out: list[str] = []
    position = 0
    for match in _I.finditer(body):
        rest = body[match.end():]
        run = _ADVERB_RUN.match(rest)
        adverbs = run.group(1) if run else ""
        after = rest[run.end():] if run else rest
        if rest[:1] in "'’":
            adverbs, after = "", rest
        replacement = _after_i(after)
        if replacement is None:
            return None
        word, length = replacement
        out.append(body[position:match.start()])
        out.append(f"{SUBJECT} {adverbs}{word}")
        position = match.end() + (len(rest) - len(after)) + length
    out.append(body[position:])
    text = "".join(out)
    return _ME.sub(lambda m: SUBJECT if m.group().lower() == "me" else POSSESSIVE, text)


def _after_i(after: str) -> tuple[str, int] | None:
    """The third-person word for what follows "I" and how many characters it replaces."""
    for pattern, word in _AFTER_I:
        match = pattern.match(after)
        if match:
            return word, match.end()
    match = _SAME.match(after)
    if match:
        return match.group(), match.end()
    return None
