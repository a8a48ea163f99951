"""SentEval's classifier trained all at once equals SentEval's one-model-at-a-time loops."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from augcse.evaluation import senteval, senteval_reference
from augcse.evaluation.senteval import FAST_MODE, TEST_MODE, Job, SentEvalConfig, fit_jobs, torch_threads

# SentEval's modes with 3 folds and a shorter epoch cap, so that the one-by-one loop stays quick
MODES = {
    "test": dataclasses.replace(TEST_MODE, folds=3, max_epoch=40),
    "fast": dataclasses.replace(FAST_MODE, folds=3, max_epoch=40),
}


def _data(n: int, d: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping Gaussian classes: hard enough that L2 and early stopping matter."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    X = rng.normal(size=(n, d)) + 0.7 * rng.normal(size=(classes, d))[y]
    return X, y


def _same(batched: senteval.Outcome, reference: senteval.Outcome) -> None:
    assert batched.acc == reference.acc
    assert batched.devacc == reference.devacc
    assert batched.l2 == reference.l2  # the same L2 selected in every fold
    for p, q in zip(batched.pred, reference.pred, strict=True):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_batched_inner_kfold_equals_one_by_one(mode: str) -> None:
    X, y = _data(131, 8, 2, seed=0)  # 131 rows: uneven folds and a partial last batch
    config = MODES[mode]
    cpu = torch.device("cpu")
    with torch_threads(1):
        batched = senteval.inner_kfold(X, y, config, cpu, torch.float64)
        reference = senteval_reference.inner_kfold(X, y, config, cpu, torch.float64)
    _same(batched, reference)
    assert len(batched.l2) == config.folds


@pytest.mark.parametrize("mode", sorted(MODES))
def test_batched_kfold_and_split_equal_one_by_one(mode: str) -> None:
    config = MODES[mode]
    cpu = torch.device("cpu")
    X, y = _data(200, 6, 3, seed=1)  # three classes, as TREC has six
    with torch_threads(1):
        train, test = (X[:150], y[:150]), (X[150:], y[150:])
        _same(senteval.kfold(train, test, config, cpu, torch.float64),
              senteval_reference.kfold(train, test, config, cpu, torch.float64))
        train, dev, test = (X[:120], y[:120]), (X[120:160], y[120:160]), (X[160:], y[160:])
        _same(senteval.split_classifier(train, dev, test, config, cpu, torch.float64),
              senteval_reference.split_classifier(train, dev, test, config, cpu, torch.float64))


def test_float32_matches_too() -> None:
    X, y = _data(120, 8, 2, seed=3)
    config = MODES["fast"]
    with torch_threads(1):
        _same(senteval.inner_kfold(X, y, config, torch.device("cpu")),
              senteval_reference.inner_kfold(X, y, config, torch.device("cpu")))


def test_early_stopping_follows_senteval_counter() -> None:
    """A validation set the model cannot improve on stops after tenacity + 1 evaluations that did not
    improve; the weights kept are those of the first evaluation (the only improvement)."""
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(40, 3)))
    y = torch.as_tensor(rng.integers(0, 2, 40))
    config = SentEvalConfig(optim="adam", batch_size=8, tenacity=2, epoch_size=1, folds=2, max_epoch=200)
    dev = np.arange(30, 40)
    X[30:] = 0.0  # every dev row has the same features: the prediction is one class for all of them
    fitted = fit_jobs(X, y, [Job(np.arange(30), dev, 0.0)], 2, config)
    ref = senteval_reference.ReferenceLogReg(config, 3, 2, 0.0, torch.device("cpu"), torch.float64)
    best = ref.fit(X[:30].numpy(), y[:30].numpy(), validation_data=(X[30:].numpy(), y[30:].numpy()))
    assert fitted.devacc[0] == pytest.approx(best)
    np.testing.assert_allclose(fitted.weight[0].numpy(), ref.model[0].weight.detach().numpy().T)


def test_optimisers_match_torch() -> None:
    """One step of the stacked Adam / RMSprop equals torch.optim's, weight decay included."""
    rng = np.random.default_rng(0)
    for name, torch_optim in senteval_reference.TORCH_OPTIMIZERS.items():
        p = torch.as_tensor(rng.normal(size=(2, 3, 4)))
        grads = [torch.as_tensor(rng.normal(size=(2, 3, 4))) for _ in range(3)]
        stacked = p.clone()
        optim = senteval.OPTIMIZERS[name]([stacked])
        for g in grads:
            optim.step([stacked], [g + 0.01 * stacked], None)
        for m in range(2):
            q = p[m].clone().requires_grad_(True)
            ref = torch_optim([q], weight_decay=0.01)
            for g in grads:
                q.grad = g[m].clone()
                ref.step()
            np.testing.assert_allclose(stacked[m].numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_classifiers_ignore_bf16_autocast() -> None:
    """``augcse eval --bf16`` autocasts the whole evaluation; the classifiers must still train in float32."""
    from augcse.evaluation.intent import linear_softmax_accuracy

    X, y = _data(300, 32, 5, seed=2)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)  # unit-norm, as sentence-transformers models often give
    cpu = torch.device("cpu")
    train, val, test = (X[:100], y[:100]), (X[100:200], y[100:200]), (X[200:], y[200:])
    config = MODES["fast"]
    plain = (linear_softmax_accuracy(train, val, test, 5, device=cpu),
             senteval.kfold((X[:200], y[:200]), test, config, cpu))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast = (linear_softmax_accuracy(train, val, test, 5, device=cpu),
                senteval.kfold((X[:200], y[:200]), test, config, cpu))
    assert cast[0] == plain[0]
    _same(cast[1], plain[1])


def test_classifiers_switch_tf32_off_and_restore_it() -> None:
    """``training.tf32=true`` turns TF32 on for the process; the classifiers' products run in IEEE float32 and
    the setting is given back afterwards. A child process, so the global switch never leaks into other tests."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from augcse.evaluation.senteval import full_precision\n"
        "m = torch.backends.cuda.matmul\n"
        "key = 'fp32_precision' if hasattr(m, 'fp32_precision') else 'allow_tf32'\n"
        "setattr(m, key, 'tf32' if key == 'fp32_precision' else True)\n"
        "inside = full_precision(lambda: getattr(m, key))()\n"
        "print(inside, getattr(m, key))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out in (["ieee", "tf32"], ["False", "True"])
