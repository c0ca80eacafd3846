"""Session search by meaning: bm25's ranking re-read with a small embedding model.

When hybrid recall is on (``sessions.embeddings``, ``hermes[embeddings]``), session search
(``SessionStore.search``, ``search_messages``, past messages in the prompt) first ranks the
messages by words (hermes.memory.sessions.rerank: bm25, neighbours, session, date, speaker),
then :func:`rerank_by_meaning` re-scores its best ``pool`` messages and the nearest ``extra``
messages and windows by one linear score over generic features of each candidate:

    own   = words / best words + message * minmax(cos(message, query))
            + window * minmax(cos(window, query)) + meaning_only * [no word of the query]
            + length * log(1 + characters) + temporal * [asks when, names a time]
            + of_self * (1 if it speaks of its speaker more than of its listener, -1 if less)
    total = own + session * minmax(best own score in the message's session)

* the **window** is the message with the turns before and after it in its session (the mean of
  their vectors): an answer ("Lisbon! The tiles were beautiful") is found by meaning through
  the question it answers, as bm25's neighbour share finds it by words;
* the nearest ``extra`` messages and the nearest ``extra`` windows join the candidates even when
  they share no word with the query (placed by the word ranking first, so their neighbours,
  session and date count too); **meaning_only** lets such a candidate, when it is close in
  meaning, pass a weak word match (one that holds a common word of the query and nothing
  else): without it, a message that shares no word with the query could never come first;
* a longer message says more (**length**): "ok, sounds good" matches a word as well as the
  message that tells the story, and holds the answer less often;
* a question that asks *when* is answered by a message that places something in time
  ("yesterday", "last week", "in May": hermes.memory.sessions.timewords), a word the question
  cannot hold (**temporal**);
* what someone did is told in the first person ("I went to Lisbon with my sister"), not in
  the turn that answers it ("you must have loved it!"), which holds the same words and meaning
  (**of_self**: hermes.memory.sessions.disclosure; whoever speaks, whoever the question names);
* a conversation is about something: each message gets part of its session's best score;
* the query is embedded with the names of the candidates' speakers turned into "you"
  (:func:`meaning_text`: "what has Ana painted?" as "what have you painted"): who is asked
  about is the word ranking's part; the meaning part is about what, asked as a conversation
  asks it of the one who answers "I".

Cosines are rescaled over the candidates (min 0, max 1), so the weights do not depend on the
model's range of cosines (e5's are all between 0.7 and 0.9). The weights were fitted, not
guessed: a softmax over each question's candidates (the evidence turns as the targets), trained
with numpy on the tuning half of LoCoMo only with MiniLM (the default model), then scaled so the
word part weighs 1 (refitted with the temporal part, all weights together, tuning half only).
The word part enters whole, its speaker and date boosts inside it at the word ranking's own
ratio: fitted apart, the speaker boost came out 5 times stronger, which
LoCoMo rewards (its questions name the person who said the answer) and a question naming the
other person punishes (``bench_locomo --perturb swap-names``: 0.500 instead of 0.658 turn R@5).
Checked on the held-out half and on reshaped variants of the data (README, "Session search").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes.memory.sessions.rerank import RankedMessage
from hermes.memory.words import trust
from hermes.store.fts import STOPWORDS

if TYPE_CHECKING:
    from hermes.memory.sessions.vectors import MessageVectors


@dataclass(frozen=True)
class SemanticParams:
    """The re-scoring's weights (see the module doc for how they were fitted)."""

    message: float = 0.428  # the message's own cosine (rescaled over the candidates)
    window: float = 0.208  # its window's cosine (previous + this + next turn)
    meaning_only: float = 0.169  # a candidate without a word of the query (found by meaning)
    length: float = 0.112  # per log(1 + characters) of the message
    temporal: float = 0.344  # the question asks when and the message names a time
    # +1 / -1: the message speaks of its speaker more / less than of its listener (disclosure).
    # Chosen on the tuning half alone, the other weights as they were (0.04-0.065 screened).
    of_self: float = 0.05
    session: float = 0.297  # the best own score in its session (rescaled)
    extra: int = 20  # nearest messages, and nearest windows, joining the candidates
    pool: int = 100  # the word ranking's best this-many messages are re-scored
    # How far the words are trusted (hermes.memory.words.trust): the query's word evidence
    # (the best coverage x agreement among the word ranking's best ``trust_pool`` messages) at
    # or under ``trust_low`` leaves the score to meaning; at or over ``trust_high`` it is the
    # fitted score above. Between, the word part, the window, the length and the session part
    # are weighed by it (the message's own cosine, the temporal and of-self parts and the word
    # ranking's date part stay whole). Chosen on LoCoMo's tuning half and the recall probes'
    # (scripts/recall_probes.py): docs/retrieval.md.
    trust_low: float = 0.18
    trust_high: float = 0.24
    trust_pool: int = 20
    # The words are not trusted at all when no candidate holding one of them (a bm25 match)
    # comes within this share of the nearest candidate's cosine (its own or its window's, as
    # agreement reads it): "Where was my childhood spent?" shares "childhood" with a message
    # at 0.23 while the nearest turns are at 0.45; its coverage (half the words) x agreement
    # (0.52) reached the ramp's top all the same. 0.55-0.7 alike on the recall probes; on
    # LoCoMo it changes 1 question's trust of 1,536 at 0.6 (none's result), 4 at 0.7 (0 = off).
    trust_nearest_word: float = 0.6
    # A candidate without a word of the query, closer in meaning than the best of the word
    # ranking's best ``beyond_pool`` messages, gains ``beyond`` x how much closer (each cosine
    # as a share of the way from the candidates' median to their best) x the words' trust:
    # meaning beyond words that are trusted (where they are not, meaning ranks anyway). The
    # pool is the trust's own (``trust_pool``: the word matches whose evidence the trust
    # read); with the best 5 (before), a wordless turn passed word matches the trust had
    # vouched for that were nearer than those 5. 5 -> 20, paired: LoCoMo turn R@5 0.751 /
    # 0.752 -> 0.751 / 0.755, session 0.894 / 0.885 -> 0.895 / 0.887; --perturb sentences,
    # swap-names and merge-sessions gain on both halves; the recall probes' R@5 unchanged
    # (their cues are found where the words are not trusted).
    beyond: float = 1.0
    beyond_pool: int = 20
    # Words not trusted to choose the conversation still order the messages of one: a message
    # loses ``within`` x (1 - trust) x how far its word part is below its session's best (the
    # turn that holds the words, not its neighbour, stands for the exchange). Chosen on the
    # tuning halves: 0.1 / 0.2 / 0.3 (LoCoMo's tuning half the same as before at 0.2).
    within: float = 0.2
    # A candidate shows as matched by meaning when its cosine (or its window's) reaches the
    # model's floor and this share of the best candidate's: "hello there" (0.21 to "tomato
    # variety", whose session holds both words at 0.69) is not a match by meaning.
    shown_share: float = 0.5
    # The nearest messages and windows join the candidates from this share of the model's
    # floor of meaning (hermes.memory.embeddings.meaning_floor; MiniLM 0.2 -> 0.1): a lone
    # exchange that shares no word stands out of a history at 0.15-0.2; what is *shown* keeps
    # the whole floor (a hit found by meaning alone under it is not listed: hits.py,
    # past_messages.py).
    floor_share: float = 0.5
    # Meaning's ``keep_count`` nearest candidates, those that hold no word of the query and
    # reach the model's floor, are kept within the best ``keep_nearest`` (0: off), the nearest
    # first. No word vouches for them or against them, and however the words' neighbours and
    # conversation score, the fusion then keeps meaning alone's first two: never worse than
    # its parts there. A short question ("Which language am I studying?") whose one word is
    # held by a conversation about the same thing ("programming languages") otherwise fills
    # the best five with that conversation, and the answer, meaning's second, ranks 20th.
    # Only the wordless: on LoCoMo (mostly questions worded like their answer) the same for
    # any nearest cost turn R@5 0.007 on both halves (docs/retrieval.md, the recall probes).
    keep_nearest: int = 5
    keep_count: int = 2
    # A candidate without a word of the query, under the model's floor (from ``floor_share``
    # of it) but among the best ``in_place_of_words``, shows as a match by meaning when it
    # ranks above a word match no nearer in meaning (one listed anyway) and the words are not
    # trusted wholly: in a long history, whose lists such matches fill, it takes one's place;
    # it is never listed where no word matched (a query that matches nothing still lists
    # nothing; a home under 200 messages trusts its words, so the rule is off there); the
    # prompt's past messages leave it out (search.SearchProfile, past_messages). A cue
    # in a long history stands at 0.15-0.2 ("My hamstrings are finally loose enough to touch
    # my toes" / "I've been swimming laps before work"), under the floor, and SessionStore.search
    # listed the word matches it outranked instead. No rule on the cosines alone tells such a
    # cue from the noise at the same cosines (z over the query's cosines, rank among them, share
    # of the best: docs/retrieval.md); the fusion's own order does. 0: off.
    in_place_of_words: int = 5


DEFAULT_SEMANTIC = SemanticParams()


@dataclass
class _Windows:
    """Each vector row's neighbours in its session (row index, -1 for none) and the norm of
    the sum of the three vectors (the window's length, to turn a sum of cosines into one)."""

    rows: int  # matrix rows covered
    prev: Any
    next: Any
    norm: Any
    last_of_session: dict[int, int]  # session id -> its newest row


@dataclass
class Similarities:
    """Cosines of every vector of one user to one query."""

    ids: Any  # message ids, ascending (numpy int64)
    message: Any  # cosine of each message (float32)
    window: Any  # cosine of each message's window

    def nearest(self, k: int) -> list[int]:
        """The ``k`` nearest messages and the ``k`` nearest windows (message ids)."""
        np = _np()
        if not len(self.ids) or k <= 0:
            return []
        k = min(k, len(self.ids))
        found: dict[int, None] = {}
        for cosines in (self.message, self.window):
            top = np.argpartition(-cosines, k - 1)[:k]
            for i in top[np.argsort(-cosines[top])]:
                found[int(self.ids[i])] = None
        return list(found)

    def of(self, message_ids: Sequence[int]) -> tuple[Any, Any]:
        """(message cosines, window cosines) of these messages; NaN for one without a vector
        (not indexed yet)."""
        np = _np()
        wanted = np.asarray(message_ids, dtype=np.int64)
        at = np.searchsorted(self.ids, wanted)
        at = np.clip(at, 0, max(len(self.ids) - 1, 0))
        present = (self.ids[at] == wanted) if len(self.ids) else np.zeros(len(wanted), bool)
        nan = np.float32("nan")
        message = np.where(present, self.message[at] if len(self.ids) else nan, nan)
        window = np.where(present, self.window[at] if len(self.ids) else nan, nan)
        return message, window


def _np() -> Any:
    import numpy as np

    return np


_lock = threading.Lock()


def _windows_of(vectors: MessageVectors, user: str, matrix: Any) -> _Windows:
    """The window structure of a user's matrix, extended for the rows added since last time
    (new messages only ever come after the rows already there: ids grow)."""
    np = _np()
    with _lock:
        per_user: dict[str, _Windows] = vectors.windows
        done = per_user.get(user)
        n = len(matrix.ids)
        if done is not None and done.rows == n:
            return done
        if done is None or done.rows > n:
            done = _Windows(0, np.zeros(0, np.int64), np.zeros(0, np.int64),
                            np.zeros(0, np.float32), {})
        start = done.rows
        prev = np.concatenate([done.prev, np.full(n - start, -1, np.int64)])
        nxt = np.concatenate([done.next, np.full(n - start, -1, np.int64)])
        norm = np.concatenate([done.norm, np.ones(n - start, np.float32)])
        new_ids = matrix.ids[start:]
        found = np.array(vectors.db.execute(
            "SELECT id, session_id FROM messages WHERE user = ? AND id BETWEEN ? AND ? "
            "ORDER BY id", [user, int(new_ids[0]), int(new_ids[-1])]).fetchall()
            if len(new_ids) else [], dtype=np.int64).reshape(-1, 2)
        last = dict(done.last_of_session)
        # New rows by session, then id: each follows the one before it in its session; the
        # first of a session follows that session's newest older row. A message deleted since
        # it was indexed gets a session of its own (no neighbours).
        rows_new = np.arange(start, n, dtype=np.int64)
        at = np.clip(np.searchsorted(found[:, 0], new_ids), 0, max(len(found) - 1, 0))
        held = (found[at, 0] == new_ids) if len(found) else np.zeros(len(new_ids), bool)
        sessions = np.where(held, found[at, 1] if len(found) else 0,
                            -1 - np.arange(len(new_ids), dtype=np.int64))
        order = rows_new[np.lexsort((rows_new, sessions))]
        ordered = sessions[order - start]
        same = ordered[1:] == ordered[:-1]
        prev[order[1:][same]] = order[:-1][same]
        nxt[order[:-1][same]] = order[1:][same]
        before_rows = []  # older rows whose next is new (all before ``start``)
        starts = np.flatnonzero(np.concatenate([[True], ~same])) if len(order) else []
        for at in starts:
            session, row = int(ordered[at]), int(order[at])
            before = last.get(session)
            if before is not None:
                prev[row] = before
                nxt[before] = row
                before_rows.append(before)
        ends = np.flatnonzero(np.concatenate([~same, [True]])) if len(order) else []
        for at in ends:
            if ordered[at] >= 0:
                last[int(ordered[at])] = int(order[at])
        older = np.unique(np.array(before_rows, dtype=np.int64))
        rows = np.concatenate([older[older < start], rows_new])  # ascending, each once
        norm[rows] = _window_norms(matrix, prev, nxt, rows)
        done = _Windows(n, prev, nxt, norm, last)
        per_user[user] = done
        vectors.windows_built(user, matrix, done)  # a long history: saved for the next process
        return done


def _window_norms(matrix: Any, prev: Any, nxt: Any, rows: Any) -> Any:
    """The length of each of ``rows``' window (the sum of its vector and its neighbours'), in
    chunks: never a float32 copy of every row at once. (A row whose vector was dropped counts
    as a zero vector: hermes.memory.sessions.vectors keeps its place until it is embedded
    again.)"""
    np = _np()
    out = np.empty(len(rows), np.float32)
    for begin in range(0, len(rows), 2048):  # blocks that stay in the CPU's cache
        part = rows[begin : begin + 2048]
        total = matrix.dequantized(part)
        for side in (prev, nxt):
            has = side[part] >= 0
            total[has] += matrix.dequantized(side[part][has])
        out[begin : begin + len(part)] = np.maximum(np.linalg.norm(total, axis=1), 1e-6)
    return out


_WORD = re.compile(r"[^\W_]+")


def meaning_text(db: Any, user: str, text: str, candidate_ids: Sequence[int]) -> str:
    """``text`` with the words that name a speaker of the candidate messages (``user``'s only)
    turned into the one spoken to: "what did Ana paint?" is embedded as "what did you paint?",
    "what is Ana's job" as "what is your job". Every message is embedded with its speaker's
    name, so a name in the query pulls toward whatever that person said; who is asked about
    is the word ranking's part (its speaker boost), the meaning part is about what, asked as
    a conversation asks it: of "you", whose answer says "I" (names dropped instead: turn R@5
    0.3 points lower on LoCoMo, README "whom a message speaks of"). The whole text when it
    holds nothing but names."""
    ids = list(dict.fromkeys(candidate_ids))
    if not ids or not text:
        return text
    names: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = db.execute(
            f"SELECT DISTINCT speaker FROM messages WHERE user = ? AND speaker IS NOT NULL "
            f"AND id IN ({','.join('?' * len(chunk))})", [user, *chunk]).fetchall()
        names.update(w.casefold() for (speaker,) in rows for w in _WORD.findall(speaker))
    # A word is a name by its letters: "Ana's" and "Ana?" are Ana (a message as written keeps
    # its punctuation). Nothing named: the text as it is, so fact recall, which embeds the
    # same message, finds its embedding made (one per turn).
    words = text.split()
    named = [_names_one(w, names, first=i == 0 or words[i - 1][-1:] in ".?!")
             for i, w in enumerate(words)]
    if not any(named) or all(named):
        return text
    spoken = " ".join(w if not kind else ("your" if kind == "possessive" else "you")
                      for w, kind in zip(words, named, strict=True))
    return _TO_YOU.sub(lambda m: _as_written(m.group(1), _AUX_FOR_YOU[m.group(1).casefold()])
                       + " you", spoken)


def _as_written(word: str, other: str) -> str:
    return other.capitalize() if word[:1].isupper() else other


# "has Ana been" -> "has you been" -> "have you been"
_AUX_FOR_YOU = {"has": "have", "does": "do", "is": "are", "was": "were"}
_TO_YOU = re.compile(r"\b(has|does|is|was) you\b", re.IGNORECASE)


def _names_one(word: str, names: set[str], *, first: bool = False) -> str:
    """"name" when ``word`` is one of ``names`` with its punctuation ("Ana?"), "possessive"
    for "Ana's", "" otherwise, also for a word that starts like one ("don't" for a speaker
    Don). A name is written as one: capitalised, and not a sentence's first word unless
    possessive ("Will I see Ana?", "what will the weather be?" for a user called Will, or
    one whose Discord name is "the_real_bob"), never a stopword ("The Cat"). A speaker is
    often the home's own user, whose display name may be any word; LoCoMo's questions name
    their speakers capitalised and never first, so none of their texts changes."""
    letters = _WORD.findall(word)
    if not letters or len(letters) > 2 or (len(letters) == 2 and letters[1].casefold() != "s"):
        return ""
    name = letters[0].casefold()
    if name not in names or name in STOPWORDS or not letters[0][0].isupper():
        return ""
    if len(letters) == 2:
        return "possessive"
    return "" if first else "name"


def similarities(vectors: MessageVectors, user: str, text: str) -> Similarities:
    """Cosines of the user's message vectors (hermes.memory.sessions.vectors.MessageVectors, only
    this user's) to ``text``, each message's and its window's. Embeds at most a few new
    messages first, as ``nearest`` does."""
    np = _np()
    matrix = vectors.matrix(user)
    if not len(matrix.ids):
        empty = np.zeros(0, np.float32)
        return Similarities(matrix.ids, empty, empty)
    query = vectors.embedder.embed_query(text)
    win = _windows_of(vectors, user, matrix)
    if matrix.cells is not None:  # a long history: only the cells nearest the query are read
        return matrix.probed(query, win.prev, win.next, win.norm)
    cosines = matrix.cosines(query)
    padded = np.append(cosines, np.float32(0))  # row -1 (no neighbour) reads the 0 at the end
    return Similarities(matrix.ids, cosines,
                        (cosines + padded[win.prev] + padded[win.next]) / win.norm)


def _rescaled(values: Any) -> Any:
    """0..1 over the candidates (NaN, no vector yet, counts as the least)."""
    np = _np()
    if not len(values) or np.all(np.isnan(values)):
        return np.zeros(len(values), np.float32)
    low, high = np.nanmin(values), np.nanmax(values)
    return np.nan_to_num((values - low) / ((high - low) or 1.0), nan=0.0)


def message_texts(db: Any, user: str, message_ids: Sequence[int],
                  head: int = 1000) -> dict[int, tuple[int, str]]:
    """(characters, the first ``head`` characters) of each of ``user``'s messages among
    ``message_ids`` (another user's: none), for the length and temporal parts: a pasted log of
    50,000 characters is measured in SQLite, not copied out whole for each search."""
    ids = list(dict.fromkeys(message_ids))
    texts: dict[int, tuple[int, str]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        texts.update((mid, (length, text)) for mid, length, text in db.execute(
            f"SELECT id, length(content), substr(content, 1, ?) FROM messages WHERE user = ? "
            f"AND id IN ({','.join('?' * len(chunk))})", [head, user, *chunk]).fetchall())
    return texts


def _word_trust(pool: Sequence[RankedMessage], message: Any, window: Any,
                cover: Mapping[int, float], params: SemanticParams) -> float:
    """How far this query's words are trusted (hermes.memory.words.trust): the best
    coverage x agreement among the word ranking's best ``trust_pool`` messages, where a
    message's agreement is its cosine (or its window's, the better) as a share of the best
    cosine among the candidates (1 for a message not embedded yet: nothing says otherwise);
    none when no word match comes within ``trust_nearest_word`` of that best cosine."""
    np = _np()
    if not len(message) or np.all(np.isnan(message)):
        return 1.0  # nothing embedded yet: the words alone, as before
    closest = float(np.nanmax(np.fmax(message, window)))
    if closest <= 0:
        return 1.0
    agreement = {}
    for r, m, w in zip(pool[: params.trust_pool], message, window, strict=False):
        if np.isnan(m) and np.isnan(w):
            agreement[r.message_id] = 1.0  # not embedded yet: its words speak for it
            continue
        cosine = max(0.0 if np.isnan(m) else float(m), 0.0 if np.isnan(w) else float(w))
        agreement[r.message_id] = min(1.0, cosine / closest)
    if params.trust_nearest_word > 0:
        worded = np.array([bool(r.parts.get("bm25")) for r in pool], dtype=bool)
        near_worded = np.fmax(message, window)[worded]
        # (a word match not embedded yet: nothing says its words are incidental)
        if len(near_worded) and not np.isnan(near_worded).any() \
                and float(near_worded.max()) < params.trust_nearest_word * closest:
            return 0.0
    held = {mid: c for mid, c in cover.items() if mid in agreement}
    return trust.trust(trust.evidence(held, agreement), params.trust_low, params.trust_high)


def _beyond_words(message: Any, words: Any, wordless: Any, params: SemanticParams) -> Any:
    """Each wordless candidate's lead in meaning over the word ranking's best
    ``beyond_pool`` word matches, x ``params.beyond``: cosines as a share of the way from the
    candidates' median to their best (0 for the rest)."""
    np = _np()
    out = np.zeros(len(words), np.float64)
    if not params.beyond or not len(message) or np.all(np.isnan(message)):
        return out
    middle, best = float(np.nanmedian(message)), float(np.nanmax(message))
    if best <= middle:
        return out
    share = (np.nan_to_num(message, nan=middle) - middle) / (best - middle)
    matched = np.flatnonzero(wordless == 0)
    if not len(matched):
        return out
    leaders = matched[np.argsort(-words[matched], kind="stable")][: params.beyond_pool]
    lead = float(share[leaders].max())
    return params.beyond * np.clip(share - lead, 0, None) * wordless


def rerank_by_meaning(
    ranked: Sequence[RankedMessage], sims: Similarities, *, extras: Sequence[int] = (),
    limit: int, params: SemanticParams = DEFAULT_SEMANTIC,
    lengths: Mapping[int, int] | None = None, timed: Collection[int] = (),
    voices: Mapping[int, int] | None = None, cover: Mapping[int, float] | None = None,
    floor: float = -1.0, chatter: Collection[int] = (), beside_chatter: Collection[int] = (),
) -> list[RankedMessage]:
    """The word ranking's best ``params.pool`` messages (and ``extras``, the nearest messages
    placed by it) re-scored by meaning, best first, then the rest of the word ranking in its
    order (on the same scale, without a meaning part); at most ``limit``. ``lengths``: the
    characters of the candidates (:func:`message_texts`; none known: no length part);
    ``timed``: the candidates that name a time, when the question asks when (else none);
    ``voices``: each candidate's :func:`hermes.memory.sessions.disclosure.speaks_of_self`
    (none known: no such part); ``cover``: the word ranking's best ``params.trust_pool``
    messages' coverage of the query's words (hermes.memory.sessions.fusion.coverage), whence
    how far the words are trusted (None: wholly, as before); ``floor``: the model's floor of
    meaning, under which nothing is a match by meaning (each result's ``matched``);
    ``chatter``: the candidates that say nothing ("hello there":
    hermes.memory.words.substance.is_chatter), never a match by meaning nor kept by it;
    ``beside_chatter``: the candidates next to one in their conversation, a match by meaning
    through their own cosine only (their window's is the greeting's)."""
    if not ranked:
        return []
    np = _np()
    wanted = set(extras)
    pool = list(ranked[: params.pool])
    pool += [r for r in ranked[params.pool :] if r.message_id in wanted]
    if not len(sims.ids):
        return list(ranked[:limit])
    words = np.array([r.score for r in pool], dtype=np.float64)
    top = float(words.max()) or 1.0
    message, window = sims.of([r.message_id for r in pool])
    near, around = _rescaled(message), _rescaled(window)
    # No bm25 part and no title/summary hit: in the candidates by meaning (or as a neighbour)
    wordless = np.array([not (r.parts.get("bm25") or r.parts.get("title/summary"))
                         for r in pool], dtype=np.float64)
    size = np.log1p(np.array([(lengths or {}).get(r.message_id) or 0 for r in pool],
                             dtype=np.float64))
    when = np.array([r.message_id in timed for r in pool], dtype=np.float64)
    told = np.array([(voices or {}).get(r.message_id, 0) for r in pool], dtype=np.float64)
    trusted = 1.0 if cover is None else _word_trust(pool, message, window, cover, params)
    # The word ranking's date part is a match of time, not of words: never weighed down.
    dated = np.array([r.parts.get("date", 0.0) for r in pool], dtype=np.float64)
    worded = (words - dated) / top
    own = (trusted * (worded + params.window * around + params.length * size)
           + dated / top + params.message * near + params.meaning_only * wordless
           + params.temporal * when + params.of_self * told)
    below = np.zeros(len(pool), np.float64)
    if trusted < 1 and params.within:
        best_words: dict[int, float] = {}
        for r, value in zip(pool, worded, strict=True):
            best_words[r.session_id] = max(best_words.get(r.session_id, -1e9), float(value))
        below = (1 - trusted) * params.within * (
            worded - np.array([best_words[r.session_id] for r in pool], dtype=np.float64))
        own = own + below
    best: dict[int, float] = {}
    for r, value in zip(pool, own, strict=True):
        best[r.session_id] = max(best.get(r.session_id, -1e9), float(value))
    of_session = _rescaled(np.array([best[r.session_id] for r in pool], dtype=np.float64))
    beyond = _beyond_words(message, words, wordless, params)
    total = own + trusted * (params.session * of_session + beyond)
    order = sorted(range(len(pool)), key=lambda i: (-total[i], -pool[i].message_id))
    said = np.array([r.message_id not in chatter for r in pool], dtype=bool)
    kept = _keep_nearest(order, total, message, wordless * said, floor, params.keep_nearest,
                         params.keep_count)
    order = order[:limit]
    alone = np.array([r.message_id in beside_chatter for r in pool], dtype=bool)
    close = _by_meaning(message, np.where(alone, message, window), floor,
                        params.shown_share) & said
    if trusted < 1 and params.in_place_of_words:
        close |= _in_place_of_words(
            order, pool, np.fmax(message, np.where(alone, message, window)), close,
            wordless * said, floor, params)
    out: list[RankedMessage] = []
    for i in order:
        r = pool[i]
        matched = ("both" if close[i] else "words") if r.matched else \
            ("meaning" if close[i] else "")
        parts = {k: v / top * (1.0 if k == "date" else trusted) for k, v in r.parts.items()}
        parts.update({"dense": params.message * float(near[i]),
                      "window": trusted * params.window * float(around[i]),
                      "meaning only": params.meaning_only * float(wordless[i]),
                      "length": trusted * params.length * float(size[i]),
                      "temporal": params.temporal * float(when[i]),
                      "of self": params.of_self * float(told[i]),
                      "session best": trusted * params.session * float(of_session[i]),
                      "beyond words": trusted * float(beyond[i]),
                      "words in its session": float(below[i]),
                      "nearest kept": kept.get(i, 0.0)})
        out.append(RankedMessage(r.message_id, r.session_id, float(total[i]),
                                 {k: v for k, v in parts.items() if v}, r.session_matched,
                                 matched))
    for r in ranked[params.pool :]:
        if len(out) >= limit:
            break
        if r.message_id not in wanted:
            out.append(RankedMessage(r.message_id, r.session_id, r.score / top,
                                     {k: v / top for k, v in r.parts.items()}, r.session_matched,
                                     r.matched))
    return out


def _keep_nearest(order: list[int], total: Any, message: Any, wordless: Any, floor: float,
                  k: int, count: int = 1) -> dict[int, float]:
    """The wordless among the ``count`` candidates nearest in meaning (their own cosine), those
    that reach ``floor``, all within the best ``k``: those ranked below it take the places of
    the last others there, the nearest first. ``order`` and ``total`` are changed in place;
    returns {its index: what its score gained} (one already among the best ``k`` but below the
    others it makes room past gains too, a little)."""
    np = _np()
    if k <= 0 or count <= 0 or len(order) <= k or not len(message) \
            or np.all(np.isnan(message)):
        return {}
    cosines = np.nan_to_num(message, nan=-np.inf)
    nearest = [int(i) for i in np.argsort(-cosines, kind="stable")[:count]]
    kept = [i for i in nearest if wordless[i] and float(cosines[i]) >= floor]
    moved = [i for i in kept if order.index(i) >= k]
    if not moved:
        return {}
    # They take the places of the last others among the best k: from the first of those
    # others, the kept ones (those already there too) come first, the nearest first, each
    # scored between the turn above and that other, so that the stages after this one see
    # them there.
    others = [i for i in order[:k] if i not in kept]
    place = order.index(others[-len(moved)])
    block = [i for i in kept if i in moved or order.index(i) >= place]
    for i in block:
        order.remove(i)
    below = float(total[order[place]])
    above = float(total[order[place - 1]]) if place >= 1 else below + 1.0
    gains: dict[int, float] = {}
    for at, i in enumerate(block, start=1):
        raised = above - (above - below) * at / (len(block) + 1)
        gains[i] = raised - float(total[i])
        total[i] = raised
        order.insert(place + at - 1, i)
    return gains


def _in_place_of_words(order: Sequence[int], pool: Sequence[RankedMessage], cosine: Any,
                       close: Any, wordless: Any, floor: float, params: SemanticParams) -> Any:
    """Which wordless candidates under the model's ``floor`` (from ``params.floor_share`` of
    it, and at ``params.shown_share`` of the best candidate) among the best
    ``params.in_place_of_words`` of ``order`` rank above a word match that is no nearer in
    meaning: a match by meaning in that word match's place. ``cosine``: each candidate's, or
    its window's, the better (as :func:`_by_meaning` reads them)."""
    np = _np()
    out = np.zeros(len(pool), dtype=bool)
    if not len(pool) or np.all(np.isnan(cosine)):
        return out
    near = np.nan_to_num(cosine, nan=-1.0)
    least = max(floor * params.floor_share, params.shown_share * float(near.max()))
    under = [(at, i) for at, i in enumerate(order[: params.in_place_of_words])
             if not close[i] and not pool[i].matched and wordless[i] and near[i] >= least]
    if not under:
        return out
    ranked = np.asarray(order, dtype=np.int64)
    words_only = np.array([pool[j].matched == "words" for j in order], dtype=bool) \
        & ~close[ranked]
    # from each place on, the farthest word match in meaning (inf: none)
    farthest = np.minimum.accumulate(np.where(words_only, near[ranked], np.inf)[::-1])[::-1]
    for at, i in under:
        out[i] = at + 1 < len(ranked) and float(farthest[at + 1]) <= float(near[i])
    return out


def _by_meaning(message: Any, window: Any, floor: float, share: float) -> Any:
    """Which candidates match by meaning: their cosine, or their window's, at the ``floor`` and
    at ``share`` of the best candidate's."""
    np = _np()
    near = np.nan_to_num(np.fmax(message, window), nan=-1.0)
    if not len(near):
        return near.astype(bool)
    return (near >= floor) & (near >= share * float(near.max()))
