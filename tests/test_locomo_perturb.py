"""LoCoMo reshaped (scripts/locomo_perturb.py): each perturbation removes one of LoCoMo's
habits and keeps the evidence findable; on a tiny synthetic file (the data is never here)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_locomo  # noqa: E402
import locomo_data  # noqa: E402
import locomo_perturb as lp  # noqa: E402


def conversation(tmp_path):
    data = [{
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Melanie Jones", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Melanie Jones", "dia_id": "D1:1",
                 "text": "I adopted a cat. She is called Bailey!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a dog"},
                {"speaker": "Ben", "dia_id": "D1:3", "text": "", "blip_caption": "a cake"},
            ],
            "session_2_date_time": "9:00 am on 10 June, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "The cat is fine"}],
        },
        "qa": [
            {"question": "What cat did Mel adopt in May 2023?", "answer": "a", "category": 1,
             "evidence": ["D1:1"]},
            {"question": "What is Melanie's dog called, Ben?", "answer": "b", "category": 4,
             "evidence": ["D1:2"]},
        ],
    }]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    (conv,), _ = locomo_data.load(path)
    return conv, path


def texts(conv):
    return [t.text for s in conv.sessions for t in s.turns]


def test_no_captions_leaves_an_image_placeholder(tmp_path):
    conv, _ = conversation(tmp_path)
    assert texts(lp.no_captions(conv))[1:3] == ["Look!", "[image]"]
    assert texts(conv)[1] == "Look!\n[shared an image: a dog]"  # the original is untouched


def test_no_names_takes_the_speakers_out_of_the_questions(tmp_path):
    conv, _ = conversation(tmp_path)
    assert [q.question for q in lp.no_names(conv).questions] == [
        "What cat did they adopt in May 2023?", "What is their dog called, they?"]


def test_swap_names_points_the_questions_at_the_other_speaker(tmp_path):
    conv, _ = conversation(tmp_path)
    assert [q.question for q in lp.swap_names(conv).questions] == [
        "What cat did Ben adopt in May 2023?", "What is Ben's dog called, Melanie?"]


def test_handles_rename_the_speakers_not_the_questions(tmp_path):
    conv, _ = conversation(tmp_path)
    out = lp.handles(conv)
    assert {t.speaker for s in out.sessions for t in s.turns} == {"+15550100", "+15550101"}
    assert out.questions == conv.questions and texts(out) == texts(conv)


def test_sessions_merged_and_split_keep_each_turns_time(tmp_path):
    conv, _ = conversation(tmp_path)
    before = [(t.dia_id, line["created_at"]) for t, line in zip(
        [t for s in conv.sessions for t in s.turns],
        [m for line in locomo_data.to_import_lines(conv) for m in json.loads(line)["messages"]],
        strict=True)]
    for out, sessions in ((lp.merge_sessions(conv), 1), (lp.split_sessions(conv, size=2), 3)):
        assert len(out.sessions) == sessions
        lines = [json.loads(line) for line in locomo_data.to_import_lines(out)]
        assert len({line["external_id"] for line in lines}) == sessions
        assert [(m["external_id"], m["created_at"]) for line in lines
                for m in line["messages"]] == before


def test_sentences_become_messages_that_stand_for_their_turn(tmp_path):
    conv, _ = conversation(tmp_path)
    out = lp.sentences(conv)
    assert [(t.dia_id, t.text) for t in out.sessions[0].turns[:2]] == [
        ("D1:1", "I adopted a cat."), ("D1:1#1", "She is called Bailey!")]
    assert out.sessions[0].turns[1].created_at > out.sessions[0].turns[0].created_at
    # scored as the turn it was cut from
    assert bench_locomo.score(["D1:1"], [["D2:1"], ["D1:1#1"]])["turn@5"] == 1.0


def test_no_dates_drops_what_the_question_dates(tmp_path):
    conv, _ = conversation(tmp_path)
    assert lp.no_dates(conv).questions[0].question == "What cat did Mel adopt?"


def test_the_bench_runs_perturbed_and_says_so(tmp_path):
    _, path = conversation(tmp_path)
    out = tmp_path / "r.json"
    assert bench_locomo.main(["--data", str(path), "--perturb", "no-captions", "--perturb",
                              "sentences", "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert "perturbed: no-captions, sentences" in result["label"]
    assert result["results"]["all"]["n"] == 2


def test_a_fact_points_at_the_session_holding_its_turns_when_sessions_are_reshaped(tmp_path):
    # Facts carry the session they were learned in; merged or split sessions are renumbered,
    # so LoCoMo's session number of an observation would point at no session, or another.
    import dataclasses
    import types

    conv, _ = conversation(tmp_path)
    conv = dataclasses.replace(conv, observations=[
        locomo_data.Observation("Ben", "Ben says the cat is fine", 2, ["D2:1"]),
        locomo_data.Observation("Melanie Jones", "Melanie adopted a cat", 1, ["D1:1"])])
    for name, out in (("plain", conv), ("merged", lp.merge_sessions(conv)),
                      ("split", lp.split_sessions(conv, size=2))):
        home = tmp_path / name
        home.mkdir()
        db, _ = bench_locomo._import(out, home, summaries=False)
        args = types.SimpleNamespace(embeddings=None, vector_cache=None, notes=[])
        bench_locomo._load_facts(out, db, args)
        rows = db.execute(
            "SELECT f.source_session_id, m.session_id FROM facts f JOIN messages m "
            "ON m.id = json_extract(f.source_message_ids, '$[0]') WHERE f.user = ?",
            [out.sample_id]).fetchall()
        assert len(rows) == 2 and all(held == said for said, held in rows), (name, rows)


def test_fewer_facts_keep_a_seeded_half_or_each_sessions_first(tmp_path):
    import dataclasses

    conv, _ = conversation(tmp_path)
    obs = [locomo_data.Observation("Ben", f"fact {i}", 1 + i // 10, ["D1:1"]) for i in range(40)]
    conv = dataclasses.replace(conv, observations=obs)
    half = lp.half_facts(conv).observations
    assert 10 < len(half) < 30 and set(o.text for o in half) < set(o.text for o in obs)
    assert lp.half_facts(conv).observations == half  # the same half every run
    assert [o.text for o in lp.few_facts(conv).observations] == [
        "fact 0", "fact 10", "fact 20", "fact 30"]
    assert lp.few_facts(conv).sessions == conv.sessions  # the transcripts untouched
