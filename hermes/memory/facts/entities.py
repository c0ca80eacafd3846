"""Entities: the people, projects and things facts are about, with aliases.

Resolution of a name, in order: the config's alias map (``facts.aliases``), an exact match on a
name or alias (case-insensitive, whitespace-collapsed), then rapidfuzz for near spellings at or
above ``facts.entity_match_threshold``. Fuzzy matching never joins names whose numbers differ
("sprint 12" is not "sprint 13") and ignores very short names, where one letter is a new name.

When a fact is added without entities, candidates come from its text: capitalised words and runs
of them ("Alice", "Alice Johnson", "PostgreSQL"; a sentence-initial common word such as "The" or
"Yesterday" is not a name), quoted terms, ``snake_case`` and ``dotted.identifiers``, and names of
entities the user already has (looked up by the text's word n-grams, through the unique index).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import sqlite_utils
from rapidfuzz import fuzz, process

from hermes.clock import Clock, SystemClock, to_ts
from hermes.config import FactsConfig
from hermes.errors import NotFound, RefusedWrite
from hermes.memory.facts.records import ACTIVE
from hermes.memory.facts.statement import VERBATIM_PREFIX, is_verbatim
from hermes.safety.guard import check_field
from hermes.store.fts import STOPWORDS

MAX_NAME_CHARS = 80
MAX_NGRAM = 4
# Below this many characters a one-letter difference is usually another name (Bob / Rob).
MIN_FUZZY_CHARS = 5
# Each differing word of a multi-word name must be at least this close (rapidfuzz ratio).
WORD_MATCH = 80

# Words that start sentences without being names. Sentence-initial capitals are only names when
# the word is not one of these (or a stopword).
COMMON_WORDS = STOPWORDS | frozenset(
    """
    yesterday today tomorrow tonight now then later soon recently currently usually sometimes
    often always never maybe perhaps please remember note notes also however meanwhile anyway
    actually finally first second third next last every each many most some several another
    new old good great thanks thank hello hi hey yes no ok okay sure well so since although
    though unless while because after before during until once still yet even just only
    morning evening afternoon night week weekend month year everyone everybody someone somebody
    nobody nothing something everything anything let lets let's we've i'm i've i'd i'll there's
    here's it's that's what's our my his her their its this that these those there here
    set use add make get run put keep check try go see call ask send buy move remind meet met
    """.split()  # noqa: SIM905 - a word list reads better as text
)

# A title's period does not end a name: "Dr. Smith", "St. Mary's", "Mr. Tanaka", "Dra. López";
# a title is never a name alone ("Mr. and Mrs. Smith": not "Mr"), and the word after it is the
# name's even when it is a common word ("Dr. Who", "Dr. No").
_TITLES = ("Dr", "Dra", "Mr", "Mrs", "Ms", "Mx", "Mme", "Mlle", "Prof", "St", "Sta", "Sr", "Sra",
           "Srta", "Jr", "Mt", "Ft", "Gen", "Col", "Capt", "Lt", "Sgt", "Rev", "Hon")
_TITLE_KEYS = frozenset(t.casefold() for t in _TITLES)
_UPPER = "A-ZÀ-ÖØ-Þ"
_TITLE = rf"(?:{'|'.join(_TITLES)})\.(?=[ \t]+[{_UPPER}])"
_WORD = rf"{_TITLE}|[{_UPPER}][\w'’.+#&-]*[\w+#]|[{_UPPER}]"
_CAPITALISED_RUN = re.compile(rf"(?<![\w@/.-])(?:{_WORD})(?:[ \t]+(?:{_WORD}))*")
_QUOTED = re.compile(
    r"\"([^\"\n]{2,60})\"|“([^”\n]{2,60})”|`([^`\n]{2,60})`|(?<!\w)'([^'\n]{2,60})'(?!\w)"
)
_SNAKE = re.compile(r"(?<![\w.])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w]|\.\w)")
_DOTTED = re.compile(r"(?<![\w.@/])[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+(?![\w@/])")
_SENTENCE_END = re.compile(r"[.!?:;]\s*$|\n\s*$|^\s*$")
_DIGITS = re.compile(r"\d+")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
_EDGE_PUNCT = "\"'“”‘’`()[]{}<>,;:!?."
_NOT_DOTTED = frozenset({"e.g", "i.e", "etc", "a.m", "p.m"})


def name_key(name: str) -> str:
    """The case-insensitive form a name is matched by."""
    return re.sub(r"\s+", " ", name).strip().strip(_EDGE_PUNCT).strip().casefold()


# Possessive endings: "Omar's", "Omar’s", "James'".
_POSSESSIVE = re.compile(r"(?<=\w)(?:['’]s|s['’])$")
# Trailing marks that decorate a name rather than belong to it ("-Vaultwarden*", "Atlas_"):
# never "#" or "+", which do belong (C#, C++).
_TRAILING_DECORATION = "*_~-=|/\\!?.,;:'’\"`"


# Marks at a word's edges, as search drops them; never U+FFFD (an undecodable byte is not a mark).
_EDGE_MARKS = re.compile(r"^(?:[^\w\ufffd]|_)+|(?:[^\w\ufffd]|_)+$")


# A terminal's escape sequence (CSI: colours, cursor moves), as `ls --color` or a prompt paints.
_ANSI_SEQUENCE = re.compile(r"\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]")


def near_exact_keys(key: str) -> list[str]:
    """Other keys a name typed as ``key`` almost certainly means, closest first.

    Invisible format characters (a soft hyphen, bidi marks, zero-width spaces) and compatibility
    forms (full-width letters) removed; decoration around it ("-Vaultwarden*") stripped; a
    possessive ("omar's") reduced to the name. Tried only after the exact key finds nothing.
    """
    seen = {key}
    variants: list[str] = []

    def add(candidate: str) -> None:
        candidate = name_key(candidate)
        if candidate and candidate not in seen and _LETTER_OR_DIGIT.search(candidate):
            seen.add(candidate)
            variants.append(candidate)

    # Control characters too (an escape key's "\x1b" typed into a terminal): search drops them;
    # a whole colour sequence first ("\x1b[31mOmar\x1b[0m", a name pasted from a coloured
    # terminal), else its "[31m" stays glued to the name.
    visible = unicodedata.normalize(
        "NFKC", "".join(c for c in _ANSI_SEQUENCE.sub("", key)
                        if unicodedata.category(c) not in ("Cf", "Cc")))
    add(visible)
    bare = visible
    # Punctuation only: a U+FFFD (an undecodable byte) is not decoration, and stays.
    while bare and (unicodedata.category(bare[0]).startswith("P") or bare[0] in "~=|^"):
        bare = bare[1:]
    bare = bare.rstrip(_TRAILING_DECORATION)
    add(bare)
    for form in (visible, bare):
        if _POSSESSIVE.search(form):
            add(form[:-2] if form[-2:] in ("'s", "’s") else form[:-1])
    # Last, what search reads of it: the word without any mark at its edges ("#Omar+"), for a
    # word of three characters or more ("C++" or "C#" never becomes "c").
    core = _EDGE_MARKS.sub("", visible)
    if len(core) >= 3:
        add(core)
    return variants


def clean_name(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip().strip(_EDGE_PUNCT).strip()


def check_name(name: str, what: str = "entity name") -> str:
    """The cleaned name, or RefusedWrite when it cannot name an entity."""
    cleaned = clean_name(name)
    if not _LETTER_OR_DIGIT.search(cleaned):
        raise RefusedWrite(f"Refused: the entity name {name!r} has no letters or digits; "
                           "name the entity in words. Nothing was stored.")
    if len(cleaned) > MAX_NAME_CHARS:
        raise RefusedWrite(f"Refused: entity names are at most {MAX_NAME_CHARS} characters.")
    # A name is printed into every prompt that recalls its facts: checked like the text.
    check_field(what, cleaned)
    return cleaned


@dataclass
class Entity:
    id: int
    user: str
    name: str
    aliases: list[str] = field(default_factory=list)
    fact_count: int = 0
    created_at: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "aliases": self.aliases,
                "facts": self.fact_count, "created_at": self.created_at}


def _same_words_respelt(a: str, b: str) -> bool:
    """Whether two similar keys are one name spelt twice, not two names: the same number of
    words, the same numbers, short words (up to 4 letters) equal, longer ones close.
    "alice jonson" / "alice johnson" yes; "yara fontaine" / "zara fontaine" and
    "uma kim" / "umar kim" no."""
    words_a, words_b = a.split(), b.split()
    if len(words_a) != len(words_b) or _DIGITS.findall(a) != _DIGITS.findall(b):
        return False
    if min(len(a), len(b)) < MIN_FUZZY_CHARS:
        return False
    for x, y in zip(words_a, words_b, strict=True):
        if x == y:
            continue
        if min(len(x), len(y)) <= 4 or fuzz.ratio(x, y) < WORD_MATCH:
            return False
    return True


def _is_common(word: str) -> bool:
    return word.casefold().strip("'’") in COMMON_WORDS


def _is_title(word: str) -> bool:
    return word.rstrip(".").casefold() in _TITLE_KEYS


def extract_candidates(content: str) -> list[str]:
    """Entity names the text itself suggests (no database needed). Order of first appearance.
    A statement kept in the user's words (``The user said: "..."``) is read inside its quotes:
    the quotation is what they said, not a name."""
    if is_verbatim(content) and content.endswith('"'):
        content = content[len(VERBATIM_PREFIX) + 1:-1]
    found: list[tuple[int, str]] = []
    for match in _QUOTED.finditer(content):
        text = next(g for g in match.groups() if g is not None)
        found.append((match.start(), text))
    for match in _CAPITALISED_RUN.finditer(content):
        words = [re.sub(r"['’]s?$", "", w) for w in match.group(0).split()]
        start = match.start()
        # A capitalised word that opens a sentence is a name only if it is not a common word:
        # "Yesterday Alice Johnson shipped" -> "Alice Johnson"; "The server" -> nothing.
        if _SENTENCE_END.search(content[:start]) and words and _is_common(words[0].rstrip(".")):
            words = words[1:]
        # Stopwords never stand alone as names ("I", "A"), and a trailing one is dropped
        # unless a title comes before it ("Dr. Who").
        while words and _is_common(words[-1].rstrip(".")) and len(words) > 1 \
                and not _is_title(words[-2]):
            words = words[:-1]
        while len(words) > 1 and _is_title(words[-1]):    # "St. James St."
            words = words[:-1]
        if not words or (len(words) == 1 and _is_common(words[0].rstrip("."))) \
                or all(_is_title(w) for w in words):
            continue
        found.append((start, " ".join(words)))
    for pattern in (_SNAKE, _DOTTED):
        for match in pattern.finditer(content):
            text = match.group(0).rstrip(".-")
            if text.casefold() in _NOT_DOTTED or "." not in text and "_" not in text:
                continue
            found.append((match.start(), text))
    seen: set[str] = set()
    result = []
    for _, text in sorted(found, key=lambda item: item[0]):
        text = clean_name(text)
        key = name_key(text)
        if len(key) < 2 or len(text) > MAX_NAME_CHARS or key in seen:
            continue
        seen.add(key)
        result.append(text)
    return result


def _ngrams(content: str) -> list[str]:
    """Keys of every run of up to MAX_NGRAM words, to find known entity names in text."""
    words = [w.strip(_EDGE_PUNCT) for w in content.split()]
    keys: set[str] = set()
    for i in range(len(words)):
        for n in range(1, MAX_NGRAM + 1):
            chunk = [w for w in words[i : i + n] if w]
            if len(chunk) < n and i + n <= len(words):
                break
            if chunk:
                key = name_key(" ".join(chunk))
                if len(key) >= 2 and key not in COMMON_WORDS:
                    keys.add(key)
    return sorted(keys)


class EntityStore:
    """Entity rows for one database. Every method takes the user first."""

    def __init__(
        self, db: sqlite_utils.Database, config: FactsConfig, clock: Clock | None = None
    ) -> None:
        self.db = db
        self.config = config
        self.clock = clock or SystemClock()
        # alias key -> canonical name, from the config
        self._configured: dict[str, str] = {}
        self._configured_aliases: dict[str, list[str]] = {}
        for canonical, aliases in config.aliases.items():
            self._configured[name_key(canonical)] = canonical
            self._configured_aliases[name_key(canonical)] = list(aliases)
            for alias in aliases:
                self._configured[name_key(alias)] = canonical
        # user -> (version stamp, [(key, entity id)]) for fuzzy matching
        self._fuzzy_cache: dict[str, tuple[tuple, list[str], list[int]]] = {}

    # -- resolution -------------------------------------------------------------------------

    def _exact(self, user: str, key: str) -> int | None:
        row = self.db.execute(
            "SELECT coalesce((SELECT id FROM entities WHERE user = ?1 AND name_key = ?2),"
            " (SELECT entity_id FROM entity_aliases WHERE user = ?1 AND alias_key = ?2))",
            [user, key],
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def _fuzzy(self, user: str, key: str) -> int | None:
        if len(key) < MIN_FUZZY_CHARS:
            return None
        stamp = tuple(self.db.execute(
            "SELECT (SELECT count(*) FROM entities WHERE user = ?),"
            " (SELECT coalesce(max(id), 0) FROM entities WHERE user = ?),"
            " (SELECT count(*) FROM entity_aliases WHERE user = ?)", [user, user, user]
        ).fetchone())
        cached = self._fuzzy_cache.get(user)
        if cached is None or cached[0] != stamp:
            rows = self.db.execute(
                "SELECT name_key, id FROM entities WHERE user = ? "
                "UNION ALL SELECT alias_key, entity_id FROM entity_aliases WHERE user = ?",
                [user, user],
            ).fetchall()
            cached = (stamp, [r[0] for r in rows], [int(r[1]) for r in rows])
            self._fuzzy_cache[user] = cached
        _, keys, ids = cached
        if not keys:
            return None
        for choice, _score, index in process.extract(
            key, keys, scorer=fuzz.ratio, score_cutoff=self.config.entity_match_threshold, limit=5
        ):
            if _same_words_respelt(key, choice):
                return ids[index]
        return None

    def resolve_id(self, user: str, name: str, *, fuzzy: bool = True) -> int | None:
        """The id of the entity ``name`` means for ``user``, or None."""
        key = name_key(name)
        if not key:
            return None
        canonical = self._configured.get(key)
        keys = [key] if canonical is None else [name_key(canonical), key]
        for candidate in keys:
            found = self._exact(user, candidate)
            if found is not None:
                return found
        if canonical is not None:
            # Any configured alias already stored under another entity row?
            for alias in self._configured_aliases.get(name_key(canonical), []):
                found = self._exact(user, name_key(alias))
                if found is not None:
                    return found
        if not fuzzy:
            return None
        for variant in near_exact_keys(key):
            found = self._exact(user, variant)
            if found is not None:
                return found
        return self._fuzzy(user, key)

    def resolve(self, user: str, name: str) -> Entity | None:
        entity_id = self.resolve_id(user, name)
        return self.get(user, entity_id) if entity_id is not None else None

    def ensure(self, user: str, name: str) -> int:
        """Resolve ``name``, creating the entity when it is new. Call inside a write transaction."""
        name = check_name(name)
        key = name_key(name)
        found = self.resolve_id(user, name)
        if found is not None:
            return found
        canonical = self._configured.get(key)
        display = canonical or name
        now = to_ts(self.clock.now())
        cursor = self.db.execute(
            "INSERT INTO entities (user, name, name_key, created_at) VALUES (?, ?, ?, ?)",
            [user, display, name_key(display), now],
        )
        entity_id = int(cursor.lastrowid or 0)
        if canonical is not None:
            for alias in self._configured_aliases.get(name_key(canonical), []):
                self._insert_alias(user, entity_id, alias)
        return entity_id

    def ensure_all(self, user: str, names: Iterable[str]) -> list[tuple[int, str]]:
        """(id, display name) for each distinct entity the names mean, in order."""
        ordered: list[int] = []
        for name in names:
            if not clean_name(name):
                continue
            entity_id = self.ensure(user, name)
            if entity_id not in ordered:
                ordered.append(entity_id)
        display = self.names_of(user, ordered)
        return [(i, display[i]) for i in ordered]

    def _name(self, user: str, entity_id: int) -> str:
        row = self.db.execute("SELECT name FROM entities WHERE id = ? AND user = ?",
                              [entity_id, user]).fetchone()
        if row is None:
            raise NotFound(f"No entity with id {entity_id}.")
        return str(row[0])

    def _insert_alias(self, user: str, entity_id: int, alias: str) -> None:
        alias = clean_name(alias)
        key = name_key(alias)
        if not key:
            return
        self.db.execute(
            "INSERT OR IGNORE INTO entity_aliases (user, alias_key, alias, entity_id) "
            "VALUES (?, ?, ?, ?)",
            [user, key, alias, entity_id],
        )

    def add_alias(self, user: str, name: str, alias: str) -> Entity:
        """Make ``alias`` another name of the entity ``name`` (created if new)."""
        from hermes.store.db import write_transaction

        check_name(alias, "alias")
        with write_transaction(self.db):
            entity_id = self.ensure(user, name)
            other = self._exact(user, name_key(alias))
            if other is not None and other != entity_id:
                raise RefusedWrite(
                    f"Refused: {alias!r} already names another entity ({self._name(user, other)})."
                )
            if other is None:
                self._insert_alias(user, entity_id, alias)
        return self.get(user, entity_id)

    # -- finding names in text --------------------------------------------------------------

    def known_in(self, user: str, content: str) -> list[tuple[int, str]]:
        """Entities of this user whose name or alias occurs in ``content`` (word n-grams)."""
        keys = _ngrams(content)
        if not keys:
            return []
        found: dict[int, int] = {}
        for start in range(0, len(keys), 400):
            chunk = keys[start : start + 400]
            marks = ",".join("?" * len(chunk))
            for entity_id, key in self.db.execute(
                f"SELECT id, name_key FROM entities WHERE user = ? AND name_key IN ({marks}) "
                f"UNION SELECT entity_id, alias_key FROM entity_aliases "
                f"WHERE user = ? AND alias_key IN ({marks})",
                [user, *chunk, user, *chunk],
            ).fetchall():
                position = content.casefold().find(key)
                found.setdefault(int(entity_id), position if position >= 0 else len(content))
        ordered = sorted(found, key=lambda i: found[i])
        return [(i, self._name(user, i)) for i in ordered]

    def candidates(self, user: str, content: str) -> list[str]:
        """Entity names for a fact given without any: known names first, then new candidates."""
        names = [name for _, name in self.known_in(user, content)]
        # Keys padded with spaces, so "atlas" is inside "project atlas" but not "atlassian".
        padded = [f" {name_key(n)} " for n in names]
        for candidate in extract_candidates(content):
            key = f" {name_key(candidate)} "
            if not any(key in known for known in padded):
                padded.append(key)
                names.append(candidate)
        return names

    # -- reading ----------------------------------------------------------------------------

    def get(self, user: str, entity_id: int) -> Entity:
        row = self.db.execute(
            "SELECT id, user, name, created_at FROM entities WHERE id = ? AND user = ?",
            [entity_id, user],
        ).fetchone()
        if row is None:
            raise NotFound(f"No entity with id {entity_id}.")
        entity = Entity(int(row[0]), row[1], row[2], created_at=row[3])
        entity.aliases = [r[0] for r in self.db.execute(
            "SELECT alias FROM entity_aliases WHERE entity_id = ? AND user = ? ORDER BY alias",
            [entity_id, user],
        ).fetchall()]
        entity.fact_count = int(self.db.execute(
            "SELECT count(*) FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
            f"WHERE fe.entity_id = ? AND f.user = ? AND {ACTIVE}", [entity_id, user],
        ).fetchone()[0])
        return entity

    def list_entities(self, user: str) -> list[Entity]:
        """All of a user's entities with their aliases and active-fact counts, most used first."""
        rows = self.db.execute(
            f"""
            SELECT e.id, e.name, e.created_at,
              (SELECT count(*) FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id
               WHERE fe.entity_id = e.id AND f.user = e.user AND {ACTIVE})
            FROM entities e WHERE e.user = ? ORDER BY 4 DESC, e.name_key
            """,
            [user],
        ).fetchall()
        aliases: dict[int, list[str]] = {}
        for entity_id, alias in self.db.execute(
            "SELECT entity_id, alias FROM entity_aliases WHERE user = ? ORDER BY alias", [user]
        ).fetchall():
            aliases.setdefault(int(entity_id), []).append(alias)
        return [
            Entity(int(r[0]), user, r[1], aliases.get(int(r[0]), []), int(r[3]), r[2])
            for r in rows
        ]

    def names_of(self, user: str, ids: Sequence[int]) -> dict[int, str]:
        """Display names of this user's entities among ``ids`` (others' ids are left out)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        return {int(i): n for i, n in self.db.execute(
            f"SELECT id, name FROM entities WHERE user = ? AND id IN ({marks})",
            [user, *ids]).fetchall()}
