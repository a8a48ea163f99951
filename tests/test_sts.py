"""SentEval STS: loading quirks, the three aggregations by hand, and the real all-MiniLM-L6-v2 figure."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from augcse.evaluation.sts import Pairs, Subset, read_subset, score_pairs
from augcse.evaluation.tasks import TASKS, resolve_tasks


def test_empty_gold_scores_are_dropped_and_text_is_rejoined(tmp_path):
    (tmp_path / "in.txt").write_text("a  cat\tthe  cat sits\nx\ty\nb dog\tdogs\n")
    (tmp_path / "gs.txt").write_text("4.0\n\n1.5\n")
    first, second, gold = read_subset(Subset("s", "in.txt", "gs.txt"), tmp_path)
    assert first == ["a cat", "b dog"] and second == ["the cat sits", "dogs"]
    assert gold.tolist() == [4.0, 1.5]


def test_all_mean_wmean_aggregations_by_hand():
    vectors = {"a": [1, 0], "b": [1, 0.1], "c": [0, 1], "d": [1, 1], "e": [-1, 0.2], "f": [0.3, 1]}
    encode = lambda sentences: np.array([vectors[s] for s in sentences], dtype=np.float32)  # noqa: E731
    pairs = Pairs({
        "one": (["a", "a", "c"], ["b", "c", "d"], np.array([5.0, 0.0, 2.0])),
        "two": (["d", "e", "f", "a"], ["e", "f", "a", "f"], np.array([1.0, 0.5, 3.0, 2.0])),
    })

    def cos(x, y):
        x, y = np.array(vectors[x]), np.array(vectors[y])
        return x @ y / np.linalg.norm(x) / np.linalg.norm(y)

    sims_one = [cos("a", "b"), cos("a", "c"), cos("c", "d")]
    sims_two = [cos("d", "e"), cos("e", "f"), cos("f", "a"), cos("a", "f")]
    s1 = 100 * spearmanr(sims_one, [5, 0, 2]).statistic
    s2 = 100 * spearmanr(sims_two, [1, 0.5, 3, 2]).statistic
    out = score_pairs(encode, pairs)
    assert out["spearman_one"] == pytest.approx(s1) and out["spearman_two"] == pytest.approx(s2)
    assert out["mean"] == pytest.approx((s1 + s2) / 2)
    assert out["wmean"] == pytest.approx((3 * s1 + 4 * s2) / 7)
    assert out["all"] == pytest.approx(100 * spearmanr(sims_one + sims_two, [5, 0, 2, 1, 0.5, 3, 2]).statistic)


def test_senteval_and_original_files_load_with_expected_counts(data_dir):
    expected = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186,
                "STSBenchmark": 1379, "SICKRelatedness": 4927}
    for name, count in expected.items():
        for variant in (name, f"{name}-original"):
            pairs = TASKS[variant].load(data_dir)
            assert sum(len(g) for _, _, g in pairs.subsets.values()) == count, variant
    processed = TASKS["STSBenchmark"].load(data_dir).subsets["test"][0][0]
    original = TASKS["STSBenchmark-original"].load(data_dir).subsets["test"][0][0]
    assert processed == "a girl is styling her hair ." and original == "A girl is styling her hair."


def test_suites_and_unknown_task():
    assert resolve_tasks("sts") == ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    assert "STSBenchmark-dev" not in resolve_tasks("all")
    with pytest.raises(ValueError, match="unknown task or suite 'STS99'"):
        resolve_tasks("STS99")


def test_minilm_reproduces_its_public_stsb_figure(minilm_path, data_dir):
    """all-MiniLM-L6-v2 scores 82.0 on STS-B test (its public MTEB figure): the evaluator is right."""
    from sentence_transformers import SentenceTransformer

    from augcse.evaluation.suite import run_tasks

    model = SentenceTransformer(str(minilm_path))
    result = run_tasks(model, "STSBenchmark", data_dir, progress=False, batch_size=128)
    assert result["STSBenchmark"]["all"] == pytest.approx(82.03, abs=0.02)


def test_eval_cli_prints_table_and_json_last_line(tiny_st, tmp_path, data_dir, capsys):
    import json

    from augcse.commands.main import main

    folder = tmp_path / "model"
    tiny_st.save(str(folder))
    assert main(["eval", str(folder), "--tasks", "STSBenchmark,SICKRelatedness", "--data-dir", str(data_dir),
                 "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    scores = json.loads(lines[-1])
    assert set(scores) == {"STSBenchmark", "SICKRelatedness", "sts_avg"}
    assert any(line.startswith("STSBenchmark") for line in lines[:-1])
    assert main(["eval", str(folder), "--tasks", "STSBenchmark", "--original", "--data-dir", str(data_dir),
                 "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out.strip().splitlines()[-1])) == {"STSBenchmark-original",
                                                                                 "sts-original_avg"}


def test_eval_cli_save_to_merges_into_the_run_eval_json(tiny_st, tmp_path, data_dir, capsys):
    import json

    from augcse.commands.main import main

    run = tmp_path / "run"
    tiny_st.save(str(run / "final"))
    (run / "eval.json").write_text(json.dumps({"before": {"STS12": 1.0}, "after": {"STS12": 2.0, "sts_avg": 2.0}}))
    assert main(["eval", str(run / "final"), "--tasks", "STSBenchmark", "--data-dir", str(data_dir),
                 "--save-to", str(run), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = json.loads((run / "eval.json").read_text())
    assert saved["before"] == {"STS12": 1.0}
    assert saved["after"]["STS12"] == 2.0 and saved["after"]["STSBenchmark"] == printed["STSBenchmark"]
    assert saved["after"]["sts_avg"] == pytest.approx((2.0 + printed["STSBenchmark"]) / 2)  # over both tasks
    assert saved["after"]["STSBenchmark/wmean"] == pytest.approx(saved["after"]["sts_avg/wmean"])  # secondary metrics
    assert main(["eval", str(run / "final"), "--save-to", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a directory" in err[0]


def test_eval_cli_pooler_rebuilds_a_plain_checkpoint(tiny_model_dir, tmp_path, data_dir, capsys, monkeypatch):
    """``--pooler cls`` scores the first token's last hidden state; a misspelt pooler is one line, exit 2."""
    import json

    import torch
    from transformers import AutoModel, AutoTokenizer

    from augcse.commands.main import main
    from augcse.commands.encode import load_model
    from augcse.evaluation import suite

    texts = ["A man is playing a guitar.", "Stocks fell on Monday."]
    tokenizer, encoder = AutoTokenizer.from_pretrained(tiny_model_dir), AutoModel.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        by_hand = encoder(**tokenizer(texts, padding=True, return_tensors="pt")).last_hidden_state[:, 0]
    ours = load_model(str(tiny_model_dir), pooler="cls").encode(texts, convert_to_tensor=True)
    torch.testing.assert_close(ours, by_hand, atol=1e-5, rtol=1e-4)

    seen = []
    real = suite.run_tasks
    monkeypatch.setattr(suite, "run_tasks", lambda model, *a, **k: seen.append(model) or real(model, *a, **k))
    for pooler in ("cls", "avg"):
        assert main(["eval", str(tiny_model_dir), "--pooler", pooler, "--tasks", "STSBenchmark",
                     "--data-dir", str(data_dir), "--json"]) == 0
        json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [m[1].pooling_mode for m in seen] == ["cls", "mean"]
    assert main(["eval", str(tiny_model_dir), "--pooler", "clss"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean 'cls'" in err[0]


def test_eval_cli_bf16_encoding_stays_close_to_float32(tiny_st, tmp_path, data_dir, capsys):
    import json

    from augcse.commands.main import main

    folder = tmp_path / "model"
    tiny_st.save(str(folder))
    scores = {}
    for flag in ([], ["--bf16"]):
        assert main(["eval", str(folder), "--tasks", "STSBenchmark", "--data-dir", str(data_dir), "--json", *flag]) == 0
        scores[bool(flag)] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["STSBenchmark"]
    assert scores[True] != scores[False]  # bf16 really ran
    assert scores[True] == pytest.approx(scores[False], abs=0.5)


def test_suite_averages_are_recomputed_for_main_and_secondary_metrics():
    from augcse.evaluation.suite import with_suite_averages

    scores = with_suite_averages({"AgNews": 80.0, "Tweet": 60.0, "AgNews/nmi": 50.0, "Tweet/nmi": 71.0,
                                  "clustering_avg": 1.0, "my-own-task": 5.0})
    assert scores == {"AgNews": 80.0, "Tweet": 60.0, "AgNews/nmi": 50.0, "Tweet/nmi": 71.0, "my-own-task": 5.0,
                      "clustering_avg": 70.0, "clustering_avg/nmi": 60.5}
