"""What redaction costs per message on the reply path (hermes.safety.secrets.redact).

CPU time (time.process_time), so the figure means something on a loaded machine:

    python scripts/bench_redaction.py            # typical chat messages, a long paste, secrets
    python scripts/bench_redaction.py --engine   # also detect-secrets' own line scanner

The messages: the LoCoMo-like chat lines below, a 4,700-character paste, and the secret corpus of
tests/data/secrets_corpus.tsv; with LoCoMo's data beside the clone (../shared/bench/, or
--data), how many of its 5,882 real chat turns are flagged.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermes.safety.secrets import redact  # noqa: E402

CHAT = [
    "ok thanks",
    "hey can you help me set up the deploy script for the staging box, it keeps failing",
    "I have 3 meetings tomorrow at 10, 14 and 16:30, can you remind me of the one with Omar "
    "about the Q3 budget?",
    "We went hiking near Porto last weekend with Ana and her dog, it rained the whole time.",
    "what's 17% of 230?",
    "Remember that my sister's birthday is on the 14th of March.",
]
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets_corpus.tsv"
_REPO = Path(__file__).resolve().parents[1]
# ../shared/bench beside the clone (one level further up from a worktree), as bench_locomo.py
LOCOMO = next((p for p in (_REPO.parent / "shared" / "bench" / "locomo10.json",
                           _REPO.parent.parent / "shared" / "bench" / "locomo10.json")
               if p.exists()), _REPO.parent / "shared" / "bench" / "locomo10.json")


def per_call_ms(texts: list[str], rounds: int) -> list[float]:
    figures = []
    for text in texts:
        redact(text)
        start = time.process_time()
        for _ in range(rounds):
            redact(text)
        figures.append((time.process_time() - start) / rounds * 1000)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="store_true",
                        help="also time detect-secrets' scan_line on the same chat messages")
    parser.add_argument("--data", type=Path, default=LOCOMO,
                        help="LoCoMo's locomo10.json: false positives on real chat turns")
    args = parser.parse_args()
    secrets = [line.split("\t")[1].replace("\\n", "\n")
               for line in CORPUS.read_text(encoding="utf-8").splitlines()
               if line.startswith(("secret\t", "clean\t"))]
    paste = " ".join(CHAT) * 12
    chat = per_call_ms(CHAT, 2000)
    corpus = per_call_ms(secrets, 300)
    long = per_call_ms([paste], 50)[0]
    print(f"chat messages ({len(CHAT)}): median {statistics.median(chat):.3f} ms, "
          f"max {max(chat):.3f} ms CPU")
    print(f"secret corpus ({len(secrets)} lines): median {statistics.median(corpus):.3f} ms, "
          f"max {max(corpus):.3f} ms CPU")
    print(f"a {len(paste):,}-character paste: {long:.2f} ms CPU")
    if args.data.exists():
        import json

        turns = [turn.get("text", "") for conv in json.loads(args.data.read_text())
                 for value in conv["conversation"].values() if isinstance(value, list)
                 for turn in value]
        start = time.process_time()
        flagged = [t for t in turns if redact(t).findings]
        spent = (time.process_time() - start) / len(turns) * 1000
        print(f"LoCoMo: {len(flagged)} of {len(turns):,} chat turns flagged (false positives), "
              f"{spent:.3f} ms CPU a turn")
        for text in flagged[:10]:
            print("   ", text[:100])
    else:
        print(f"(no {args.data}: the LoCoMo false-positive count is skipped)")
    if args.engine:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings

        with default_settings():
            list(scan_line(CHAT[1]))
            start = time.process_time()
            for _ in range(100):
                for text in CHAT:
                    list(scan_line(text))
            engine = (time.process_time() - start) / (100 * len(CHAT)) * 1000
            flagged = sum(1 for text in CHAT if list(scan_line(text)))
        print(f"detect-secrets scan_line: {engine:.2f} ms CPU a message; flags {flagged} of "
              f"{len(CHAT)} ordinary chat messages")


if __name__ == "__main__":
    main()
