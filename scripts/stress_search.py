"""Stress: a generated corpus of hostile search strings over facts search, session search,
probe and reason (issue 11, part 2).

    python scripts/stress_search.py [--count 10000] [--seed 11] [--time-limit 600]

A home is seeded with facts, entities and sessions whose words are known ("stored words").
Each generated string mixes one stored word (verbatim, as a word of its own: spaces or
punctuation around it) with hostile material: FTS5 operators and column filters, quotes and
brackets, a leading "-", lone surrogates, control characters, zero-width and bidi marks,
combining marks, emoji, RTL and CJK text, pasted pages (3,000 words; 9,000 characters of
Japanese), 100,000-character tokens, nested brackets. Half the strings hold no stored word.

Every string goes to ``FactStore.search``, ``SessionStore.search`` and ``search_messages``,
``FactStore.probe`` and ``FactStore.reason``. Counted: exceptions (goal 0; a QueryError for a
string with no words at all is the documented answer, counted apart), and silent empties: no
result although the string holds a stored word verbatim (goal 0). An empty answer to a string
whose plan was cut to its bounds (the word lies past the 64th word) is not silent: the CLI
prints the note; those are counted apart. Probe and reason are exact lookups of entity names:
a silent empty there is a stored entity name, wrapped in hostile text, that finds nothing.

Writes bench-results/stress_search.json. Wall times on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.clock import FakeClock  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.errors import QueryError  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402
from hermes.store.fts import build_match  # noqa: E402

LATIN = ["zebrafish", "quokka", "marmalade", "tangerine", "obsidian", "pelican", "vermilion",
         "harpsichord", "kumquat", "nebula", "saffron", "walrus"]
CJK = ["東京タワー", "富士山", "北京烤鸭", "서울역", "大阪城", "新幹線"]
ENTITIES = ["Project Atlas", "Vaultwarden", "Alice Johnson", "Kubernetes", "Omar"]
HOSTILE = ['"', "'", "(", ")", "*", "^", ":", "-", "+", "NEAR", "AND", "OR", "NOT", "{", "}",
           "[", "]", "\\", "%", "_", "content:", "col:", "NEAR(a b)", "\ud800", "\udfff",
           "\ud83e", "\x00", "\x1b[31m", "\u200b", "\u202e", "\u2066", "\u0301", "😀", "🇺🇸",
           "مرحبا", "שלום", "Ünïcödé", "ß", "İ", "ﬁ", "\ufeff", "\t", "\n", "\r\n", "?!", "...",
           "#", "@", "$HOME", "`rm -rf`", "'; DROP TABLE facts; --", "%%", "__"]


def seed_home(rt: Runtime) -> None:
    facts = rt.memory.facts
    sessions = rt.memory.sessions
    facts.add("owner", "Omar, Alice Johnson and Vaultwarden work on Project Atlas with "
              "Kubernetes", entities=ENTITIES)
    for i, word in enumerate(LATIN + CJK):
        entity = ENTITIES[i % len(ENTITIES)]
        facts.add("owner", f"{entity} mentions {word} in note {i}", entities=[entity])
        session = sessions.create("owner", "terminal")
        sessions.append("owner", session.id, "user", f"we talked about {word} yesterday")
        sessions.append("owner", session.id, "assistant", f"Yes, {word} came up with {entity}.")
    # Another user's memory with the same words: never returned for owner.
    facts.add("bob", "Bob's zebrafish note", entities=["Bob"])


def noise(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HOSTILE) + rng.choice(["", " "]) for _ in range(n))


def japanese(rng: random.Random, chars: int) -> str:
    kana = "日本語東京大阪漢字ひらがなカタカナ"
    return "、".join("".join(rng.choice(kana) for _ in range(3)) for _ in range(chars // 4))


def generate(rng: random.Random, count: int) -> list[tuple[str, str | None]]:
    """(string, stored word it holds verbatim or None)."""
    out: list[tuple[str, str | None]] = []
    shapes = ["wrapped", "operators", "leading_dash", "long_words", "long_cjk", "long_token",
              "nested", "unicode", "plain", "cjk_sentence"]
    for i in range(count):
        shape = shapes[i % len(shapes)]
        word: str | None = rng.choice(LATIN + CJK) if rng.random() < 0.5 else None
        w = word or ""
        sep = rng.choice([" ", " , ", " . ", " (", ") ", " / ", "\n", " | "])
        if shape == "wrapped":
            text = f"{noise(rng, 3)}{sep}{w}{sep}{noise(rng, 3)}"
        elif shape == "operators":
            before = rng.choice(["NEAR(", "NOT ", "content: ", "^", "*"])
            after = rng.choice(["AND", "OR", ")", "*", '"'])
            text = f"{before} {w} {after}"
        elif shape == "leading_dash":
            text = f"-{noise(rng, 1)} {w} -x --y"
        elif shape == "long_words":
            words = [f"filler{j}" for j in range(3000)]
            if word:
                words.insert(rng.randrange(len(words)), w)
            text = " ".join(words)
        elif shape == "long_cjk":
            text = japanese(rng, 9000)
            if word:
                at = rng.randrange(len(text))
                text = f"{text[:at]} {w} {text[at:]}"
        elif shape == "long_token":
            text = "a" * 100_000 + f" {w}"
        elif shape == "nested":
            depth = rng.choice([10, 1000, 50_000])
            text = "[" * depth + f" {w} " + "]" * rng.choice([0, depth])
        elif shape == "unicode":
            text = f"{rng.choice(HOSTILE[23:45])}{sep}{w}{sep}{rng.choice(HOSTILE[23:45])}"
        elif shape == "cjk_sentence":
            # A CJK word inside a sentence, no spaces: "東京タワーに行きたい"
            word = rng.choice(CJK) if word else None
            tail = rng.choice(["に行きたい", "はどこですか", "에 가고 싶어요", "怎么走"])
            text = f"{word or ''}{tail}"
        else:
            text = f"what about {w}?" if word else noise(rng, 2)
        out.append((text, word))
    return out


def cut_past(text: str, word: str) -> bool:
    """Whether ``word`` was left out because the plan was cut to its bounds."""
    plan = build_match(text)
    if not plan.notes:
        return False
    kept = {" ".join(t.tokens).lower() for t in plan.terms} | set(plan.cjk)
    return word.lower() not in kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--time-limit", type=float, default=600.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    corpus = generate(rng, args.count)
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    slowest: dict[str, float] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(load_settings(home=Path(tmp)), clock=FakeClock("2026-11-29T12:00:00+00:00"))
        seed_home(rt)
        facts = rt.memory.facts
        sessions = rt.memory.sessions
        surfaces = {
            "facts.search": lambda q: facts.search("owner", q, limit=5),
            "sessions.search": lambda q: sessions.search("owner", q, limit=3),
            "sessions.search_messages": lambda q: sessions.search_messages("owner", q, limit=5),
            "facts.probe": lambda q: facts.probe("owner", q),
            "facts.reason": lambda q: facts.reason("owner", [q, "Project Atlas"]).facts,
        }
        done = 0
        for text, word in corpus:
            if time.monotonic() - started > args.time_limit:
                break
            done += 1
            for name, run in surfaces.items():
                t0 = time.monotonic()
                try:
                    found = run(text)
                except QueryError:
                    counts[f"{name}: no words (QueryError)"] += 1
                    continue
                except Exception as exc:  # noqa: BLE001 - counted, that is the figure
                    counts[f"{name}: EXCEPTION"] += 1
                    examples.setdefault(f"{name}: EXCEPTION", []).append(
                        f"{text[:60]!r}: {type(exc).__name__}: {exc}"[:200])
                    continue
                finally:
                    slowest[name] = max(slowest.get(name, 0.0), time.monotonic() - t0)
                if word and name.startswith(("facts.search", "sessions.")) and not found:
                    key = "empty, cut note shown" if cut_past(text, word) else "SILENT EMPTY"
                    counts[f"{name}: {key}"] += 1
                    if key == "SILENT EMPTY":
                        examples.setdefault(f"{name}: SILENT EMPTY", []).append(
                            f"{text[:80]!r} (word {word!r})")
        # Probe and reason: every entity name wrapped in plain punctuation and case changes.
        for index, entity in enumerate(ENTITIES):
            partner = ENTITIES[(index + 1) % len(ENTITIES)]
            for variant in (entity, entity.upper(), f"  {entity}  "):
                done += 1
                for name, run in (("facts.probe", surfaces["facts.probe"]),
                                  ("facts.reason", lambda q, p=partner: facts.reason(
                                      "owner", [q, p]).facts or facts.reason(
                                      "owner", [q, p]).path)):
                    try:
                        if not run(variant):
                            counts[f"{name}: SILENT EMPTY"] += 1
                            examples.setdefault(f"{name}: SILENT EMPTY", []).append(variant)
                    except Exception as exc:  # noqa: BLE001
                        counts[f"{name}: EXCEPTION"] += 1
                        examples.setdefault(f"{name}: EXCEPTION", []).append(
                            f"{variant!r}: {exc}")
        leak = facts.search("owner", "Bob zebrafish note", limit=20)
        counts["other user's facts returned"] = sum(1 for f in leak if "Bob" in f.content)
        rt.close()
    elapsed = time.monotonic() - started
    print(f"{done:,} strings x {len(surfaces)} surfaces in {elapsed:.0f} s "
          f"(holding a stored word: {sum(1 for _, w in corpus[:done] if w):,})")
    for key in sorted(counts):
        print(f"  {key:<52} {counts[key]:>6}")
    exceptions = sum(v for k, v in counts.items() if "EXCEPTION" in k)
    silent = sum(v for k, v in counts.items() if "SILENT" in k)
    print(f"exceptions: {exceptions}   silent empties: {silent}")
    print("slowest call per surface: " + ", ".join(f"{k} {v * 1000:.0f} ms"
                                                  for k, v in slowest.items()))
    for key, items in examples.items():
        print(f"  e.g. {key}: {items[:3]}")
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "stress_search.json").write_text(json.dumps({
        "strings": done, "seconds": elapsed, "counts": dict(counts),
        "exceptions": exceptions, "silent_empties": silent,
        "slowest_ms": {k: v * 1000 for k, v in slowest.items()},
        "examples": {k: v[:10] for k, v in examples.items()},
    }, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
