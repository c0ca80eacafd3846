"""LoCoMo evidence recall: does Hermes's search bring back the turns that hold the answer?

    python scripts/bench_locomo.py                       # session search, every conversation
    python scripts/bench_locomo.py --mode facts          # LoCoMo observations in the fact store
    python scripts/bench_locomo.py --retriever fts-or    # the reference baseline, re-measured
    python scripts/bench_locomo.py --embeddings e5       # hybrid: bm25 + an embedding model
    python scripts/bench_locomo.py --embeddings e5 --retriever dense   # the model alone
    python scripts/bench_locomo.py --compare --vector-cache /tmp/vec    # README's table
    python scripts/bench_locomo.py --data /path/to/locomo10.json --json-out results.json

Each conversation is imported through Hermes's transcript import (``import_sessions``, the
function behind ``hermes sessions import``) into a fresh home, one Hermes user per conversation,
each LoCoMo session a Hermes session with its date, each turn a message with its speaker and its
dia_id as external id. Every question of categories 1-4 is then asked of
``SessionStore.search_messages`` (what the model's ``session_search`` tool builds on), and scored:

* turn R@k: the fraction of the question's evidence turns among the top k messages;
* session R@k: the fraction of the evidence sessions among the top k sessions, sessions ranked by
  their best message;

per category and overall, with query latency p50/p99, for the tuning half (conv-26 ... conv-43),
the held-out half and all. ``--mode facts`` loads LoCoMo's per-session observations into the fact
store (``FactStore.add`` with the turns they came from as source messages) and scores
``FactStore.search`` the same way, a fact counting for every turn it came from.

The data is CC BY-NC 4.0 and stays outside the repository (see ``locomo_data.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import locomo_data as data  # noqa: E402
import locomo_perturb  # noqa: E402
import recall_probes  # noqa: E402

from hermes.clock import FakeClock  # noqa: E402
from hermes.memory.embeddings.embedders import DEFAULT_MODEL, MODELS  # noqa: E402
from hermes.store.db import connect  # noqa: E402

KS = (1, 5, 10)
# Messages asked for per question: the top 10 score turns, the rest rank sessions.
RANKED = 50

# Figures from the data's README and the issue, measured the same way (1,536 questions).
BASELINES: list[tuple[str, dict[str, float | None]]] = [
    ("FTS5 unicode61, OR", {"turn@1": 0.234, "turn@5": 0.435, "turn@10": 0.513,
                            "sess@1": 0.506, "sess@5": 0.765, "sess@10": 0.869}),
    ("FTS5 porter + stopwords", {"turn@1": 0.303, "turn@5": 0.528, "turn@10": 0.610,
                                 "sess@1": 0.586, "sess@5": 0.836, "sess@10": 0.909}),
    ("DRAGON (LoCoMo paper)", {"turn@1": None, "turn@5": 0.588, "turn@10": None,
                               "sess@1": None, "sess@5": None, "sess@10": None}),
    ("goal", {"turn@1": None, "turn@5": 0.75, "turn@10": None,
              "sess@1": None, "sess@5": 0.93, "sess@10": None}),
]
METRICS = [f"turn@{k}" for k in KS] + [f"sess@{k}" for k in KS]


@dataclass
class Ranked:
    """What one question brought back: dia_ids in rank order (a fact may hold several)."""

    groups: list[list[str]]
    seconds: float


@dataclass
class Scored:
    sample_id: str
    category: int
    question: str
    evidence: list[str]
    top: list[list[str]]
    metrics: dict[str, float]
    seconds: float  # wall clock
    cpu: float  # this process's CPU time: what the query costs on a busy machine


# A retriever: set up for one conversation, then answer questions.
Searcher = Callable[[str], list[list[str]]]


# -- retrievers -------------------------------------------------------------------------------


# (messages, wall seconds, CPU seconds) of each conversation's indexing
INDEXED: list[tuple[int, float, float]] = []


def _import(conv: data.Conversation, home: Path, *, summaries: bool, embeddings: str | None = None,
            cache: str | None = None):
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.transcripts import import_sessions

    db = connect(home / "hermes.db")
    vectors = None
    if embeddings:
        from hermes.memory.sessions.vectors import MessageVectors

        vectors = MessageVectors(db, cached_embedder(embeddings, cache))
    # Questions are asked the day after the conversation's last session.
    store = SessionStore(db, clock=FakeClock(conv.sessions[-1].started_at + timedelta(days=1)),
                         vectors=vectors)
    report = import_sessions(store, conv.sample_id, data.to_import_lines(conv,
                                                                        summaries=summaries))
    if report.errors:
        raise SystemExit(f"{conv.sample_id}: import failed: {report.errors[:3]}")
    if vectors is not None:
        # What the daemon does as messages arrive: timed apart from the queries.
        start, cpu = time.perf_counter(), time.process_time()
        count = vectors.index(conv.sample_id)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        INDEXED.append((count, seconds, cpu))
    return db, store


def _dia_ids_by_message(db, user: str) -> dict[int, str]:
    rows = db.execute("SELECT id, external_id FROM messages WHERE user = ?", [user]).fetchall()
    return {r[0]: r[1] for r in rows}


def hermes_messages(conv: data.Conversation, home: Path, args) -> Searcher:
    """Hermes's ranked message search (the default)."""
    db, store = _import(conv, home, summaries=args.summaries, embeddings=args.embeddings,
                        cache=args.vector_cache)
    user = conv.sample_id
    # --with-facts: the home as a user has it, LoCoMo's observations learned as facts; the
    # fact store's hits (searched as the CLI does, inside the timing) point at their turns.
    facts = _load_facts(conv, db, args) if args.with_facts else None

    def fact_search(who: str, question: str, meaning: str | None):
        # as hermes.memory.Memory does: per-turn recall's search
        from hermes.memory.facts.recall import FactRecall
        from hermes.memory.sessions.fact_evidence import hits_for

        return hits_for(FactRecall(facts, facts.clock), who, question, meaning,
                        facts.vectors.model_id if facts.vectors is not None else None)

    def search(question: str) -> list[list[str]]:
        hits = store.search_messages(user, question, limit=RANKED,
                                     facts=fact_search if facts is not None else None)
        return [[hit.message.external_id] for hit in hits]

    return search


def dense_only(conv: data.Conversation, home: Path, args) -> Searcher:
    """The embedding model alone: the messages nearest to the question as asked."""
    db, store = _import(conv, home, summaries=False, embeddings=args.embeddings or DEFAULT_MODEL,
                        cache=args.vector_cache)
    user = conv.sample_id
    dia_of = _dia_ids_by_message(db, user)

    def search(question: str) -> list[list[str]]:
        return [[dia_of[mid]] for mid, _ in store.vectors.nearest(user, question, RANKED)]

    return search


def hermes_sessions(conv: data.Conversation, home: Path, args) -> Searcher:
    """``SessionStore.search`` as the CLI and the model's ``session_search`` tool show it: one
    best message per session (hybrid with ``--embeddings``, with the facts' evidence with
    ``--with-facts``, as :func:`hermes_messages`). Its turn figures count each session's one
    shown message; its session figures are the order it lists the conversations in."""
    db, store = _import(conv, home, summaries=args.summaries, embeddings=args.embeddings,
                        cache=args.vector_cache)
    user = conv.sample_id
    facts = _load_facts(conv, db, args) if args.with_facts else None

    def fact_search(who: str, question: str, meaning: str | None):
        from hermes.memory.facts.recall import FactRecall
        from hermes.memory.sessions.fact_evidence import hits_for

        return hits_for(FactRecall(facts, facts.clock), who, question, meaning,
                        facts.vectors.model_id if facts.vectors is not None else None)

    def search(question: str) -> list[list[str]]:
        hits = store.search(user, question, limit=RANKED,
                            facts=fact_search if facts is not None else ())
        return [[hit.match.external_id] for hit in hits if hit.match is not None]

    return search


def random_order(conv: data.Conversation, home: Path, args) -> Searcher:
    """A random ordering, the floor every retriever must clear: the messages in a random order
    (turn figures) and, for the session figures, the sessions in a random order of their own
    (each as likely as any other, whatever its length). Seeded per conversation."""
    import random

    rng = random.Random(f"random:{conv.sample_id}")
    turns = [t.dia_id for s in conv.sessions for t in s.turns]
    numbers = [s.number for s in conv.sessions]

    def search(question: str) -> list[list[str]]:
        order = turns[:]
        rng.shuffle(order)
        sessions = numbers[:]
        rng.shuffle(sessions)
        search.session_order = sessions
        return [[d] for d in order[:RANKED]]

    search.session_order = numbers
    return search


def _load_facts(conv: data.Conversation, db, args):
    """LoCoMo's observations as facts (their turns as source messages), embedded with
    ``--embeddings`` as the extraction worker would after writing them."""
    from hermes.config import FactsConfig
    from hermes.memory.facts.store import FactStore

    user = conv.sample_id
    by_dia = {v: k for k, v in _dia_ids_by_message(db, user).items()}
    sessions = dict(db.execute(
        "SELECT external_id, id FROM sessions WHERE user = ?", [user]).fetchall())
    vectors = None
    if args.embeddings:
        from hermes.memory.facts.vectors import FactVectors

        vectors = FactVectors(db, cached_embedder(args.embeddings, args.vector_cache))
    # Asked the day after the last session, as session search is; each fact dated when it was
    # said, as the extraction worker dates it (valid_from: the last message of its exchange).
    facts = FactStore(db, FactsConfig(), vectors=vectors,
                      clock=FakeClock(conv.sessions[-1].started_at + timedelta(days=1)))
    said = dict(db.execute("SELECT id, created_at FROM messages WHERE user = ?", [user]))
    held_in = dict(db.execute("SELECT id, session_id FROM messages WHERE user = ?", [user]))
    refused = 0
    for obs in conv.observations:
        sources = [by_dia[d] for d in obs.dia_ids]
        try:
            facts.add(
                user, obs.text, category="general", kind="episodic",
                source_session_id=_source_session(
                    sessions.get(f"{conv.sample_id}:session_{obs.session}"),
                    [held_in[m] for m in sources]),
                source_message_ids=sources,
                valid_from=max((said[m] for m in sources), default=None),
                # what the speaker said (as extraction learns it from their own conversation):
                # the transcripts are imported only to load them (an import's facts would start
                # at facts.outside_trust, hermes.memory.facts.provenance)
                source="said",
            )
        except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
            refused += 1
            print(f"  {conv.sample_id}: fact refused: {exc}", file=sys.stderr)
    args.notes.append(f"{conv.sample_id}: {len(conv.observations)} observations, "
                      f"{refused} refused, {_count(db, 'facts', user)} facts after merging")
    if vectors is not None:
        start, cpu = time.perf_counter(), time.process_time()
        count = vectors.index(user)
        INDEXED.append((count, time.perf_counter() - start, time.process_time() - cpu))
    return facts


def _source_session(named: int | None, held_in: list[int]) -> int | None:
    """The session a fact was learned in, as the extractor records it: the one holding its
    source turns. LoCoMo names the session of each observation, but ``--perturb
    merge-sessions`` / ``split-sessions`` renumber the sessions (the name then points at none,
    or at another): the named one when it holds a source turn, else the last source turn's."""
    if named is not None and (named in held_in or not held_in):
        return named
    return held_in[-1] if held_in else None


def hermes_facts(conv: data.Conversation, home: Path, args) -> Searcher:
    """LoCoMo's observations in the fact store; a fact stands for the turns it came from."""
    db, _ = _import(conv, home, summaries=False)
    user = conv.sample_id
    facts = _load_facts(conv, db, args)
    dia_of = _dia_ids_by_message(db, user)

    def by_store(question: str) -> list[list[str]]:
        found = facts.search(user, question, limit=RANKED, min_trust=0.0)
        return [[dia_of[m] for m in f.source_message_ids if m in dia_of] for f in found]

    sources = {fact_id: json.loads(raw or "[]") for fact_id, raw in db.execute(
        "SELECT id, source_message_ids FROM facts WHERE user = ?", [user])}

    def by_meaning(question: str) -> list[list[str]]:
        """Meaning alone (``--retriever dense``): the nearest facts by the fusion's own
        similarity (fact and exchange), nothing else."""
        similarity = facts.vectors.similarity(user, question) if facts.vectors else None
        near = similarity.nearest(RANKED) if similarity is not None else {}
        ranked = sorted(near, key=lambda i: (-near[i], -i))
        return [[dia_of[m] for m in sources[i] if m in dia_of] for i in ranked]

    search = by_meaning if args.retriever == "dense" else by_store
    # The turns some fact holds (for the misses by kind): the others no search can bring back.
    search.held = {dia_of[m].split("#")[0] for (raw,) in db.execute(
        "SELECT source_message_ids FROM facts f WHERE f.user = ? AND f.forgotten_at IS NULL "
        "AND f.superseded_by IS NULL", [user]) for m in json.loads(raw or "[]") if m in dia_of}
    return search


# Where each evidence turn of --mode facts ended up (the best rank of a fact holding it, among
# the RANKED asked for), as a share of the question's evidence: what a change moved.
MISS_KINDS = ("top 5", "ranked 6-10", f"ranked 11-{RANKED}", f"not in the top {RANKED}",
              "no fact holds it")


def miss_kinds(evidence: Sequence[str], groups: Sequence[Sequence[str]],
               held: set[str]) -> dict[str, float]:
    """Each evidence turn's share of the question under the kind of its best rank."""
    wanted = set(evidence)
    kinds = dict.fromkeys(MISS_KINDS, 0.0)
    best: dict[str, int] = {}
    for rank, group in enumerate(groups):
        for dia_id in group:
            best.setdefault(dia_id.split("#")[0], rank)
    for dia_id in wanted:
        rank = best.get(dia_id)
        kind = (MISS_KINDS[4] if dia_id not in held else MISS_KINDS[3] if rank is None
                else MISS_KINDS[0] if rank < 5 else MISS_KINDS[1] if rank < 10 else MISS_KINDS[2])
        kinds[kind] += 1 / len(wanted)
    return kinds


# (prompt chars, recalled chars) of each question's prompt in --mode prompt
PROMPT_SIZES: list[tuple[int, int]] = []


def hermes_prompt(conv: data.Conversation, home: Path, args) -> Searcher:
    """What the model is shown: the real prompt for the question asked in a new session, built
    by the turn engine's assembly (PromptBuilder) over the conversation's sessions (as imported
    transcripts) and its observations (as facts). Returns one group per shown fact (its turns)
    and one per shown past message."""
    from hermes.agent.prompt import PromptBuilder
    from hermes.config import Settings
    from hermes.runtime import Runtime

    db, store = _import(conv, home, summaries=args.summaries, embeddings=args.embeddings,
                        cache=args.vector_cache)
    user = conv.sample_id
    facts = _load_facts(conv, db, args)
    dia_of = _dia_ids_by_message(db, user)
    settings = Settings(home=str(home))
    scale = args.budget_scale
    agent = settings.agent
    agent.recall_char_budget = int(agent.recall_char_budget * scale)
    agent.recall_max_facts = int(agent.recall_max_facts * scale)
    agent.recall_messages_char_budget = int(agent.recall_messages_char_budget * scale)
    agent.recall_max_messages = int(agent.recall_max_messages * scale)
    if args.no_past_messages:
        agent.recall_messages_char_budget = 0
    rt = Runtime(settings, clock=store.clock)
    rt.__dict__["db"] = db  # the bench's connection (Runtime.db is a cached property)
    builder = PromptBuilder(rt.memory, facts=facts, sessions=store)
    session = store.create(user, "terminal")
    persona = len(builder.persona())

    def search(question: str) -> list[list[str]]:
        message = store.append(user, session.id, "user", question)
        try:
            prompt = builder.build(user, recall_query(question, args), [message],
                                   first_turn=True)
        finally:
            db.execute("DELETE FROM messages WHERE id = ?", [message.id])
        size = sum(len(str(m.get("content") or "")) for m in prompt.messages)
        PROMPT_SIZES.append((size, size - persona - len(question)))
        groups = [[dia_of[m] for m in f.source_message_ids if m in dia_of]
                  for f in prompt.shown_facts]
        groups += [[dia_of[m]] for m in prompt.shown_messages if m in dia_of]
        # "full": a past message counts only if its whole text is in the prompt (a line cut
        # short shows the turn but maybe not the answer); a fact for its turns, as in "shown"
        text = " ".join(" ".join(str(m.get("content") or "") for m in prompt.messages).split())
        search.full = {d for g in groups[:len(prompt.shown_facts)] for d in g} | {
            dia_of[m] for m in prompt.shown_messages
            if m in dia_of and " ".join(content_of[m].split()) in text}
        return groups

    content_of = dict(db.execute("SELECT id, content FROM messages WHERE user = ?", [user]))

    return search


# --rewrite: the background model's calls (hermes.agent.recall_rewrite), scripted: one per
# question that refers back, answered from scripts/recall_probes.py (nothing usable for others)
REWRITES: list[tuple[str, str | None]] = []


def recall_query(question: str, args) -> str:
    """What the turn's recall searches for ``question`` (``--rewrite``: the rewrite path, the
    model scripted; else the question)."""
    if not getattr(args, "rewrite", False):
        return question
    import asyncio

    from hermes.agent import recall_rewrite

    if not recall_rewrite.refers_back(question):
        return question
    scripted = recall_probes.scripted_rewrites()

    async def ask(messages: list[dict]) -> str:
        return scripted.get(question, "")

    found = asyncio.run(recall_rewrite.rewrite(ask, question))
    REWRITES.append((question, found))
    return recall_rewrite.recall_text(question, found)


class _CachedEmbedder:
    """An embedder whose passage vectors are kept in a file outside the repository (derived
    from CC BY-NC data), so that parameter sweeps do not embed the same texts again. Query
    vectors are computed every time: their cost is part of the figure."""

    def __init__(self, inner, path: Path) -> None:
        import numpy as np

        self._np = np
        self.inner = inner
        self.model_id = inner.model_id
        self.path = path
        self.store: dict[str, bytes] = {}
        self.dirty = False
        if path.exists():
            self.store = json.loads(path.read_text())
            self.store = {k: bytes.fromhex(v) for k, v in self.store.items()}

    def embed(self, texts):
        np = self._np
        todo = [t for t in texts if t not in self.store]
        if todo:
            for text, vector in zip(todo, self.inner.embed(todo), strict=True):
                self.store[text] = vector.astype(np.float32).tobytes()
            self.dirty = True
        return np.vstack([np.frombuffer(self.store[t], dtype=np.float32) for t in texts])

    def embed_query(self, text):
        return self.inner.embed_query(text)

    def save(self) -> None:
        if self.dirty:
            try:  # --vector-cache may name a folder not made yet
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(json.dumps({k: v.hex() for k, v in self.store.items()}))
            except OSError as exc:  # the figures are printed already: say it, in one line
                print(f"vector cache not saved ({exc})", file=sys.stderr)
            self.dirty = False


_CACHED: dict[Path, _CachedEmbedder] = {}


def cached_embedder(model: str, cache: str | None):
    import atexit

    from hermes.memory.embeddings.embedders import E5_SMALL, MINILM, Embedders

    inner = Embedders().get(model)
    if not cache:
        return inner
    # Per model id, not per name: a name whose model changed (minilm, now run as int8) never
    # reads the vectors of the model it was before. The files written before were named after
    # the model (e5.json, minilm.json) and still serve the model ids they were written with.
    legacy = {E5_SMALL: "e5", MINILM: "minilm"}
    path = Path(cache) / f"{legacy.get(inner.model_id, inner.model_id)}.json"
    if path not in _CACHED:
        _CACHED[path] = _CachedEmbedder(inner, path)
        atexit.register(_CACHED[path].save)
    return _CACHED[path]


def _count(db, table: str, user: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table} WHERE user = ?", [user]).fetchone()[0])


def reference_fts(tokenize: str, drop_stopwords: bool):
    """The README's reference retriever, rebuilt to check this script's scoring: one FTS5 table
    per conversation, turn text with speaker and caption, question terms OR-joined, bm25."""
    from hermes.store.fts import any_terms

    def make(conv: data.Conversation, home: Path, args) -> Searcher:
        conn = sqlite3.connect(":memory:")
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(dia_id UNINDEXED, body, "
                     f"tokenize='{tokenize}')")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [
            (turn.dia_id, f"{turn.speaker}: {turn.text}")
            for session in conv.sessions for turn in session.turns
        ])

        def search(question: str) -> list[list[str]]:
            expr = any_terms(question, drop_stopwords=drop_stopwords)
            if not expr:
                return []
            rows = conn.execute("SELECT dia_id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
                                [expr, RANKED]).fetchall()
            return [[r[0]] for r in rows]

        return search

    return make


RETRIEVERS: dict[str, Callable[..., Searcher]] = {
    "hermes": hermes_messages,
    "hermes-sessions": hermes_sessions,
    "dense": dense_only,
    "random": random_order,
    "fts-or": reference_fts("unicode61", drop_stopwords=False),
    "fts-porter": reference_fts("porter unicode61", drop_stopwords=True),
}


@contextmanager
def recall_params(**changes: float | int) -> Iterator[None]:
    """Try other ranking knobs (``--dense-weight``, ``--dense-candidates``) without editing
    memory.sessions.rerank: its defaults are replaced while the block runs. Choose on the tuning
    half only."""
    from hermes.memory.sessions import rerank

    before = rerank.DEFAULT_PARAMS
    kwdefaults = rerank.rerank.__kwdefaults__
    assert kwdefaults is not None and kwdefaults["params"] is before
    params = dataclasses.replace(before, **changes)
    rerank.DEFAULT_PARAMS = params  # read at call time by session search (dense_candidates)
    kwdefaults["params"] = params  # bound when rerank was defined
    try:
        yield
    finally:
        rerank.DEFAULT_PARAMS = before
        kwdefaults["params"] = before


@contextmanager
def semantic_params(**changes: float | int) -> Iterator[None]:
    """Other knobs of the re-scoring by meaning (``--semantic``, ``--versus``;
    hermes.memory.sessions.semantic.SemanticParams) while the block runs."""
    from hermes.memory.sessions import semantic

    before = semantic.DEFAULT_SEMANTIC
    semantic.DEFAULT_SEMANTIC = dataclasses.replace(before, **changes)
    try:
        yield
    finally:
        semantic.DEFAULT_SEMANTIC = before


# The meaning stage as it was before issue 35 (words trusted wholly, no lead for meaning beyond
# them, the nearest joining from the model's whole floor, no place kept for the wordless
# nearest): ``--versus before``.
BEFORE_35 = {"trust_low": -1.0, "trust_high": -1.0, "beyond": 0.0, "floor_share": 1.0,
             "shown_share": 0.0, "keep_nearest": 0, "in_place_of_words": 0}


def _knobs(items: Sequence[str]) -> dict[str, float | int]:
    knobs: dict[str, float | int] = {}
    for item in items:
        if item == "before":
            knobs.update(BEFORE_35)
            continue
        name, _, value = item.partition("=")
        knobs[name] = float(value) if "." in value or "e" in value else int(value)
    return knobs


def longer_histories(convs: list[data.Conversation], n: int) -> list[data.Conversation]:
    """Each conversation with the sessions of the next ``n - 1`` (in a ring) in its history,
    in the order of their dates, renumbered past its own (35 a conversation: LoCoMo's stop at
    35, the probes' start at 101), their speakers as they are: a home that talks with several
    people, as long as a real one. Its own questions, observations and summaries only."""
    if n > 4:
        raise ValueError("--history: at most 4 conversations a home (sessions 1-140)")
    out = []
    for i, conv in enumerate(convs):
        sessions = list(conv.sessions)
        for k in range(1, n):
            other = convs[(i + k) % len(convs)]
            if other is conv:
                break
            sessions += [dataclasses.replace(
                s, number=s.number + 35 * k,
                turns=[dataclasses.replace(t, dia_id=f"D{s.number + 35 * k}:"
                                                     f"{t.dia_id.split(':', 1)[1]}")
                       for t in s.turns]) for s in other.sessions]
        sessions.sort(key=lambda s: s.started_at)
        out.append(dataclasses.replace(conv, sessions=sessions))
    return out


# -- scoring ----------------------------------------------------------------------------------


def score(evidence: Sequence[str], groups: Sequence[Sequence[str]],
          sessions: Sequence[int] | None = None) -> dict[str, float]:
    """Turn and session recall at each k for one question (``sessions``: the session order,
    when the retriever ranks sessions apart from messages; else each session at its best
    message's place)."""
    wanted = set(evidence)
    wanted_sessions = {data.session_of(d) for d in wanted}
    session_order: list[int] = list(sessions or [])
    for group in groups if sessions is None else ():
        for dia_id in group:
            session = data.session_of(dia_id)
            if session not in session_order:
                session_order.append(session)
    # a message cut from a turn (--perturb sentences) is "D1:3#2": it stands for the turn
    groups = [[d.split("#")[0] for d in group] for group in groups]
    shown = {d for group in groups for d in group}
    result = {"shown": len(wanted & shown) / len(wanted)}  # --mode prompt: evidence coverage
    for k in KS:
        top_turns = {d for group in groups[:k] for d in group}
        result[f"turn@{k}"] = len(wanted & top_turns) / len(wanted)
        result[f"sess@{k}"] = len(wanted_sessions & set(session_order[:k])) / len(wanted_sessions)
    return result


def run_conversation(conv: data.Conversation, make: Callable[..., Searcher], args,
                     versus: list[Scored] | None = None) -> list[Scored]:
    """Each question of ``conv`` asked and scored. With ``versus`` (a list to fill) and
    ``args.versus``, each question is asked a second time with those SemanticParams, the two
    in alternating order (a paired A/B on one machine state): its rows go to ``versus``."""
    knobs = _knobs(getattr(args, "versus", None) or [])
    with tempfile.TemporaryDirectory(prefix="hermes-locomo-") as tmp:
        search = make(conv, Path(tmp), args)
        scored = []

        def ask(q: data.Question) -> Scored:
            start, cpu = time.perf_counter(), time.process_time()
            groups = search(q.question)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            metrics = score(q.evidence, groups, getattr(search, "session_order", None))
            full = getattr(search, "full", None)
            if full is not None:  # --mode prompt: evidence turns shown in full
                metrics["full"] = len(set(q.evidence) & full) / len(set(q.evidence))
            held = getattr(search, "held", None)
            if held is not None:  # --mode facts: where the evidence turns ended up
                metrics.update(miss_kinds(q.evidence, groups, held))
            return Scored(conv.sample_id, q.category, q.question, q.evidence, groups[:10],
                          metrics, seconds, cpu)

        for n, q in enumerate(q for q in conv.questions if q.evidence):
            if versus is None or not knobs:
                scored.append(ask(q))
                continue
            if n % 2:
                with semantic_params(**knobs):
                    versus.append(ask(q))
                scored.append(ask(q))
            else:
                scored.append(ask(q))
                with semantic_params(**knobs):
                    versus.append(ask(q))
        return scored


@dataclass
class Summary:
    n: int
    metrics: dict[str, float]
    p50_ms: float
    p99_ms: float
    cpu_p50_ms: float
    cpu_p99_ms: float
    by_category: dict[str, dict[str, float]] = field(default_factory=dict)


def _mean(rows: Sequence[Scored], metric: str) -> float:
    return statistics.fmean(r.metrics[metric] for r in rows) if rows else float("nan")


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summarise(rows: Sequence[Scored]) -> Summary:
    ms = [r.seconds * 1000 for r in rows]
    summary = Summary(len(rows), {m: _mean(rows, m) for m in METRICS}, _percentile(ms, 0.5),
                      _percentile(ms, 0.99), _percentile([r.cpu * 1000 for r in rows], 0.5),
                      _percentile([r.cpu * 1000 for r in rows], 0.99))
    for category, name in categories().items():
        subset = [r for r in rows if r.category == category]
        if not subset and category not in data.CATEGORIES:
            continue
        summary.by_category[f"{category} {name}"] = {"n": len(subset),
                                                      **{m: _mean(subset, m) for m in METRICS}}
    return summary


def categories() -> dict[int, str]:
    """LoCoMo's question categories, then the probes' (``--probes``)."""
    return {**data.CATEGORIES, **recall_probes.CATEGORIES}


# -- output -----------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "" if value is None or value != value else f"{value:.3f}"


def table(title: str, rows: list[tuple[str, int | str, dict[str, float | None]]]) -> str:
    head = ["", "n", *METRICS]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for name, n, metrics in rows:
        lines.append("| " + " | ".join([name, str(n), *(_fmt(metrics.get(m)) for m in METRICS)])
                     + " |")
    return "\n".join(lines)


def report(label: str, halves: dict[str, Summary]) -> str:
    parts = []
    overall = halves["all"]
    rows: list[tuple[str, int | str, dict[str, float | None]]] = []
    for name, metrics in overall.by_category.items():
        rows.append((name, int(metrics["n"]), metrics))
    rows.append(("**overall**", overall.n, overall.metrics))
    rows.extend((f"_{name}_", "", metrics) for name, metrics in BASELINES)
    parts.append(table(f"{label}: all conversations", rows))
    split_rows: list[tuple[str, int | str, dict[str, float | None]]] = [
        (name, s.n, s.metrics) for name, s in halves.items() if name != "all"
    ]
    tune, held = halves["tuning half"], halves["held-out half"]
    gap = {m: tune.metrics[m] - held.metrics[m] for m in METRICS}
    split_rows.append(("gap (tuning - held-out)", "", gap))
    parts.append(table(f"{label}: tuning half (conv-26..conv-43) vs held-out half", split_rows))
    s = halves["all"]
    parts.append(f"Latency per query (all): p50 {s.p50_ms:.2f} ms, p99 {s.p99_ms:.2f} ms wall "
                 f"clock; p50 {s.cpu_p50_ms:.2f} ms, p99 {s.cpu_p99_ms:.2f} ms CPU")
    return "\n\n".join(parts)


def paired(rows: Sequence[Scored], other: Sequence[Scored], name: str) -> str:
    """The same questions asked both ways in one run (``--versus``): recall moved, and the
    paired CPU cost per question (this run's defaults minus ``name``)."""
    diffs = [a.cpu - b.cpu for a, b in zip(rows, other, strict=True)]
    lines = [f"Paired ({len(diffs)} questions, alternating order): defaults - {name}"]
    for half, keep in (("tuning half", True), ("held-out half", False), ("all", None)):
        pick = [(a, b) for a, b in zip(rows, other, strict=True)
                if keep is None or (a.sample_id in data.TUNING_HALF) == keep]
        moved = {m: statistics.fmean(a.metrics[m] - b.metrics[m] for a, b in pick)
                 for m in ("turn@5", "sess@5")} if pick else {}
        lines.append(f"  {half}: turn R@5 {moved.get('turn@5', 0):+.3f}, "
                     f"session R@5 {moved.get('sess@5', 0):+.3f}")
    # The mean of the paired differences, 5 % trimmed at each end (a load spike): the two
    # orders alternate, so what the second run gets from the first (the query's embedding is
    # remembered) cancels out, which a median of the differences would not show.
    ordered = sorted(d * 1000 for d in diffs)
    cut = len(ordered) // 20
    kept = ordered[cut : len(ordered) - cut] or ordered
    lines.append(f"  CPU per question: p50 {_percentile([r.cpu * 1000 for r in rows], 0.5):.2f} "
                 f"vs {_percentile([r.cpu * 1000 for r in other], 0.5):.2f} ms, mean paired "
                 f"difference {statistics.fmean(kept):+.2f} ms (5 % trimmed)")
    return "\n".join(lines)


def misses_table(label: str, rows: Sequence[Scored]) -> str:
    """--mode facts: the share of evidence turns of each kind (MISS_KINDS), per category and
    half: a drop in the top 5 says whether the fact fell to a lower rank or out of the list."""
    head = ["", "n", *MISS_KINDS]
    lines = [f"### {label}: where the evidence turns ended up", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    groups = [(f"{c} {name}", [r for r in rows if r.category == c])
              for c, name in categories().items()]
    groups += [("tuning half", [r for r in rows if r.sample_id in data.TUNING_HALF]),
               ("held-out half", [r for r in rows if r.sample_id not in data.TUNING_HALF]),
               ("**all**", list(rows))]
    for name, subset in groups:
        lines.append("| " + " | ".join([name, str(len(subset)),
                                        *(_fmt(_mean(subset, k)) for k in MISS_KINDS)]) + " |")
    return "\n".join(lines)


@contextmanager
def _restored(cells_module, vectors_module, values: tuple[int, int]) -> Iterator[None]:
    """IVF_MIN and FACT_SCAN_ROWS as they were, once the run is over (--fact-cells)."""
    try:
        yield
    finally:
        cells_module.IVF_MIN, vectors_module.FACT_SCAN_ROWS = values


def halves_of(rows: Sequence[Scored]) -> dict[str, Summary]:
    return {
        "tuning half": summarise([r for r in rows if r.sample_id in data.TUNING_HALF]),
        "held-out half": summarise([r for r in rows if r.sample_id not in data.TUNING_HALF]),
        "all": summarise(rows),
    }


# --compare: session search's rows in README, each run in turn (a model not installed is
# skipped and said so). Plain FTS5 is the reference the relative gains are over.
COMPARE: list[tuple[str, str, str | None]] = [
    ("plain FTS5 (unicode61, OR)", "fts-or", None),
    ("FTS5 porter + stopwords", "fts-porter", None),
    ("random ordering", "random", None),
    ("MiniLM alone", "dense", "minilm"),
    ("Hermes bm25 (words only)", "hermes", None),
    ("Hermes + e5 re-rank", "hermes", "e5"),
    ("Hermes + MiniLM re-rank", "hermes", "minilm"),
    ("SessionStore.search, words only", "hermes-sessions", None),
    ("SessionStore.search + MiniLM", "hermes-sessions", "minilm"),
]


def _ratio(value: float, reference: float) -> str:
    return f"x{value / reference:.2f}" if reference and reference == reference else "-"


def compare(convs: Sequence[data.Conversation], args) -> str:
    """Every COMPARE row on the same questions: turn and session R@5 per half, the gain over
    plain FTS5 (x, per half), per-query CPU and, without --vector-cache, indexing speed."""
    from hermes.errors import HermesError
    from hermes.memory.embeddings.embedders import Embedders

    results: list[tuple[str, dict[str, Summary], str]] = []
    for name, retriever, model in COMPARE:
        if model:
            try:
                Embedders().get(model)
            except HermesError as exc:
                args.notes.append(f"{name}: skipped ({exc})")
                continue
        run_args = argparse.Namespace(**{**vars(args), "retriever": retriever,
                                         "embeddings": model})
        INDEXED.clear()
        rows: list[Scored] = []
        for conv in convs:
            rows.extend(run_conversation(conv, RETRIEVERS[retriever], run_args))
        print(f"  {name}: {len(rows)} questions", file=sys.stderr)
        indexing = ""
        if INDEXED and not args.vector_cache:
            count, cpu = sum(i[0] for i in INDEXED), sum(i[2] for i in INDEXED)
            indexing = f"{count / max(cpu, 1e-9):.0f}"
        elif INDEXED:
            indexing = "(cached)"
        results.append((name, halves_of(rows), indexing))
    plain = results[0][1] if results and results[0][0] == COMPARE[0][0] else None
    head = ["", "turn R@5 tuning", "held-out", "all", "x plain FTS5 tuning / held-out",
            "sess R@5 tuning", "held-out", "all", "CPU ms p50 / p99", "indexing msgs/s CPU"]
    asked = len(results[0][1]["all"].metrics and []) or (results[0][1]["all"].n if results else 0)
    what = f"probes: {args.probes}" if args.probes else "LoCoMo"
    lines = [f"### sessions compared ({what}, {asked:,} questions)", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for name, halves, indexing in results:
        tune, held, every = (halves[h] for h in ("tuning half", "held-out half", "all"))
        gain = "" if plain is None else " / ".join(
            _ratio(h.metrics["turn@5"], plain[half].metrics["turn@5"])
            for h, half in ((tune, "tuning half"), (held, "held-out half")))
        lines.append("| " + " | ".join([
            name, *(_fmt(h.metrics["turn@5"]) for h in (tune, held, every)), gain,
            *(_fmt(h.metrics["sess@5"]) for h in (tune, held, every)),
            f"{every.cpu_p50_ms:.1f} / {every.cpu_p99_ms:.1f}", indexing]) + " |")
    lines.append("| _goal_ | | | 0.750 | | | | 0.930 | <= 15 / <= 60 (with the query "
                 "embedding, one core) | >= 100 |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/bench/)")
    parser.add_argument("--mode", choices=["sessions", "facts", "prompt"], default="sessions")
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="prompt mode: multiply today's recall budgets (2 = twice)")
    parser.add_argument("--no-past-messages", action="store_true",
                        help="prompt mode: recalled facts only (as before past messages)")
    parser.add_argument("--retriever", choices=sorted(RETRIEVERS), default="hermes",
                        help="sessions mode: what to search with (default: hermes)")
    parser.add_argument("--with-facts", action="store_true",
                        help="sessions mode: also load LoCoMo's observations as facts (as "
                             "--mode prompt does); their hits are evidence for the sessions "
                             "and turns they came from (hermes.memory.sessions.fact_evidence)")
    parser.add_argument("--summaries", action="store_true",
                        help="also import LoCoMo's session summaries as session summaries")
    parser.add_argument("--embeddings", nargs="?", const=DEFAULT_MODEL, choices=sorted(MODELS),
                        help=f"hybrid recall: bm25 + this embedding model (default "
                             f"{DEFAULT_MODEL}; needs hermes[embeddings])")
    parser.add_argument("--dense-weight", type=float,
                        help="hybrid: RecallParams.dense_weight for this run")
    parser.add_argument("--dense-candidates", type=int,
                        help="hybrid: RecallParams.dense_candidates for this run")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="any RecallParams knob for this run (repeatable), e.g. "
                             "--param date_boost=0 to measure what the date signal adds")
    parser.add_argument("--semantic", action="append", default=[], metavar="NAME=VALUE",
                        help="any SemanticParams knob (the re-scoring by meaning) for this run "
                             "(repeatable); 'before': the meaning stage before issue 35")
    parser.add_argument("--versus", action="append", default=[], metavar="NAME=VALUE",
                        help="ask every question a second time with these SemanticParams "
                             "knobs, in alternating order, and report both side by side with "
                             "the paired CPU (repeatable; 'before': as before issue 35)")
    parser.add_argument("--fusion", choices=["zscore", "sum", "rrf"],
                        help="facts hybrid: how bm25 and cosine are fused (default: "
                             "hermes.memory.facts.vectors.FUSION)")
    parser.add_argument("--fusion-weight", type=float,
                        help="facts hybrid: the cosine's weight in the fusion")
    parser.add_argument("--session-weight", type=float,
                        help="facts hybrid: SESSION_WEIGHT, the share of the best fused score "
                             "of a fact's source session that it gains (0 = off)")
    parser.add_argument("--exchange-weight", type=float,
                        help="facts: the bm25 weight of a fact's exchange column "
                             "(hermes.memory.facts.records.EXCHANGE_WEIGHT)")
    parser.add_argument("--fact-cells", type=int, metavar="ROWS",
                        help="facts mode: cluster each conversation's fact vectors into cells "
                             "(as a user's are from 32,768 facts on) and scan about ROWS of them "
                             "per query (FACT_SCAN_ROWS), to measure what the cells' scan loses")
    parser.add_argument("--vector-cache", metavar="DIR",
                        help="keep passage vectors in DIR (outside the repository) across runs")
    parser.add_argument("--compare", action="store_true",
                        help="sessions mode: plain FTS5, Porter FTS5, Hermes bm25 and Hermes "
                             "with each installed embedding model, side by side")
    parser.add_argument("--conversations", nargs="*", help="only these sample ids")
    parser.add_argument("--perturb", action="append", default=[],
                        choices=sorted(locomo_perturb.PERTURBATIONS),
                        help="rewrite the data to look less like LoCoMo before every retriever "
                             "sees it (repeatable; see scripts/locomo_perturb.py)")
    parser.add_argument("--rewrite", action="store_true",
                        help="prompt mode: a question that refers back gets the turn's one "
                             "query rewrite first (hermes.agent.recall_rewrite), the model "
                             "scripted by scripts/recall_probes.py; counts the calls")
    parser.add_argument("--probes", choices=["implicit", "hard", "paraphrase", "refers-back"],
                        help="ask Hermes's own probes instead of LoCoMo's questions: each "
                             "probe's exchange inserted as a two-turn session of its own "
                             "(scripts/recall_probes.py)")
    parser.add_argument("--history", type=int, default=1, metavar="N",
                        help="each home holds its conversation and the sessions of the next "
                             "N-1 (a history N times as long; its own questions only), e.g. "
                             "--probes hard --history 3")
    parser.add_argument("--probe-facts", action="store_true",
                        help="with --probes: each cue is also learned as a fact (its own words, "
                             "its turn as the source), for --mode facts / prompt / --with-facts")
    parser.add_argument("--json-out", help="results file (default: bench-results/locomo-*.json)")
    parser.add_argument("--show-misses", type=int, default=0, metavar="N",
                        help="print N questions whose evidence missed the top 5")
    args = parser.parse_args(argv)
    args.notes = []
    INDEXED.clear()
    PROMPT_SIZES.clear()
    REWRITES.clear()
    if args.mode == "prompt" and "shown" not in METRICS:
        METRICS.insert(0, "shown")  # the headline: evidence turns anywhere in the prompt
        METRICS.insert(1, "full")  # the same, a past message counting only if not cut short
    try:
        convs, loaded = data.load(args.data)
    except data.DataMissing as exc:
        print(f"bench_locomo: {exc}", file=sys.stderr)
        return 2
    if args.conversations:
        convs = [c for c in convs if c.sample_id in set(args.conversations)]
    convs = locomo_perturb.perturb(convs, args.perturb)
    if args.history > 1:
        convs = longer_histories(convs, args.history)
    if args.probes:
        convs = recall_probes.insert(convs, args.probes, facts=args.probe_facts)
    make = {"facts": hermes_facts, "prompt": hermes_prompt}.get(args.mode) \
        or RETRIEVERS[args.retriever]
    knobs = {name: value for name, value in (("dense_weight", args.dense_weight),
                                             ("dense_candidates", args.dense_candidates))
             if value is not None}
    for item in args.param:
        name, _, value = item.partition("=")
        knobs[name] = float(value) if "." in value else int(value)
    label = "facts: FactStore.search" if args.mode == "facts" else (
        f"prompt: what the model is shown (budgets x{args.budget_scale:g}"
        f"{', facts only' if args.no_past_messages else ''})") if args.mode == "prompt" else {
        "hermes": "sessions: SessionStore.search_messages",
        "hermes-sessions": "sessions: SessionStore.search (best message per session)",
        "dense": f"sessions: {args.embeddings or DEFAULT_MODEL} embeddings alone",
    }.get(args.retriever, f"reference: {args.retriever}")
    if args.mode == "facts" and args.retriever == "dense":
        label = f"facts: {args.embeddings} embeddings alone (the nearest facts)"
    if args.embeddings and args.retriever != "dense":
        label += f" + {args.embeddings} embeddings (hybrid)"
    if knobs:
        label += " (" + ", ".join(f"{k}={v}" for k, v in knobs.items()) + ")"
    if args.summaries:
        label += " + LoCoMo session summaries"
    if args.with_facts and args.mode == "sessions":
        label += " + LoCoMo observations as facts"
    if args.rewrite:
        label += " (rewrite, scripted model)"
    if args.probes:
        label += f" (probes: {args.probes})"
        args.notes.append(f"probes: {args.probes}, {sum(len(c.questions) for c in convs)} "
                          "questions, each exchange a two-turn session of its own")
    if args.history > 1:
        label += f" (histories of {args.history} conversations)"
        args.notes.append(f"each home: its conversation and the next {args.history - 1}'s "
                          "sessions, its own questions")
    if args.perturb:
        label += " (perturbed: " + ", ".join(args.perturb) + ")"
        args.notes.append("perturbed: " + ", ".join(args.perturb))

    print(f"LoCoMo: {loaded.conversations} conversations, {loaded.sessions} sessions, "
          f"{loaded.turns} turns, {loaded.questions} questions in categories 1-4 "
          f"({loaded.questions_without_evidence} without resolvable evidence, not scored); "
          f"{len(loaded.evidence_skipped)} evidence ids skipped: "
          + "; ".join(loaded.evidence_skipped), file=sys.stderr)
    if args.compare:
        print(compare(convs, args))
        for note in args.notes:
            print(f"note: {note}")
        return 0
    rows: list[Scored] = []
    started = time.perf_counter()
    from hermes.memory.facts import vectors as fact_vectors

    if args.fusion:
        fact_vectors.FUSION = args.fusion
        label += f" (fusion {args.fusion})"
    if args.fusion_weight is not None:
        fact_vectors.DENSE_WEIGHT = args.fusion_weight
        label += f" (fusion weight {args.fusion_weight})"
    if args.session_weight is not None:
        fact_vectors.SESSION_WEIGHT = args.session_weight
        label += f" (session weight {args.session_weight})"
    if args.exchange_weight is not None:
        from hermes.memory.facts import records as fact_records
        from hermes.memory.facts import search as fact_search

        fact_search.BM25 = fact_records.BM25.replace(
            f", {fact_records.EXCHANGE_WEIGHT})", f", {args.exchange_weight})")
        label += f" (exchange weight {args.exchange_weight})"
    from hermes.memory.vectors import cells as vector_cells

    scan_before = (vector_cells.IVF_MIN, fact_vectors.FACT_SCAN_ROWS)
    if args.fact_cells:
        vector_cells.IVF_MIN, fact_vectors.FACT_SCAN_ROWS = 1, args.fact_cells
        label += f" (fact cells, ~{args.fact_cells} rows scanned)"
    versus: list[Scored] = []
    semantic = _knobs(args.semantic)
    if semantic:
        label += " (semantic " + ", ".join(f"{k}={v}" for k, v in semantic.items()) + ")"
    with recall_params(**knobs), semantic_params(**semantic), \
            _restored(vector_cells, fact_vectors, scan_before):
        for conv in convs:
            rows.extend(run_conversation(conv, make, args, versus))
            print(f"  {conv.sample_id}: {sum(r.sample_id == conv.sample_id for r in rows)} "
                  "questions", file=sys.stderr)
    halves = halves_of(rows)
    print(report(label, halves))
    if versus:
        other = " ".join(args.versus)
        print("\n\n" + report(f"{label} versus {other}", halves_of(versus)))
        print("\n" + paired(rows, versus, other))
    if rows and MISS_KINDS[0] in rows[0].metrics:
        print("\n\n" + misses_table(label, rows))
    if args.rewrite:
        print(f"Rewrites: {len(REWRITES)} background-model calls for {len(rows)} questions "
              f"({len(REWRITES) / max(1, len(rows)):.2f} a turn; "
              f"{sum(1 for _, found in REWRITES if found)} answered)")
    if PROMPT_SIZES:
        sizes = [p[0] for p in PROMPT_SIZES]
        recalled = [p[1] for p in PROMPT_SIZES]
        print(f"Prompt size (all messages, characters): p50 {_percentile(sizes, 0.5):,.0f}, "
              f"p99 {_percentile(sizes, 0.99):,.0f}; without the persona and the question: "
              f"p50 {_percentile(recalled, 0.5):,.0f}, p99 {_percentile(recalled, 0.99):,.0f}")
    for note in args.notes:
        print(f"note: {note}")
    if INDEXED:
        count = max(1, sum(i[0] for i in INDEXED))
        print(f"Indexing: {count} messages, {sum(i[1] for i in INDEXED) / count * 1000:.1f} s "
              f"per 1,000 messages wall clock, {sum(i[2] for i in INDEXED) / count * 1000:.1f} s "
              "CPU")
    if args.show_misses:
        misses = [r for r in rows if r.metrics["turn@5"] < 1][: args.show_misses]
        for r in misses:
            print(f"MISS {r.sample_id} c{r.category} {r.question!r} evidence={r.evidence} "
                  f"top5={r.top[:5]}")
    out = Path(args.json_out) if args.json_out else (
        ROOT / "bench-results"
        / f"locomo-{args.mode}-{args.retriever}-{datetime.now(UTC):%Y%m%dT%H%M%S}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "label": label, "mode": args.mode, "retriever": args.retriever,
        "embeddings": args.embeddings, "recall_params": knobs,
        "indexing": {"messages": sum(i[0] for i in INDEXED),
                     "seconds": round(sum(i[1] for i in INDEXED), 2),
                     "cpu_seconds": round(sum(i[2] for i in INDEXED), 2)},
        "summaries": args.summaries, "seconds": round(time.perf_counter() - started, 1),
        "prompt_sizes": PROMPT_SIZES if args.mode == "prompt" else None,
        "load": {"questions": loaded.questions, "scored": len(rows),
                 "evidence_skipped": loaded.evidence_skipped},
        "results": {name: {"n": s.n, **{m: round(v, 4) for m, v in s.metrics.items()},
                           "p50_ms": round(s.p50_ms, 3), "p99_ms": round(s.p99_ms, 3),
                           "cpu_p50_ms": round(s.cpu_p50_ms, 3),
                           "by_category": s.by_category} for name, s in halves.items()},
        "baselines": dict(BASELINES), "notes": args.notes,
        "misses": {name: {k: round(_mean(subset, k), 4) for k in MISS_KINDS} for name, subset in (
            ("tuning half", [r for r in rows if r.sample_id in data.TUNING_HALF]),
            ("held-out half", [r for r in rows if r.sample_id not in data.TUNING_HALF]),
            ("all", rows))} if rows and MISS_KINDS[0] in rows[0].metrics else None,
        # per question, in the data's order (no text: the data stays outside the repository),
        # for paired comparisons between runs
        "questions": [{"sample_id": r.sample_id, "category": r.category,
                       **{m: round(r.metrics[m], 4) for m in METRICS},
                       "ms": round(r.seconds * 1000, 2)} for r in rows],
    }, indent=2), encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
