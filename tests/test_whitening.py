"""BERT-whitening (Su et al. 2021): the fit against a hand computation on small float64 arrays, the saved
model that a plain SentenceTransformer loads, the command, and the reproduce rows' whitening spec."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from augcse.models.whitening import apply_whitening, fit_whitening, whiten_model, whitening_module


def _points(n: int = 200, d: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d)) + 3 * np.eye(d)
    return rng.normal(size=(n, d)) @ mixing + rng.normal(size=d) * 4


def test_the_fit_is_the_authors_formula_by_hand() -> None:
    x = np.array([[1.0, 2.0], [3.0, 1.0], [0.0, 0.0], [2.0, 5.0]])
    mu, w = fit_whitening(x)
    # by hand: μ = column means; Σ = (X − μ)ᵀ(X − μ) / (n − 1); Σ = U Λ Uᵀ; W = U Λ^(-1/2)
    assert np.allclose(mu, [1.5, 2.0])
    centred = x - [1.5, 2.0]
    cov = centred.T @ centred / 3
    assert np.allclose(cov, [[5 / 3, 1.0], [1.0, 14 / 3]])
    values, vectors = np.linalg.eigh(cov)  # ascending; the SVD of a covariance is its eigen-decomposition
    expected = vectors[:, ::-1] / np.sqrt(values[::-1])
    assert np.allclose(np.abs(w), np.abs(expected))  # each column up to its sign
    assert np.allclose(w @ w.T, np.linalg.inv(cov))  # W Wᵀ = Σ⁻¹ whatever the signs
    assert np.allclose(apply_whitening(x, mu, w), (x - mu) @ w)


def test_the_whitened_fitting_set_has_zero_mean_and_identity_covariance() -> None:
    x = _points()
    mu, w = fit_whitening(torch.tensor(x, dtype=torch.float64))
    y = apply_whitening(x, mu, w)
    assert y.dtype == np.float64
    assert np.allclose(y.mean(axis=0), 0.0, atol=1e-12)
    assert np.allclose(np.cov(y.T), np.eye(5), atol=1e-10)


def test_a_reduced_dimension_keeps_the_directions_of_largest_variance() -> None:
    x = _points(d=6)
    mu, w = fit_whitening(x, dim=3)
    y = apply_whitening(x, mu, w)
    assert w.shape == (6, 3) and np.allclose(np.cov(y.T), np.eye(3), atol=1e-10)
    _, full = fit_whitening(x)
    assert np.allclose(w, full[:, :3])
    variance = np.var((x - mu) @ (w * np.sqrt(np.linalg.svd(np.cov(x.T))[1][:3])), axis=0, ddof=1)
    assert np.all(np.diff(variance) <= 1e-9)  # largest first


def test_too_few_sentences_or_a_bad_dimension_are_refused() -> None:
    with pytest.raises(ValueError, match="span only"):
        fit_whitening(_points(n=3, d=5))
    with pytest.raises(ValueError, match="between 1 and"):
        fit_whitening(_points(), dim=9)
    with pytest.raises(ValueError, match="at least 2"):
        fit_whitening(np.zeros((1, 4)))


def test_the_dense_module_computes_the_transform() -> None:
    x = _points(d=4)
    mu, w = fit_whitening(x)
    module = whitening_module(mu, w)
    out = module({"sentence_embedding": torch.tensor(x, dtype=torch.float32)})["sentence_embedding"]
    assert np.allclose(out.detach().numpy(), (x - mu) @ w, atol=1e-4)


def _sentences(data_dir: Path, n: int) -> list[str]:
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()
    return [line for line in lines if line.strip()][:n]


def test_a_whitened_model_saves_and_a_plain_sentence_transformer_loads_it(tiny_st, data_dir, tmp_path) -> None:
    from sentence_transformers import SentenceTransformer

    corpus = _sentences(data_dir, 80)
    # the tiny BERT's mean-pooled last layer (32 dimensions) lies in a hyperplane (LayerNorm): 31 directions
    with pytest.raises(ValueError, match="--dim 31"):
        whiten_model(tiny_st, corpus, batch_size=16)
    whitened = whiten_model(tiny_st, corpus, dim=16, batch_size=16)
    raw = tiny_st.encode(corpus, convert_to_numpy=True).astype(np.float64)
    mu, w = fit_whitening(raw, dim=16)
    ours = whitened.encode(corpus, convert_to_numpy=True)
    assert ours.shape == (80, 16)
    assert np.allclose(ours, (raw - mu) @ w, atol=1e-3)
    assert np.allclose(np.cov(ours.astype(np.float64).T), np.eye(16), atol=1e-2)
    whitened.save(str(tmp_path / "w"))
    loaded = SentenceTransformer(str(tmp_path / "w"))  # no custom code, no trust_remote_code
    assert np.allclose(loaded.encode(corpus[:10], convert_to_numpy=True), ours[:10], atol=1e-5)


def test_the_whiten_command_writes_a_loadable_model(tiny_model_dir, data_dir, tmp_path, capsys) -> None:
    from sentence_transformers import SentenceTransformer

    from augcse.commands.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(_sentences(data_dir, 60)) + "\n\n")
    out = tmp_path / "whitened"
    assert main(["whiten", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(out), "--dim", "8",
                 "--pooler", "avg"]) == 0
    assert "8 dimensions" in capsys.readouterr().out
    assert SentenceTransformer(str(out)).encode(["A man plays a guitar."]).shape == (1, 8)
    assert main(["whiten", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(out)]) == 2  # not empty
    assert main(["whiten", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(tmp_path / "x"),
                 "--pooler", "avgg"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_the_reproduce_rows_fit_whitening_on_their_corpus() -> None:
    from augcse.studies.reproduce import papers, resolved

    rows = {row.name: row for row in papers()["augcse"].rows}
    for name, model in (("bert-base-whitening", "bert-base-uncased"), ("roberta-base-whitening", "roberta-base")):
        row = rows[name]
        assert not row.trained and row.evaluate.model == model and row.evaluate.whiten is not None
        values = resolved(row)["evaluate"]
        assert values["whiten"] == {"corpus": row.evaluate.whiten.corpus, "dim": None}
