"""The report of ``augcse cluster`` from a hand-made record: the verdict first, top words by c-TF-IDF (our formula
equal to BERTopic's ``ClassTfidfTransformer``), representative texts by confidence, the trace and the peers."""

from __future__ import annotations

import numpy as np
import pytest

from augcse.report.cluster import class_tfidf, representative, top_words, write_report

TEXTS = ["python list sort", "python dict keys", "python list append", "java spring boot", "java maven build",
         "java spring security"]
LABELS = np.array([0, 0, 0, 1, 1, 1])


def test_our_class_tfidf_is_bertopics():
    from bertopic.vectorizers import ClassTfidfTransformer
    from scipy.sparse import csr_matrix

    counts = csr_matrix(np.random.default_rng(0).integers(0, 5, size=(4, 30)))  # as CountVectorizer gives them
    ours = class_tfidf(counts)
    theirs = np.asarray(ClassTfidfTransformer().fit_transform(counts).todense())
    assert np.allclose(ours, theirs)


@pytest.mark.parametrize("with_bertopic", [True, False])
def test_top_words_name_each_cluster(monkeypatch, with_bertopic):
    import builtins

    if not with_bertopic:  # scikit-learn's counts and our formula
        real = builtins.__import__
        monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                            if name.startswith("bertopic") else real(name, *a, **k))
    words = top_words(TEXTS, LABELS, 3)
    assert words[0][0] == "python" and words[1][0] == "java" and words[2] == []
    assert "list" in words[0][:3] and "spring" in words[1][:3]


def test_representative_texts_are_the_most_confident():
    q = np.array([[0.9, 0.1], [0.6, 0.4], [0.8, 0.2], [0.3, 0.7], [0.45, 0.55], [0.1, 0.9]])
    assert representative(TEXTS, q, 2, count=2) == [[TEXTS[0], TEXTS[2]], [TEXTS[5], TEXTS[3]]]


def test_the_report_reads_the_record(tmp_path):
    rng = np.random.default_rng(0)
    q = np.array([[0.8, 0.2]] * 3 + [[0.3, 0.7]] * 3)
    record = {"verdict": "6 texts in 2 clusters after 4 steps of SCCL (stopped: settled); largest cluster 50%",
              "clusters": 2, "texts": 6, "texts_file": "/x/t.csv", "column": "text", "sha256": "ab" * 32,
              "method": "sccl", "model": "m", "steps": 4, "stopping_reason": "settled: …",
              "kept": "the trained model",
              "skipped_empty": 1, "sizes_before": [4, 2], "sizes_after": [3, 3], "q_after": q,
              "embeddings_before": rng.normal(size=(6, 8)), "embeddings_after": rng.normal(size=(6, 8)),
              "rule": {"checked_texts": 6, "min_change": 0.01, "plateau": 0.01, "max_share": 0.5, "max_empty": 0.5},
              "trace": [{"step": 2, "reason": "", "measures": {"changed": 0.5, "largest_share": 0.5, "empty": 0,
                                                              "loss": 0.12, "loss_change": None}},
                        {"step": 4, "reason": "settled: 0.00%", "measures": {"changed": 0.0, "largest_share": 0.5,
                                                                            "empty": 0, "loss": 0.1,
                                                                            "loss_change": 0.17}}],
              "peers": [{"model": "kept", "pipeline": "bertopic", "clusters": 3.0, "largest_share": 0.5,
                         "nmi_with_ours": 0.8}]}
    md, html = write_report(record, TEXTS, tmp_path)
    text = md.read_text()
    assert text.splitlines()[0] == f"# {record['verdict']}"
    assert "| 0 | 4 | 3 | python, list" in text and "1 empty rows were skipped" in text
    assert "| 2 | 50.00% | 50% | 0 | 0.1200 | — | go on |" in text
    assert "| 4 | 0.00% | 50% | 0 | 0.1000 | 17.00% | settled: 0.00% |" in text
    assert "| kept | bertopic | 3 | 50% | 0.800 |" in text
    assert record["verdict"] in html.read_text() and (tmp_path / "clusters-map.png").is_file()
