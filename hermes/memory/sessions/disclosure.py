"""Whom a message speaks of: its speaker ("I went to Lisbon with my sister") or the one it
is said to ("you must have loved it! how was your flight?").

What a person remembers about someone was told in the first person: the places, the jobs, the
things they did are said as "I ...", "my ...", "we ...". The turn that answers it speaks to the
teller ("wow, your photos are amazing!") and holds the same words and the same meaning, without
holding the fact. Session search by meaning gives a message that speaks of its speaker more than
of its listener a small part of its score, and one that speaks of the listener more the same
part less (hermes.memory.sessions.semantic, ``SemanticParams.of_self``); a message with neither,
or as much of both, gets none. Whoever speaks: it does not depend on who the question names.

English only, like the stopword list and hermes.memory.sessions.timewords: another language
simply gets no such part.
"""

from __future__ import annotations

import re

# Matched against the lowered text; "I'm", "I've", "we're" count by their "i"/"we".
_SELF = re.compile(r"\b(i|me|my|mine|myself|we|us|our|ours|ourselves)\b")
_LISTENER = re.compile(r"\b(you|your|yours|yourself|yourselves)\b")
# As with a time (timewords.TIME_SCAN_CHARS): only the start of a long message is read, on the
# reply path, for each of a search's ~120 candidates.
SCAN_CHARS = 1000


def speaks_of_self(text: str) -> int:
    """1 when ``text`` (its first SCAN_CHARS characters) says "I/my/we" more often than
    "you/your", -1 when less often, 0 when as often (or neither)."""
    head = text[:SCAN_CHARS].lower()
    told = len(_SELF.findall(head)) - len(_LISTENER.findall(head))
    return (told > 0) - (told < 0)
