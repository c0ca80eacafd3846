"""Session search's coverage of a query's words by messages (hermes.memory.words.trust says
how far the words are trusted from it): read from the messages' text as the index matches it,
the first _WORD_CHARS characters, without a query of the index per message.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

from hermes.memory.sessions.bm25 import fold, term_pattern
from hermes.memory.words.trust import QueryWords

_WORD_CHARS = 1000  # the first this-many characters of a candidate are looked at


def coverage(db: sqlite_utils.Database, user: str, words: QueryWords,
             message_ids: Sequence[int]) -> dict[int, float]:
    """Each of ``user``'s messages among ``message_ids``: the idf-weighted share of the query's
    content words it holds (in its text or its speaker's name, as the index matches them; the
    first _WORD_CHARS characters). Another user's messages: none."""
    ids = list(dict.fromkeys(message_ids))
    if not ids or not words.terms or words.total <= 0:
        return {}
    rows = db.execute(
        "SELECT id, coalesce(speaker, '') || ' ' || substr(content, 1, ?) FROM messages "
        f"WHERE user = ? AND id IN ({','.join('?' * len(ids))})",
        [_WORD_CHARS, user, *ids]).fetchall()
    patterns = [term_pattern(t) for t in words.terms]
    out = {}
    for mid, text in rows:
        folded = fold(text)
        held = 0.0
        for (literal, pattern), idf in zip(patterns, words.idf, strict=True):
            if literal in folded and (pattern is None or pattern.search(folded)):
                held += idf
        out[int(mid)] = held / words.total
    return out
