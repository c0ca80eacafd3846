"""Benchmark the turn engine (issue 4): prompt assembly on a large memory, `hermes ask` start-up.

    python scripts/bench_turn.py            # 100k facts, 1M messages (a few minutes to build)
    python scripts/bench_turn.py --quick    # 10k facts, 100k messages
    python scripts/bench_turn.py --home DIR --no-startup --stages   # + CPU per stage
    python scripts/bench_turn.py --home DIR2 --words real  # English words (own home)

1. **Prompt assembly**: everything a turn does before the model call, on a database holding
   N facts and M messages for the user (plus another user's rows): read the session so far,
   search the fact store for the new message, render basic memory, read the context file, build
   the messages. p50/p99 over varied messages. Goal: p50 <= 10 ms. Measured in two
   configurations: the default (``hybrid``: sessions.embeddings on, MiniLM; the new message is
   embedded by the real model once per turn, and facts and past messages are re-scored by
   meaning against every vector of the user) and ``words`` (sessions.embeddings: false).
   ``--stages`` adds a table of CPU time per stage (inclusive: a stage's sub-stages are part
   of it), measured by wrapping the functions of each stage with a CPU-time counter (with the
   query embedded in turn: a stage's CPU is the process's). The
   query embedding runs on a worker thread while the turn's SQL runs when the load leaves a core
   free (hermes.memory.facts.query_ahead); ``--overlap`` always, ``--serial`` never. The
   machine's 1-minute load is printed with each table.
2. **`hermes ask` start-up**: a fresh `python -m hermes ask "..."` process on that home, stopped
   at the moment litellm starts to load (the first thing the model call needs): wall time from
   process start, CPU time, and resident memory. Goal: <= 1.5 s and <= 150 MB. Also shown: the
   same without pandas (present in the shared dev venv, absent from a clean install;
   sqlite-utils imports it when present), and with litellm loaded, for scale. On a busy
   machine the wall time inflates; the CPU time does not.

Each fact cites two messages of one of its user's sessions, as a learned fact does, so fact
search pays for the exchange text m018 indexes with it; ``--facts-without-sources`` builds the
facts of before (no exchange), on the same texts.

Vectors: every message and fact gets a synthetic unit vector of the model's size, written
straight into ``message_vectors`` / ``fact_vectors`` under the configured model's id (embedding
1M messages with the real model would take hours): a topic direction plus noise, so that
messages and facts of one topic lie near each other as real ones do. The scan and re-scoring
cost is the same as with real vectors; the query is embedded by the real model (its cost is
the "query embedding" stage), so its cosines to these vectors mean nothing and the candidates
found by meaning are arbitrary ones: a cost measure, not a recall measure (recall by meaning is
measured on LoCoMo by bench_locomo). ``--no-vectors`` leaves them out (the bench of before:
the model embedded the query, but scanned only the few messages it embedded itself).

The text is synthetic (a Zipf-distributed vocabulary and topic sentences, fixed seed). Results
are printed as tables and written to bench-results/bench_turn.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.agent import prompt as prompt_module  # noqa: E402
from hermes.agent.prompt import PromptBuilder  # noqa: E402
from hermes.clock import FakeClock, to_ts  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.memory import context as context_file  # noqa: E402
from hermes.memory.basic import BasicMemory  # noqa: E402
from hermes.memory.facts.store import content_key  # noqa: E402
from hermes.memory.sessions import past_messages  # noqa: E402
from hermes.memory.sessions.store import Message  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402

RESULTS = ROOT / "bench-results"
USER = "owner"
OTHER = "someone-else"
START = datetime(2026, 1, 1, tzinfo=UTC)

TOPICS = [
    "postgres database migration", "kubernetes cluster upgrade", "home lab network vlan",
    "garden shed woodwork", "sourdough starter feeding", "flight booking lisbon",
    "docker container networking", "python packaging release", "tax return paperwork",
    "marathon training plan", "grafana dashboard alerts", "family birthday presents",
    "nginx reverse proxy tls", "rust borrow checker errors", "camera firmware update",
    "budget spreadsheet categories", "backup rotation restic", "piano practice schedule",
]
FILLER = [
    "we", "should", "check", "whether", "the", "new", "setup", "still", "works", "after", "the",
    "change", "and", "note", "what", "happened", "last", "time", "so", "that", "nothing",
    "breaks", "again", "when", "we", "try", "it", "next", "week",
]


def vocabulary(rng: random.Random, size: int = 4000, words: str = "letters") -> list[str]:
    """The bench's words, most frequent first for zipf_words: ``letters``, random-letter words
    (4-10 letters; MiniLM splits each into ~2.3 word pieces, so a message costs about twice the
    tokens of a real one); ``real``, English words (:func:`real_words`)."""
    if words == "real":
        return real_words(size)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 10))))
    return sorted(words)


def real_words(size: int = 4000) -> list[str]:
    """The ``size`` most frequent English words of 4-10 letters that are not stopwords, from
    MiniLM's own tokenizer (its vocabulary lists whole words roughly by frequency: "with",
    "that", "from", ... "school", ...): one token each, as most English words are. Nothing of
    LoCoMo's; the same list on every machine with the embeddings-minilm extra."""
    from hermes.memory.embeddings.embedders import _minilm_tokenizer_path
    from hermes.store.fts import STOPWORDS

    tokens = json.loads(Path(_minilm_tokenizer_path()).read_text(encoding="utf-8"))
    ordered = sorted(tokens["model"]["vocab"].items(), key=lambda item: item[1])
    words = [w for w, _ in ordered
             if w.isascii() and w.isalpha() and 4 <= len(w) <= 10 and w not in STOPWORDS]
    return words[:size]


_ZIPF: list[float] = []


def zipf_words(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    # Zipf's law (s = 1): the word of rank r has weight 1/r; the commonest is ~11% of draws.
    if len(_ZIPF) != len(vocab):
        total = 0.0
        _ZIPF.clear()
        for rank in range(1, len(vocab) + 1):
            total += 1 / rank
            _ZIPF.append(total)
    return rng.choices(vocab, cum_weights=_ZIPF, k=n)


def sentence(rng: random.Random, vocab: list[str], topic: str) -> str:
    """A chatty message: topic words, rarer words and everyday filler."""
    words = zipf_words(rng, vocab, 8) + rng.sample(FILLER, 6) + topic.split()
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def fact_text(rng: random.Random, vocab: list[str], topic: str, i: int) -> str:
    """A fact: a short self-contained statement about a topic (no chatter)."""
    return f"{topic.capitalize()}: {' '.join(zipf_words(rng, vocab, 6))} (note {i})."


def question(rng: random.Random, vocab: list[str], topic: str) -> str:
    """What a user asks: a couple of topic words, a few rarer words, filler, stopwords."""
    words = rng.sample(topic.split(), 2) + zipf_words(rng, vocab, 3) + rng.sample(FILLER, 4)
    rng.shuffle(words)
    return "what about the " + " ".join(words) + "?"


def build_database(home: Path, n_facts: int, n_messages: int, seed: int = 7, *,
                   sources: bool = True, words: str = "letters") -> dict:
    rng = random.Random(seed)
    vocab = vocabulary(rng, words=words)
    settings = load_settings(home=home, environ={})
    rt = Runtime(settings, clock=FakeClock("2026-11-29T12:00:00+00:00"))
    db = rt.db
    started = time.perf_counter()
    # Facts: 90% for the user, 10% for another user (scoping must hold under load). Written
    # after the messages: each cites two messages of one of its user's sessions, as a learned
    # fact does (m018 indexes their text as the fact's exchange); --facts-without-sources
    # builds facts that cite none. The same texts either way.
    rows = []
    for i in range(n_facts):
        topic = rng.choice(TOPICS)
        text = fact_text(rng, vocab, topic, i)
        ts = to_ts(START + timedelta(minutes=i))
        user = OTHER if i % 10 == 9 else USER
        rows.append((user, text, content_key(text), "general", "semantic", "[]", topic, 0.5,
                     ts, ts))
    facts_s = time.perf_counter() - started
    # Sessions of 100 messages each; the last one is the conversation under test.
    per_session = 100
    n_sessions = max(1, n_messages // per_session)
    started = time.perf_counter()
    with db.conn:
        for s in range(n_sessions):
            user = OTHER if s % 10 == 9 else USER
            ts0 = START + timedelta(hours=s)
            cursor = db.conn.execute(
                "INSERT INTO sessions (user, source, channel_key, title, started_at, "
                "last_active_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [user, rng.choice(["discord", "terminal", "cron"]), f"bench:{s}",
                 rng.choice(TOPICS), to_ts(ts0), to_ts(ts0), to_ts(ts0 + timedelta(hours=1))])
            session_id = cursor.lastrowid
            topic = rng.choice(TOPICS)
            db.conn.executemany(
                "INSERT INTO messages (session_id, user, role, content, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(session_id, user, "user" if m % 2 == 0 else "assistant",
                  sentence(rng, vocab, topic), to_ts(ts0 + timedelta(seconds=m)))
                 for m in range(per_session)])
    messages_s = time.perf_counter() - started
    started = time.perf_counter()
    cite = random.Random(seed + 1)
    sessions_of = {u: [i for i, (s_user,) in enumerate(db.execute(
        "SELECT user FROM sessions ORDER BY id").fetchall()) if s_user == u] for u in (USER, OTHER)}
    cited = []
    for row in rows:
        owned = sessions_of[row[0]]
        if not sources or not owned:
            cited.append("[]")
            continue
        first = 1 + cite.choice(owned) * per_session + cite.randrange(per_session - 1)
        cited.append(json.dumps([first, first + 1]))
    with db.conn:
        db.conn.executemany(
            "INSERT INTO facts (user, content, content_key, category, kind, tags, entity_names, "
            "trust, created_at, updated_at, source_message_ids) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*r, c) for r, c in zip(rows, cited, strict=True)])
    facts_s += time.perf_counter() - started
    store = rt.memory.sessions
    current = store.create(USER, "terminal", channel_key="bench:current")
    for m in range(20):
        store.append(USER, current.id, "user" if m % 2 == 0 else "assistant",
                     sentence(rng, vocab, rng.choice(TOPICS)))
    basic = BasicMemory(db, clock=rt.clock)
    for i in range(40):
        basic.add(USER, f"Standing preference number {i}: {sentence(rng, vocab, 'misc')}"[:180])
    context_file.write_atomic(context_file.path_for(rt, USER),
                              "# Recent context\n" + "\n".join(
                                  f"- {sentence(rng, vocab, t)}" for t in TOPICS)[:3800])
    db.execute("ANALYZE")
    rt.close()
    return {"facts": n_facts, "facts_cite_messages": sources, "words": words,
            "messages": n_sessions * per_session + 20,
            "sessions": n_sessions + 1, "current_session": current.id,
            "build_facts_s": round(facts_s, 1), "build_messages_s": round(messages_s, 1),
            "db_mb": round((home / "hermes.db").stat().st_size / 1e6, 1)}


def _topic_of(text: str) -> int:
    """The index of the topic whose words a synthetic message or fact holds (-1: none)."""
    words = set(text.lower().replace(".", " ").replace(":", " ").split())
    for index, topic in enumerate(TOPICS):
        if words.issuperset(topic.split()):
            return index
    return -1


def add_vectors(home: Path, seed: int = 5, chunk: int = 20_000) -> dict:
    """Synthetic unit vectors for every message and fact of the home (see the module
    docstring), under the id of the configured model: a topic's direction plus as much noise
    again (cosine ~0.7 to the topic, ~0.5 between two messages of one topic, ~0 otherwise)."""
    import numpy as np

    settings = load_settings(home=home, environ={})
    rt = Runtime(settings, clock=FakeClock("2026-11-29T12:00:00+00:00"))
    embedder = rt.memory.embedders.get(settings.sessions.embedding_model)
    model, dim = embedder.model_id, int(embedder.embed(["dimension"]).shape[1])
    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((len(TOPICS) + 1, dim)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)

    def unit(topics: list[int]) -> np.ndarray:
        noise = rng.standard_normal((len(topics), dim)).astype(np.float32)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        vectors = centroids[topics] + noise
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    db = rt.db
    started = time.perf_counter()
    db.execute("DELETE FROM message_vectors WHERE model = ?", [model])
    db.execute("DELETE FROM fact_vectors WHERE model = ?", [model])
    last = 0
    vector_of: dict[int, np.ndarray] = {}  # messages cited by facts: their exchange's vector
    cited = {int(m) for (raw,) in db.execute("SELECT source_message_ids FROM facts")
             for m in json.loads(raw or "[]")}
    n_messages = 0
    while True:
        rows = db.execute(
            "SELECT id, user, content FROM messages WHERE id > ? AND role IN ('user', "
            "'assistant') ORDER BY id LIMIT ?", [last, chunk]).fetchall()
        if not rows:
            break
        vectors = unit([_topic_of(r[2]) for r in rows])
        with db.conn:
            db.conn.executemany(
                "INSERT INTO message_vectors (message_id, user, model, vector) "
                "VALUES (?, ?, ?, ?)",
                [(r[0], r[1], model, v.astype(np.float16).tobytes())
                 for r, v in zip(rows, vectors, strict=True)])
        for r, v in zip(rows, vectors, strict=True):
            if r[0] in cited:
                vector_of[r[0]] = v
        last = rows[-1][0]
        n_messages += len(rows)
    facts = db.execute(
        "SELECT id, user, content, content_key, source_message_ids FROM facts").fetchall()
    n_facts = 0
    for start in range(0, len(facts), chunk):
        rows = facts[start : start + chunk]
        vectors = unit([_topic_of(r[2]) for r in rows])
        out = []
        for r, v in zip(rows, vectors, strict=True):
            sources = [vector_of[m] for m in json.loads(r[4] or "[]") if m in vector_of]
            context = b""
            if sources:
                mean = np.mean(sources, axis=0)
                context = (mean / np.linalg.norm(mean)).astype(np.float16).tobytes()
            out.append((r[0], r[1], model, r[3], v.astype(np.float16).tobytes(), context))
        with db.conn:
            db.conn.executemany(
                "INSERT INTO fact_vectors (fact_id, user, model, content_key, vector, "
                "context_vector) VALUES (?, ?, ?, ?, ?, ?)", out)
        n_facts += len(rows)
    db.execute("ANALYZE")
    rt.close()
    return {"model": model, "dim": dim, "message_vectors": n_messages, "fact_vectors": n_facts,
            "build_vectors_s": round(time.perf_counter() - started, 1),
            "db_mb": round((home / "hermes.db").stat().st_size / 1e6, 1)}


def vector_pass(home: Path) -> float:
    """The daemon's background vector pass over the home, for both users: it embeds nothing
    here (every message and fact has a vector), and it is where a long history is prepared for
    search by meaning, when the install does that (an approximate index). CPU seconds."""
    rt = Runtime(load_settings(home=home, environ={}))
    started = time.process_time()
    for user in (USER, OTHER):
        if rt.memory.message_vectors is not None:
            rt.memory.message_vectors.index(user)
        if rt.memory.fact_vectors is not None:
            rt.memory.fact_vectors.index(user)
    rt.close()
    return time.process_time() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def as_message(text: str) -> Message:
    return Message(id=1 << 40, session_id=0, role="user", speaker=None, content=text,
                   created_at="2026-11-29T12:00:00.000000Z")


class StageTimer:
    """CPU time per stage of one turn: each stage's functions wrapped with a counter
    (inclusive: a stage's sub-stages are part of it; a function reached twice in a turn counts
    both times). Installed only for the ``--stages`` pass, removed after it."""

    def __init__(self) -> None:
        self.turn: dict[str, float] = {}
        self.turns: list[dict[str, float]] = []
        self._undo: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, name: str, label: str) -> None:
        original = getattr(owner, name)
        turn = self.turn

        def timed(*args: object, **kwargs: object) -> object:
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                turn[label] = turn.get(label, 0.0) + (time.process_time() - started) * 1000

        # Undone by setattr of what was there (a class's function, a module's, an instance's).
        self._undo.append((owner, name, owner.__dict__.get(name, original)
                           if isinstance(owner, type) else original))
        setattr(owner, name, timed)

    def install(self, rt: Runtime) -> None:
        for where, name, label in STAGE_ORDER:
            if where:
                module, _, attr = where.partition(":")
                owner: object = importlib.import_module(module)
                if attr:
                    owner = getattr(owner, attr)
                self.wrap(owner, name, label)
        if rt.memory.message_vectors is not None:  # the model, where it computes a vector
            embedder = rt.memory.message_vectors.embedder
            # A model loaded on first use (embeddings.Deferred) embeds a query through the
            # loaded model's own embed_query: wrap that model, not the wrapper around it (its
            # embed_query, which MiniLM no longer routes through embed; a query remembered
            # from earlier in the turn costs microseconds there).
            model = embedder.load() if hasattr(embedder, "load") else embedder
            self.wrap(model, "embed_query", "query embedding (model)")

    def next_turn(self, total_ms: float) -> None:
        self.turn["total"] = total_ms
        self.turns.append(dict(self.turn))
        self.turn.clear()

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._undo):
            if isinstance(owner, type) or not hasattr(type(owner), name):
                setattr(owner, name, original)
            else:
                delattr(owner, name)  # an instance attribute over the class's method
        self._undo.clear()

    def table(self, turns: list[dict[str, float]] | None = None) -> dict[str, dict[str, float]]:
        turns = self.turns if turns is None else turns
        labels = ["total", *(label for *_, label in STAGE_ORDER)]
        n = len(turns)
        out = {}
        for label in labels:
            values = [t.get(label, 0.0) for t in turns]
            if any(values):
                out[label] = {"mean_ms": round(statistics.mean(values), 2),
                              "p50_ms": round(statistics.median(values), 2),
                              "turns_with": sum(1 for v in values if v), "turns": n}
        return out


# (module[:class], function, label), in the order of a turn; an indented label is part of
# the stage above it. The query embedding is counted where the model computes it (the first
# stage to ask for it; the vector is then reused for the turn).
FACTS, PAST = "hermes.memory.facts", "hermes.memory.sessions"
STAGE_ORDER = [
    (f"{PAST}.store:SessionStore", "messages", "session read (conversation so far)"),
    (f"{FACTS}.recall:FactRecall", "_selective", "facts: selective words (doc counts)"),
    (f"{FACTS}.search:FactSearch", "search", "facts: search"),
    (f"{FACTS}.search:FactSearch", "newest", "facts: newest holding common words"),
    (f"{FACTS}.search", "_bm25", "  facts: bm25 (FTS5)"),
    # The query's vector and the scan wait for their first use (after bm25): Similarity._ready.
    (f"{FACTS}.vectors:Similarity", "_ready", "  facts: cosine to every fact"),
    (f"{FACTS}.vectors", "fuse", "  facts: fusion"),
    (f"{PAST}.past_messages", "counted_terms", "past: gate (word counts)"),
    (f"{PAST}.store:SessionStore", "search_messages", "past: search"),
    (f"{PAST}.search:SessionSearch", "_fts_candidates", "  past: bm25 candidates"),
    (f"{PAST}.search:SessionSearch", "_session_scores", "  past: title/summary scores"),
    (f"{PAST}.rerank", "rerank", "  past: word re-rank"),
    (f"{PAST}.semantic", "similarities", "  past: cosine to every message + windows"),
    (f"{PAST}.semantic", "rerank_by_meaning", "  past: re-score by meaning"),
    (f"{PAST}.store:SessionStore", "window", "past: excerpt windows"),
    (f"{PAST}.past_messages", "render", "past: render excerpts"),
    ("", "", "query embedding (model)"),
]


CONFIGS = {"hybrid": {}, "words": {"HERMES_SESSIONS__EMBEDDINGS": "false"}}
CONFIG_NAMES = {"hybrid": "the default: MiniLM, facts and past messages by meaning too",
                "words": "sessions.embeddings: false"}


def bench_assembly(home: Path, session_id: int, runs: int, seed: int = 11, *,
                   config: str = "hybrid", stages: bool = False, words: str = "letters") -> dict:
    rng = random.Random(seed)
    vocab = vocabulary(random.Random(7), words=words)
    rt = Runtime(load_settings(home=home, environ=CONFIGS[config]))
    if config == "hybrid" and rt.memory.message_vectors is None:
        raise SystemExit("hybrid: the embedding model did not load (pip install -e '.[test]')")
    builder = PromptBuilder(rt.memory)
    store = rt.memory.sessions
    queries = [question(rng, vocab, rng.choice(TOPICS)) for _ in range(runs)]
    # The worst case: a long chatty message whose words hit a large share of the facts.
    worst = [" ".join(rng.sample(TOPICS, 4)) + " " + sentence(rng, vocab, rng.choice(TOPICS))
             for _ in range(max(20, runs // 10))]
    results: dict[str, list[float]] = {"later turn": [], "first turn (+ context file)": [],
                                       "worst case: 5 topics at once": []}
    # CPU time as well: on a shared, loaded machine the wall time inflates, the CPU time less.
    cpu: dict[str, list[float]] = {label: [] for label in results}
    shown, excerpts = [], []
    # A later turn's CPU by kind: with past messages shown or without (the two kinds differ
    # by session search's cost, so the p50 of all depends on their mix).
    by_kind: dict[bool, list[float]] = {True: [], False: []}
    wall_by_kind: dict[bool, list[float]] = {True: [], False: []}
    load_before = os.getloadavg()[0]
    cases = (("later turn", False, queries), ("first turn (+ context file)", True, queries),
             ("worst case: 5 topics at once", False, worst))
    timer = StageTimer() if stages else None
    stage_kinds: list[bool] = []  # each stage-pass turn: did it show past messages
    for label, first, texts in cases:
        # A later turn extends the session's conversation (its snapshot taken once, at the
        # start); a first turn takes the snapshot (persona, basic memory, context file).
        conversation = builder.start(USER, store.messages(USER, session_id))
        for query in texts[:5]:  # warm the page cache (and load the vectors, once)
            builder.build(USER, query, [*store.messages(USER, session_id), as_message(query)],
                          first_turn=first)
        for query in texts:
            started, cpu_started = time.perf_counter(), time.process_time()
            if first:
                history = store.messages(USER, session_id)
                prompt = builder.build(USER, query, [*history, as_message(query)],
                                       first_turn=True)
            else:
                unsent = store.messages(USER, session_id, after_id=conversation.through)
                prompt = builder.compose(USER, query, conversation, [*unsent, as_message(query)])
            results[label].append((time.perf_counter() - started) * 1000)
            cpu[label].append((time.process_time() - cpu_started) * 1000)
            shown.append(len(prompt.shown_facts))
            excerpts.append(len({m for m in prompt.shown_messages}))
            if label == "later turn":
                by_kind[bool(prompt.shown_messages)].append(cpu[label][-1])
                wall_by_kind[bool(prompt.shown_messages)].append(results[label][-1])
            # Each query is a new message on the same conversation; recalled facts are not
            # repeated within a conversation, so start clean for the next measurement.
            conversation.shown_facts.clear()
            conversation.shown_messages.clear()
            assert all(f.user == USER for f in prompt.shown_facts)
        if timer is not None and label == "later turn":
            # A pass of its own, so that the wrappers cost nothing in the figures above. The
            # query embedded in turn: a stage's CPU time is the process's, so the worker's
            # embedding would count in whichever stage ran beside it.
            # The words' counts as the pass above met them: fresh (a word's count among the
            # user's facts and messages is remembered for minutes, so a second pass over the
            # same messages would hide what counting costs a message with new words).
            builder.fact_recall._df_cache.clear()
            past_messages._common_words.pop(store, None)
            timer.install(rt)
            ahead, prompt_module.EMBED_AHEAD = prompt_module.EMBED_AHEAD, False
            try:
                for query in texts[: max(50, len(texts) // 2)]:
                    cpu_started = time.process_time()
                    unsent = store.messages(USER, session_id, after_id=conversation.through)
                    prompt = builder.compose(USER, query, conversation,
                                             [*unsent, as_message(query)])
                    timer.next_turn((time.process_time() - cpu_started) * 1000)
                    stage_kinds.append(bool(prompt.shown_messages))
                    conversation.shown_facts.clear()
                    conversation.shown_messages.clear()
            finally:
                prompt_module.EMBED_AHEAD = ahead
                timer.uninstall()
    rt.close()
    table: dict = {label: {"p50_ms": round(statistics.median(v), 2),
                           "p99_ms": round(percentile(v, 0.99), 2),
                           "cpu_p50_ms": round(statistics.median(cpu[label]), 2),
                           "runs": len(v)}
                   for label, v in results.items()}
    table["mean_facts_shown"] = round(statistics.mean(shown), 1)
    table["mean_past_messages_shown"] = round(statistics.mean(excerpts), 1)
    table["later_turn_by_kind"] = {
        ("with past messages shown" if kind else "without past messages"):
            {"cpu_p50_ms": round(statistics.median(v), 2),
             # The p50 of all turns falls where the two kinds meet: the upper end of the
             # turns without past messages says how far it is from the goal.
             "cpu_p75_ms": round(percentile(v, 0.75), 2),
             "cpu_p90_ms": round(percentile(v, 0.90), 2),
             "p50_ms": round(statistics.median(wall_by_kind[kind]), 2), "runs": len(v)}
        for kind, v in by_kind.items() if v}
    # The wall time depends on the machine's load (2 cores shared here): said with each figure.
    table["load_1min"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    table["query_embedding_ahead"] = str(prompt_module.EMBED_AHEAD)
    if timer is not None:
        table["stages"] = timer.table()
        table["stages_by_kind"] = {
            ("with past messages shown" if kind else "without past messages"): timer.table(
                [t for t, k in zip(timer.turns, stage_kinds, strict=True) if k == kind])
            for kind in (False, True) if kind in stage_kinds}
    return table


DRIVER = r"""
import json, os, resource, sys, time
MODE = sys.argv[1]
if MODE == "clean-install":
    # pandas is in the shared venv for other tools, not a Hermes dependency; a clean install
    # has none, and sqlite-utils imports it only when present. (numpy is a dependency since
    # hybrid recall is on by default: blocking it would measure words-only recall instead.)
    sys.modules["pandas"] = None
import hermes.agent.llm as llm

def rss_mb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return -1.0

original = llm.load_litellm
def report_and_exit():
    if MODE == "with-litellm":
        original()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"rss_mb": rss_mb("VmRSS"), "peak_mb": rss_mb("VmHWM"),
                      "cpu_s": usage.ru_utime + usage.ru_stime,
                      "litellm_loaded": "litellm" in sys.modules}), flush=True)
    os._exit(0)
llm.load_litellm = report_and_exit
from hermes.cli import main
sys.argv = ["hermes", "ask", "what did we decide about the postgres database migration?"]
main()
"""


def bench_startup(home: Path, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({"HERMES_HOME": str(home), "HERMES_MODEL__NAME": "openai/gpt-4.1-mini",
                "PYTHONPATH": str(ROOT)})
    out: dict[str, dict] = {}
    for mode in ("before litellm", "clean-install", "with-litellm"):
        walls, rss, peak, cpu = [], [], [], []
        for _ in range(repeats):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", DRIVER, mode], env=env, cwd=ROOT,
                                  capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - started)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if not lines:
                raise SystemExit(f"driver failed: {done.stderr[-2000:]}")
            data = json.loads(lines[-1])
            rss.append(data["rss_mb"])
            cpu.append(data["cpu_s"])
            peak.append(data["peak_mb"])
        out[mode] = {"wall_s_median": round(statistics.median(walls), 2),
                     "wall_s_max": round(max(walls), 2),
                     "cpu_s_median": round(statistics.median(cpu), 2),
                     "rss_mb": round(statistics.median(rss), 1),
                     "peak_rss_mb": round(statistics.median(peak), 1), "runs": repeats}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k facts, 100k messages")
    parser.add_argument("--home", type=Path, help="reuse (or build) the bench home here")
    parser.add_argument("--facts", type=int, help="override the number of facts")
    parser.add_argument("--messages", type=int, help="override the number of messages")
    parser.add_argument("--facts-without-sources", action="store_true",
                        help="facts that cite no messages (no exchange text, as before m018)")
    parser.add_argument("--words", choices=["letters", "real"], default="letters",
                        help="the home's and the messages' words: random-letter words (the "
                             "figure of record) or English words, one MiniLM token each "
                             "(real_words); a home is built with one kind and keeps it")
    parser.add_argument("--no-startup", action="store_true", help="skip the process start-up part")
    parser.add_argument("--configs", type=lambda v: v.split(","), default=list(CONFIGS),
                        help="comma-separated, of: hybrid (the default config), words "
                             "(sessions.embeddings: false); default both")
    parser.add_argument("--no-vectors", action="store_true",
                        help="write no synthetic vectors (hybrid then scans only the few "
                             "messages the model embeds itself, as the bench did before)")
    parser.add_argument("--stages", action="store_true", help="also: CPU time per stage")
    overlap = parser.add_mutually_exclusive_group()
    overlap.add_argument("--serial", action="store_true",
                         help="embed the query on the turn's own thread, never overlapped with "
                              "the turn's SQL (hermes.memory.facts.query_ahead)")
    overlap.add_argument("--overlap", action="store_true",
                         help="always embed the query on the worker thread while the turn's SQL "
                              "runs (default: only when the load leaves a core free)")
    parser.add_argument("--runs", type=int, help="messages per case (default 500, quick 200)")
    args = parser.parse_args()
    if args.serial or args.overlap:
        prompt_module.EMBED_AHEAD = bool(args.overlap)
    n_facts, n_messages = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    n_facts = args.facts or n_facts
    n_messages = args.messages or n_messages
    runs = 200 if args.quick else 500
    with tempfile.TemporaryDirectory(prefix="hermes-bench-turn-") as tmp:
        home = args.home or Path(tmp) / "home"
        meta_file = home / "bench-meta.json"
        if meta_file.exists():
            meta = json.loads(meta_file.read_text())
            if meta.get("words", "letters") != args.words:
                raise SystemExit(f"{home} holds {meta.get('words', 'letters')} words, not "
                                 f"{args.words}: give --words {meta.get('words', 'letters')} "
                                 "or another --home")
        else:
            print(f"building {n_facts:,} facts and {n_messages:,} messages in {home} ...",
                  flush=True)
            meta = build_database(home, n_facts, n_messages,
                                  sources=not args.facts_without_sources, words=args.words)
            meta_file.write_text(json.dumps(meta))
        print(f"database: {meta['facts']:,} facts, {meta['messages']:,} messages in "
              f"{meta['sessions']:,} sessions, {meta['db_mb']} MB (built in "
              f"{meta['build_facts_s']} + {meta['build_messages_s']} s; facts cite "
              f"messages: {meta.get('facts_cite_messages', False)}; words: "
              f"{meta.get('words', 'letters')})\n")
        if "hybrid" in args.configs and not args.no_vectors and "vectors" not in meta:
            print("writing synthetic vectors for every message and fact ...", flush=True)
            meta["vectors"] = add_vectors(home)
            meta_file.write_text(json.dumps(meta))
        if "vectors" in meta:
            v = meta["vectors"]
            print(f"vectors ({v['model']}, {v['dim']} dimensions, synthetic): "
                  f"{v['message_vectors']:,} messages, {v['fact_vectors']:,} facts; "
                  f"database {v['db_mb']} MB\n")
        if "hybrid" in args.configs and "vectors" in meta:
            print(f"background vector pass: {vector_pass(home):.1f} s CPU\n", flush=True)
        assembly = {}
        for config in args.configs:
            assembly[config] = table = bench_assembly(
                home, meta["current_session"], args.runs or runs, config=config,
                stages=args.stages, words=args.words)
            print(f"prompt assembly, {config} "
                  f"({CONFIG_NAMES[config]}): session read + recall + basic memory + "
                  "context + messages")
            print(f"{'case':32} {'p50 ms':>8} {'p99 ms':>8} {'CPU p50':>8} {'runs':>6}")
            for label, row in table.items():
                if isinstance(row, dict) and "runs" in row:
                    print(f"{label:32} {row['p50_ms']:>8} {row['p99_ms']:>8} "
                          f"{row['cpu_p50_ms']:>8} {row['runs']:>6}")
            print(f"(per prompt, mean: {table['mean_facts_shown']} facts, "
                  f"{table['mean_past_messages_shown']} past messages; goal p50 <= 10 ms)")
            print("later turn, CPU p50 (wall p50; CPU p75, p90) by kind: " + "; ".join(
                f"{kind} {row['cpu_p50_ms']} ms ({row['p50_ms']} ms; {row['cpu_p75_ms']}, "
                f"{row['cpu_p90_ms']}; {row['runs']} turns)"
                for kind, row in table["later_turn_by_kind"].items()))
            print(f"query embedding on the worker thread: {table['query_embedding_ahead']} "
                  "(auto: when the load leaves a core free); "
                  f"1-minute load before / after: {table['load_1min'][0]} / "
                  f"{table['load_1min'][1]} (2 cores)\n")
            if "stages" in table:
                kinds = list(table["stages_by_kind"])
                print(f"CPU per stage, later turn, {config} (inclusive; ms per turn; the "
                      "query embedded in turn, the words' counts fresh)")
                print(f"{'stage':52} {'mean':>7} {'p50':>7} {'turns':>7}" + "".join(
                    f" {'mean, ' + kind.split()[0]:>14}" for kind in kinds))
                for label, row in table["stages"].items():
                    print(f"{label:52} {row['mean_ms']:>7} {row['p50_ms']:>7} "
                          f"{row['turns_with']:>4}/{row['turns']}" + "".join(
                              f" {table['stages_by_kind'][k].get(label, {}).get('mean_ms', 0):>14}"
                              for k in kinds))
                print("(mean, without / with: the mean a turn over the turns showing no past "
                      "messages / showing them)\n")
        startup = {} if args.no_startup else bench_startup(home, repeats=3 if args.quick else 5)
        print("`hermes ask` process, from exec to the model call")
        print(f"{'stopped at':40} {'wall s':>7} {'max s':>7} {'CPU s':>7} {'RSS MB':>7}")
        names = {"before litellm": "litellm about to load",
                 "clean-install": "litellm about to load, no pandas",
                 "with-litellm": "litellm loaded (for scale)"}
        for label, row in startup.items():
            print(f"{names[label]:40} {row['wall_s_median']:>7} {row['wall_s_max']:>7} "
                  f"{row['cpu_s_median']:>7} {row['rss_mb']:>7}")
        print("(goal before litellm: <= 1.5 s, <= 150 MB)")
    RESULTS.mkdir(exist_ok=True)
    report = {"quick": args.quick, "database": meta, "assembly": assembly, "startup": startup,
              "python": sys.version.split()[0], "at": datetime.now(UTC).isoformat()}
    (RESULTS / "bench_turn.json").write_text(json.dumps(report, indent=2))
    print(f"\nwrote {RESULTS / 'bench_turn.json'}")


if __name__ == "__main__":
    main()
