"""LoCoMo reshaped to look less like LoCoMo: robustness checks for the word ranking.

LoCoMo has a shape real chats between people often lack: image captions inside turns
(``blip_caption``), a speaker's name in nearly every question (1,516 of 1,536) matching the
speaker of the turns that answer it, dated sessions of ~20 turns, questions whose dates are the
session dates, one long turn per message, and an observation (a fact, in ``--mode facts`` and
wherever the home's facts are loaded) for nearly every turn. Each perturbation below rewrites
the conversations (turns, sessions, questions or observations, never the evidence) so that one
of those is gone; a ranking signal whose gain vanishes or turns negative under a plausible
perturbation fits LoCoMo's shape rather than conversation in general.

    python scripts/bench_locomo.py --perturb no-captions --perturb merge-sessions

Every retriever sees the same rewritten data (the plain FTS5 reference too), so the gain over
plain FTS5 is measured under the same perturbation.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import locomo_data as data

_CAPTION = re.compile(r"\n?\[shared an image: [^\]]*\]")


def no_captions(conv: data.Conversation) -> data.Conversation:
    """Image captions gone: an image is ``[image]``, as a chat export shows it."""
    sessions = [dataclasses.replace(s, turns=[
        dataclasses.replace(t, text=_CAPTION.sub("", t.text).strip() or "[image]")
        for t in s.turns]) for s in conv.sessions]
    return dataclasses.replace(conv, sessions=sessions)


def _name_pattern(conv: data.Conversation) -> re.Pattern[str]:
    names: set[str] = set()
    for speaker in conv.speakers:
        names.update(speaker.split())
        names.add(speaker.split()[0][:3])  # "Mel" for Melanie, "Jo" would need more
    names = {n for n in names if len(n) >= 3}
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return re.compile(rf"\b({alternatives})('s)?\b")


def no_names(conv: data.Conversation) -> data.Conversation:
    """Questions without the speakers' names ("What did Caroline research?" -> "What did they
    research?"): asked by one of the two people, or about "my friend"."""
    pattern = _name_pattern(conv)

    def strip(question: str) -> str:
        return pattern.sub(lambda m: "their" if m.group(2) else "they", question)

    return dataclasses.replace(conv, questions=[
        dataclasses.replace(q, question=strip(q.question)) for q in conv.questions])


def swap_names(conv: data.Conversation) -> data.Conversation:
    """The two speakers' names swapped in the questions: a measuring device, not a plausible
    chat. LoCoMo's questions name the person who said the answer (96 % of the evidence turns of a
    question naming one speaker are that speaker's); here they name the other one, so a signal
    that trusts the name is measured where the name points the wrong way."""
    first = [s.split()[0] for s in conv.speakers]
    swap = {first[0]: first[1], first[1]: first[0],
            first[0][:3]: first[1], first[1][:3]: first[0]}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, swap), key=len, reverse=True))
                         + r")\b")
    return dataclasses.replace(conv, questions=[
        dataclasses.replace(q, question=pattern.sub(lambda m: swap[m.group(1)], q.question))
        for q in conv.questions])


def handles(conv: data.Conversation) -> data.Conversation:
    """Speakers known by a handle (a phone number, as in a chat export of unsaved contacts),
    not by the name the questions use; names said inside the turns stay."""
    rename = {name: f"+1555010{i}" for i, name in enumerate(conv.speakers)}
    sessions = [dataclasses.replace(s, turns=[
        dataclasses.replace(t, speaker=rename.get(t.speaker, t.speaker)) for t in s.turns])
        for s in conv.sessions]
    return dataclasses.replace(conv, sessions=sessions,
                               speakers=(rename[conv.speakers[0]], rename[conv.speakers[1]]))


def _timed(session: data.LocomoSession) -> list[data.Turn]:
    """Turns with their own time, so that a session can be cut or glued without moving them."""
    return [t if t.created_at else dataclasses.replace(
        t, created_at=session.started_at + i * data.TURN_SPACING)
        for i, t in enumerate(session.turns)]


def merge_sessions(conv: data.Conversation, size: int = 3) -> data.Conversation:
    """Every ``size`` consecutive sessions are one (~65 turns, days apart inside it), as a
    chat app that keeps one thread per contact; each turn keeps its own date."""
    merged = []
    for start in range(0, len(conv.sessions), size):
        group = conv.sessions[start : start + size]
        merged.append(data.LocomoSession(group[0].number, group[0].started_at,
                                         [t for s in group for t in _timed(s)]))
    return dataclasses.replace(conv, sessions=merged)


def split_sessions(conv: data.Conversation, size: int = 6) -> data.Conversation:
    """Sessions cut every ``size`` turns (short exchanges, as when a chat is split at pauses)."""
    pieces = []
    for s in conv.sessions:
        turns = _timed(s)
        for k, start in enumerate(range(0, len(turns), size)):
            chunk = turns[start : start + size]
            pieces.append(data.LocomoSession(s.number * 100 + k, chunk[0].created_at, chunk))
    return dataclasses.replace(conv, sessions=pieces)


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
_SECOND = data.TURN_SPACING / 30


def sentences(conv: data.Conversation) -> data.Conversation:
    """Each turn sent as several messages, one a sentence (how people type in a chat app); the
    pieces keep the turn's id with a ``#n`` suffix, so evidence still names the turn."""
    sessions = []
    for s in conv.sessions:
        turns = []
        for t in _timed(s):
            parts = [p for p in _SENTENCE.split(t.text) if p.strip()] or [t.text]
            turns.extend(dataclasses.replace(t, dia_id=t.dia_id if i == 0 else f"{t.dia_id}#{i}",
                                             text=p, created_at=t.created_at + i * _SECOND)
                         for i, p in enumerate(parts))
        sessions.append(dataclasses.replace(s, turns=turns))
    return dataclasses.replace(conv, sessions=sessions)


def no_dates(conv: data.Conversation) -> data.Conversation:
    """Questions without the dates they name ("... in July 2023?" -> "...?"): LoCoMo's are the
    session dates, which a real question need not know."""
    from hermes.memory.words.dates import time_spans

    def strip(question: str) -> str:
        for span in sorted(time_spans(question), key=lambda s: -len(s.text)):
            question = re.sub(rf"\s*(?:on|in|during)?\s*{re.escape(span.text)}", "", question,
                              flags=re.I)
        return " ".join(question.split()).replace(" ?", "?")

    return dataclasses.replace(conv, questions=[
        dataclasses.replace(q, question=strip(q.question)) for q in conv.questions])


def half_facts(conv: data.Conversation) -> data.Conversation:
    """A random half of the observations gone (the same half every run: seeded by the sample
    id): a home whose extractor learned a fact from some turns, not from nearly every one."""
    import random

    draw = random.Random(conv.sample_id)
    return dataclasses.replace(conv, observations=[
        o for o in conv.observations if draw.random() < 0.5])


def few_facts(conv: data.Conversation) -> data.Conversation:
    """Only each session's first observation (~1 fact a session instead of ~9): facts few and
    mostly about something else than the question."""
    seen: set[int] = set()
    kept = []
    for o in conv.observations:
        if o.session not in seen:
            seen.add(o.session)
            kept.append(o)
    return dataclasses.replace(conv, observations=kept)


PERTURBATIONS: dict[str, Callable[[data.Conversation], data.Conversation]] = {
    "no-captions": no_captions,
    "no-names": no_names,
    "swap-names": swap_names,
    "handles": handles,
    "merge-sessions": merge_sessions,
    "split-sessions": split_sessions,
    "sentences": sentences,
    "no-dates": no_dates,
    "half-facts": half_facts,
    "few-facts": few_facts,
}


def perturb(convs: list[data.Conversation], names: list[str]) -> list[data.Conversation]:
    for name in names:
        convs = [PERTURBATIONS[name](c) for c in convs]
    return convs
