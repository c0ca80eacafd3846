"""Reading LoCoMo (``locomo10.json``) for the retrieval benchmark, quirks included.

The data is CC BY-NC 4.0 and is never copied into this repository: it is read from
``../shared/bench/locomo10.json`` or from a path given on the command line. This module turns it
into plain records and into Hermes's transcript import format (JSON Lines, one session a line);
it knows nothing of how Hermes searches.

Quirks handled (see the data's own README): evidence strings holding several ids (``"D8:6;
D9:17"``, space-separated ids), a malformed id (``"D:11:26"``), a zero-padded one (``"D30:05"``),
a bare ``"D"``, ids of turns that do not exist, image captions (``blip_caption``, part of the
turn's text), and conv-26's date entries for sessions that have no turns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
# ../shared/bench beside the clone; from a git worktree under wt/, one level further up.
DEFAULT_PATHS = (
    _REPO.parent / "shared" / "bench" / "locomo10.json",
    _REPO.parent.parent / "shared" / "bench" / "locomo10.json",
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Parameters are tuned on the first half only; the second half is the held-out check.
TUNING_HALF = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")

_SESSION_KEY = re.compile(r"^session_(\d+)$")
# "D12:3", tolerating a stray colon after the D ("D:11:26") and zero padding ("D30:05").
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")
_SEPARATORS = re.compile(r"[;,\s]+")
# Seconds between consecutive turns of a session (LoCoMo gives only the session's start).
TURN_SPACING = timedelta(seconds=30)


class DataMissing(RuntimeError):
    """The LoCoMo file is not where we looked."""


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str  # the turn's text, with the image caption when there is one
    # its own time (perturbed data, see locomo_perturb.py); None: the session's start + spacing
    created_at: datetime | None = None


@dataclass
class LocomoSession:
    number: int
    started_at: datetime
    turns: list[Turn]


@dataclass
class Observation:
    speaker: str
    text: str
    session: int
    dia_ids: list[str]


@dataclass
class Question:
    question: str
    answer: str
    category: int
    evidence: list[str]  # resolved dia_ids


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[LocomoSession]
    questions: list[Question]
    observations: list[Observation]
    summaries: dict[int, str]

    @property
    def turn_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}


@dataclass
class LoadReport:
    conversations: int = 0
    sessions: int = 0
    turns: int = 0
    questions: int = 0  # categories 1-4
    questions_without_evidence: int = 0  # nothing resolvable left: not scored
    evidence_ids: int = 0
    evidence_skipped: list[str] = field(default_factory=list)  # "conv-42 D10:19 (no such turn)"
    observation_ids_skipped: int = 0
    empty_sessions_ignored: int = 0


def parse_date(text: str) -> datetime:
    """LoCoMo's session dates: "1:56 pm on 8 May, 2023" (taken as UTC)."""
    cleaned = " ".join(text.replace(",", " ").split())
    value = datetime.strptime(cleaned.upper(), "%I:%M %p ON %d %B %Y")
    return value.replace(tzinfo=UTC)


def parse_dia_ids(raw: str) -> tuple[list[str], list[str]]:
    """Split one evidence string into normalised ids ("D30:5") and the parts that are not ids."""
    ids, bad = [], []
    for part in _SEPARATORS.split(raw.strip()):
        if not part:
            continue
        match = _DIA_ID.match(part)
        if match:
            ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
        else:
            bad.append(part)
    return ids, bad


def turn_text(raw: dict) -> str:
    text = str(raw.get("text") or "").strip()
    caption = str(raw.get("blip_caption") or "").strip()
    if caption:
        text = f"{text}\n[shared an image: {caption}]" if text else f"[shared an image: {caption}]"
    return text


def _conversation(sample: dict, report: LoadReport) -> Conversation:
    conv = sample["conversation"]
    speakers = (conv["speaker_a"], conv["speaker_b"])
    sessions: list[LocomoSession] = []
    for key in conv:
        match = _SESSION_KEY.match(key)
        if not match:
            continue
        number = int(match.group(1))
        raw_turns = conv[key] or []
        if not raw_turns:
            report.empty_sessions_ignored += 1
            continue
        turns = []
        for raw in raw_turns:
            ids, _ = parse_dia_ids(str(raw["dia_id"]))
            turns.append(Turn(ids[0] if ids else str(raw["dia_id"]), raw["speaker"],
                              turn_text(raw)))
        sessions.append(
            LocomoSession(number, parse_date(conv[f"session_{number}_date_time"]), turns)
        )
    # Sessions with date entries but no turn lists (conv-26, 20-35) are ignored.
    report.empty_sessions_ignored += sum(
        1 for key in conv
        if key.endswith("_date_time") and key.removesuffix("_date_time") not in conv
    )
    sessions.sort(key=lambda s: s.number)
    known = {t.dia_id for s in sessions for t in s.turns}

    questions = []
    for qa in sample.get("qa", []):
        category = int(qa.get("category", 0))
        if category not in CATEGORIES:
            continue
        report.questions += 1
        evidence: list[str] = []
        for raw in qa.get("evidence") or []:
            ids, bad = parse_dia_ids(str(raw))
            report.evidence_skipped.extend(f"{sample['sample_id']} {b!r} (not an id)" for b in bad)
            for dia_id in ids:
                if dia_id not in known:
                    report.evidence_skipped.append(f"{sample['sample_id']} {dia_id} (no such turn)")
                elif dia_id not in evidence:
                    evidence.append(dia_id)
        report.evidence_ids += len(evidence)
        if not evidence:
            report.questions_without_evidence += 1
        questions.append(Question(str(qa["question"]), str(qa.get("answer", "")), category,
                                  evidence))

    observations = []
    for key, per_speaker in (sample.get("observation") or {}).items():
        match = re.match(r"session_(\d+)_observation", key)
        if not match or not isinstance(per_speaker, dict):
            continue
        for speaker, items in per_speaker.items():
            for item in items:
                text, raw_ids = item[0], item[1] if len(item) > 1 else ""
                ids = []
                for raw in raw_ids if isinstance(raw_ids, list) else [raw_ids]:
                    found, _ = parse_dia_ids(str(raw))
                    ids.extend(i for i in found if i in known)
                if not ids:
                    report.observation_ids_skipped += 1
                observations.append(Observation(speaker, str(text), int(match.group(1)), ids))

    summaries = {}
    for key, text in (sample.get("session_summary") or {}).items():
        match = re.match(r"session_(\d+)_summary", key)
        if match and text:
            summaries[int(match.group(1))] = str(text)

    report.conversations += 1
    report.sessions += len(sessions)
    report.turns += len(known)
    return Conversation(sample["sample_id"], speakers, sessions, questions, observations,
                        summaries)


def load(path: Path | str | None = None) -> tuple[list[Conversation], LoadReport]:
    """Read the file (``DEFAULT_PATHS`` unless given). Raises DataMissing when it is absent."""
    tried = [Path(path)] if path else list(DEFAULT_PATHS)
    location = next((p for p in tried if p.exists()), None)
    if location is None:
        raise DataMissing(
            "LoCoMo data not found (looked at "
            + ", ".join(str(p.resolve()) for p in tried)
            + "). It is not part of this repository (CC BY-NC 4.0): put locomo10.json in "
            "../shared/bench/ beside the clone, or pass --data PATH."
        )
    samples = json.loads(location.read_text(encoding="utf-8"))
    report = LoadReport()
    return [_conversation(sample, report) for sample in samples], report


def to_import_lines(conv: Conversation, *, summaries: bool = False) -> list[str]:
    """The conversation in Hermes's transcript import format, one session a line.

    Both LoCoMo speakers are people talking to each other, so every turn is a ``user`` message
    with its speaker's name; the turn's dia_id is the message's external id, the session's date
    its start time. ``summaries`` also imports LoCoMo's session summaries (off by default: Hermes
    writes its own when it closes a session, and the baselines had none).
    """
    lines = []
    for session in conv.sessions:
        record: dict = {
            "source": "import",
            "external_id": f"{conv.sample_id}:session_{session.number}",
            "started_at": session.started_at.isoformat(),
            "messages": [
                {
                    "role": "user",
                    "speaker": turn.speaker,
                    "content": turn.text,
                    "created_at": (turn.created_at
                                   or session.started_at + i * TURN_SPACING).isoformat(),
                    "external_id": turn.dia_id,
                }
                for i, turn in enumerate(session.turns)
            ],
        }
        if summaries and session.number in conv.summaries:
            record["summary"] = conv.summaries[session.number]
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines


def session_of(dia_id: str) -> int:
    return int(dia_id[1:].split(":")[0])
