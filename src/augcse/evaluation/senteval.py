"""SentEval's transfer classifier (the papers' protocol), with every model of a task trained at once.

SentEval (``senteval/tools/classifier.py`` and ``validation.py``) fits a logistic regression
(``MLP`` with ``nhid = 0``: one ``nn.Linear``) per fold and per L2 value, one after another:

- each model is seeded with 1111 (``numpy`` and ``torch``): the same initial weights, and one
  ``numpy`` permutation of the training rows per epoch drawn from a fresh ``RandomState(1111)``;
- mean cross-entropy, ``torch.optim`` Adam (test mode) or RMSprop (fast mode) with their default
  learning rates and ``weight_decay`` = the L2 value on weights and bias. (SentEval sets
  ``loss_fn.size_average = False`` after building ``nn.CrossEntropyLoss``; since PyTorch 0.4.1 the loss
  reads ``reduction`` and ignores that attribute, so the papers, run on PyTorch >= 1.x, trained on the
  mean, as here);
- ``epoch_size`` epochs between two evaluations on the validation data; the best model is kept,
  and training stops after ``tenacity + 1`` evaluations that did not improve (the counter is
  never reset) or when 200 epochs have passed;
- validation data = the held-out inner fold, or a random 5 % of the training rows
  (``validation_split=0.05``, drawn from the same ``RandomState`` before the first epoch);
- the L2 grid is ``10^-5 .. 10^-2``, folds are ``StratifiedKFold(shuffle=True, random_state=1111)``,
  mean accuracies are rounded to 2 decimals and ties go to the smallest L2.

Test mode: Adam, batch 64, tenacity 5, epoch size 4, 10 folds. Fast mode: RMSprop, batch 128,
tenacity 3, epoch size 2, 5 folds (SimCSE's ``evaluation.py``, docs/PAPERS.md §1).

Models that see the same training rows draw the same permutations, so the L2 values of one fold
share every batch. :func:`fit_jobs` stacks all models of a task into one ``(groups, d, L2 × classes)``
weight tensor and trains them in lock-step with per-model Adam/RMSprop state and per-model stopping
masks; the training maths is SentEval's, so the selected L2 and the accuracies are the ones a
one-by-one run gives (``tests/test_senteval.py`` checks this against
:mod:`augcse.evaluation.senteval_reference`, a plain transcription of SentEval's loops).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold
from torch import nn
from tqdm.auto import tqdm

SENTEVAL_SEED = 1111
L2_GRID = tuple(10.0**t for t in range(-5, -1))  # SentEval's PyTorch grid
VALIDATION_SPLIT = 0.05

Optimizer = Literal["adam", "rmsprop"]


@dataclass(frozen=True)
class SentEvalConfig:
    """One mode of SentEval's classifier (``params['classifier']`` plus ``kfold``)."""

    optim: Optimizer
    batch_size: int
    tenacity: int
    epoch_size: int
    folds: int
    max_epoch: int = 200
    seed: int = SENTEVAL_SEED


TEST_MODE = SentEvalConfig(optim="adam", batch_size=64, tenacity=5, epoch_size=4, folds=10)
FAST_MODE = SentEvalConfig(optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2, folds=5)


def senteval_config(fast: bool, seed: int = 0) -> SentEvalConfig:
    """Test or fast mode; ``seed`` shifts SentEval's 1111 (``seed=0`` is SentEval)."""
    base = FAST_MODE if fast else TEST_MODE
    return SentEvalConfig(base.optim, base.batch_size, base.tenacity, base.epoch_size, base.folds,
                          base.max_epoch, SENTEVAL_SEED + seed)


def folds(y: np.ndarray, k: int, random_state: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """SentEval's stratified, shuffled folds."""
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    return list(splitter.split(np.zeros(len(y)), y))


def initial_linear(inputdim: int, nclasses: int, seed: int) -> nn.Linear:
    """The layer SentEval starts every model from: ``nn.Linear`` built right after ``torch.manual_seed``.

    The global torch generator is restored afterwards.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Linear(inputdim, nclasses)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op torch threads (None: unchanged). These models are small: on a machine
    shared with other jobs one thread was up to 30x faster than two (measured, VaSCL's intent classifier)."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def ieee_matmul() -> Iterator[None]:
    """cuBLAS matrix products in IEEE float32 for the duration, whatever TF32 setting the process has
    (``training.tf32=true`` switches TF32 on for the whole process, evaluation included)."""
    matmul = torch.backends.cuda.matmul
    key = "fp32_precision" if hasattr(matmul, "fp32_precision") else "allow_tf32"  # torch >= 2.9, older
    before = getattr(matmul, key)
    setattr(matmul, key, "ieee" if key == "fp32_precision" else False)
    try:
        yield
    finally:
        setattr(matmul, key, before)


def full_precision(fn):
    """Run ``fn`` in float32: autocast off and no TF32. ``augcse eval --bf16`` autocasts the whole evaluation
    for the encoder and ``training.tf32`` turns TF32 on for the process, and these small classifiers must
    train and predict in float32 (under bf16 autocast VaSCL's classifier stayed at chance level and
    SentEval's no longer matched the one-by-one loop)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.autocast("cpu", enabled=False))
            stack.enter_context(ieee_matmul())
            if torch.cuda.is_available():
                stack.enter_context(torch.autocast("cuda", enabled=False))
            return fn(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------- optimisers


class _Adam:
    """``torch.optim.Adam`` (defaults, L2 as ``weight_decay``) for a stack of models, each with its own step."""

    lr, beta1, beta2, eps = 1e-3, 0.9, 0.999, 1e-8

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = torch.zeros(params[0].shape[0], dtype=torch.float64, device=params[0].device)

    def keep(self, rows: torch.Tensor) -> None:
        self.m, self.v, self.t = [x[rows] for x in self.m], [x[rows] for x in self.v], self.t[rows]

    def step(self, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], rows: torch.Tensor | None) -> None:
        t = self.t if rows is None else self.t[rows]
        t = t + 1
        step_size = (self.lr / (1 - self.beta1**t)).to(params[0].dtype)
        bc2_sqrt = torch.sqrt(1 - self.beta2**t).to(params[0].dtype)
        for p, g, m, v in zip(params, grads, self.m, self.v):
            shape = (-1,) + (1,) * (p.dim() - 1)
            if rows is None:
                pm, mm, vv = p, m, v
            else:
                pm, mm, vv = p[rows], m[rows], v[rows]
            mm = mm.lerp(g, 1 - self.beta1)
            vv = vv * self.beta2 + (1 - self.beta2) * g * g
            denom = vv.sqrt() / bc2_sqrt.view(shape) + self.eps
            new = pm - step_size.view(shape) * (mm / denom)
            _assign(p, new, rows)
            _assign(m, mm, rows)
            _assign(v, vv, rows)
        if rows is None:
            self.t = t
        else:
            self.t[rows] = t


class _RMSprop:
    """``torch.optim.RMSprop`` (defaults: lr 0.01, alpha 0.99, eps 1e-8) for a stack of models."""

    lr, alpha, eps = 1e-2, 0.99, 1e-8

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        self.sq = [torch.zeros_like(p) for p in params]

    def keep(self, rows: torch.Tensor) -> None:
        self.sq = [x[rows] for x in self.sq]

    def step(self, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], rows: torch.Tensor | None) -> None:
        for p, g, sq in zip(params, grads, self.sq):
            pm, s = (p, sq) if rows is None else (p[rows], sq[rows])
            s = s * self.alpha + (1 - self.alpha) * g * g
            _assign(p, pm - self.lr * (g / (s.sqrt() + self.eps)), rows)
            _assign(sq, s, rows)


def _assign(target: torch.Tensor, value: torch.Tensor, rows: torch.Tensor | None) -> None:
    if rows is None:
        target.copy_(value)
    else:
        target[rows] = value


OPTIMIZERS: dict[str, type] = {"adam": _Adam, "rmsprop": _RMSprop}


# --------------------------------------------------------------------------- batched training


@dataclass(frozen=True)
class Job:
    """One SentEval ``MLP.fit``: training rows, validation rows (None: a 5 % split) and the L2 value."""

    train: np.ndarray
    dev: np.ndarray | None
    l2: float


@dataclass
class Fitted:
    """Best-validation weights ``(M, d, C)``, biases ``(M, C)`` and validation accuracies of M jobs."""

    weight: torch.Tensor
    bias: torch.Tensor
    devacc: np.ndarray

    def predict(self, X: torch.Tensor, job: int) -> np.ndarray:
        return (X @ self.weight[job] + self.bias[job]).argmax(-1).cpu().numpy()

    def accuracy(self, X: torch.Tensor, y: np.ndarray, job: int) -> float:
        return float(np.mean(self.predict(X, job) == y))


@dataclass
class _Group:
    """Jobs that share their training rows (hence every batch): one slot per L2 value."""

    train: np.ndarray
    dev: np.ndarray
    rng: np.random.RandomState
    jobs: list[int] = field(default_factory=list)


def _groups(jobs: Sequence[Job], seed: int) -> list[_Group]:
    groups: dict[tuple, _Group] = {}
    for j, job in enumerate(jobs):
        key = (job.train.tobytes(), None if job.dev is None else job.dev.tobytes())
        if key not in groups:
            rng = np.random.RandomState(seed)
            train, dev = job.train, job.dev
            if dev is None:  # SentEval's prepare_split: the first draw of the model's RandomState
                perm = rng.permutation(len(train))
                cut = int(VALIDATION_SPLIT * len(train))
                train, dev = train[perm[cut:]], train[perm[:cut]]
            groups[key] = _Group(train, dev, rng)
        groups[key].jobs.append(j)
    return list(groups.values())


def _padded(rows: Sequence[np.ndarray], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Index matrix (padded with row 0) and its validity mask."""
    width = max(len(r) for r in rows)
    idx = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, r in enumerate(rows):
        idx[i, : len(r)], mask[i, : len(r)] = r, True
    return torch.from_numpy(idx).to(device), torch.from_numpy(mask).to(device)


@full_precision
def fit_jobs(
    X: torch.Tensor, y: torch.Tensor, jobs: Sequence[Job], nclasses: int, config: SentEvalConfig
) -> Fitted:
    """Train every job as SentEval's ``MLP(nhid=0).fit`` would, all at once on ``X.device``.

    ``X`` holds every row the jobs index (float tensor); ``y`` the integer labels. On a CPU it runs on
    one torch thread: with 2 threads on a shared 2-core machine MR's fast mode took 273 s instead of 30 s.
    """
    with torch_threads(1 if X.device.type == "cpu" else None):
        return _fit_jobs(X, y, jobs, nclasses, config)


def _fit_jobs(X: torch.Tensor, y: torch.Tensor, jobs: Sequence[Job], nclasses: int, config: SentEvalConfig) -> Fitted:
    device, dtype = X.device, X.dtype
    groups = _groups(jobs, config.seed)
    n_groups, slots, d, C = len(groups), max(len(g.jobs) for g in groups), X.shape[1], nclasses
    init = initial_linear(d, C, config.seed).to(device, dtype)
    W = init.weight.detach().repeat(n_groups, slots, 1).contiguous()  # (G, slots*C, d): one row per class
    b = init.bias.detach().repeat(n_groups, slots).contiguous()  # (G, slots*C)
    l2 = torch.zeros(n_groups, slots, dtype=dtype, device=device)
    real = torch.zeros(n_groups, slots, dtype=torch.bool, device=device)
    for g, group in enumerate(groups):
        for s, j in enumerate(group.jobs):
            l2[g, s], real[g, s] = jobs[j].l2, True
    l2 = l2.repeat_interleave(C, dim=1)  # (G, slots*C)
    dev_idx, dev_mask = _padded([g.dev for g in groups], device)
    best_W, best_b = W.clone(), b.clone()
    best = torch.full((n_groups, slots), -1, dtype=torch.long, device=device)  # correct dev predictions
    waited = torch.zeros(n_groups, slots, dtype=torch.long, device=device)
    active = real.clone()
    live = torch.arange(n_groups, device=device)  # original ids of the groups still training
    optim = OPTIMIZERS[config.optim]([W, b])
    nepoch = 0
    bar = tqdm(total=config.max_epoch, desc=f"classifier: {len(jobs)} models", unit="epoch", leave=False,
               disable=None)  # on a terminal only
    while bool(active.any()) and nepoch <= config.max_epoch:
        for _ in range(config.epoch_size):
            _train_epoch(X, y, [groups[int(g)] for g in live], W, b, l2[live], optim, config.batch_size, C)
        nepoch += config.epoch_size
        bar.update(min(config.epoch_size, bar.total - bar.n))
        correct = _correct(X, y, dev_idx[live], dev_mask[live], W, b, C)
        act = active[live]
        improved = act & (correct > best[live])
        best[live] = torch.where(improved, correct, best[live])
        keep_w = improved.repeat_interleave(C, dim=1)
        best_W[live] = torch.where(keep_w[:, :, None], W, best_W[live])
        best_b[live] = torch.where(keep_w, b, best_b[live])
        stale = act & ~improved
        stop = stale & (waited[live] >= config.tenacity)
        waited[live] = waited[live] + stale.long()
        active[live] = act & ~stop
        still = active[live].any(dim=1)
        if not bool(still.all()):
            rows = still.nonzero().squeeze(1)
            live, W, b = live[rows], W[rows].contiguous(), b[rows].contiguous()
            optim.keep(rows)
        bar.set_postfix(training=int(active.sum()))
    bar.close()
    return _collect(groups, jobs, best_W, best_b, best, dev_mask, C)


def _gather(X: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``X[idx]`` for a 2-D index; ``index_select`` on the flat index is ~4x faster on a CPU."""
    return X.index_select(0, idx.reshape(-1)).view(*idx.shape, X.shape[1])


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the (2–6) classes; spelled out, it is ~4x faster than ``Tensor.softmax`` on so short a dim."""
    e = (logits - logits.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def _train_epoch(X, y, groups: list[_Group], W, b, l2, optim, batch_size: int, C: int) -> None:
    """One pass over each group's training rows, in the group's own permutation, batch by batch.

    ``W`` is ``(G, slots*C, d)``: with the feature axis last both products below are plain row-major
    matrix products, 2-4x faster than with ``(G, d, slots*C)`` for these thin outputs.
    """
    orders = [g.train[g.rng.permutation(len(g.train))] for g in groups]
    steps = max(math.ceil(len(o) / batch_size) for o in orders)
    idx, mask = _padded(orders, X.device)
    pad = steps * batch_size - idx.shape[1]
    if pad:
        idx = torch.nn.functional.pad(idx, (0, pad))
        mask = torch.nn.functional.pad(mask, (0, pad))
    G, slots = W.shape[0], W.shape[1] // C
    idx, mask = idx.view(G, steps, batch_size), mask.view(G, steps, batch_size)
    minus_one = torch.full((G, batch_size, slots, 1), -1.0, dtype=W.dtype, device=W.device)  # the target's -1
    for s in range(steps):
        rows_idx, valid = idx[:, s], mask[:, s]
        count = valid.sum(1)
        running = count > 0
        xb, yb = _gather(X, rows_idx), y[rows_idx]  # (G, B, d), (G, B)
        logits = torch.baddbmm(b.unsqueeze(1), xb, W.transpose(1, 2)).view(G, batch_size, slots, C)
        grad = _softmax(logits)
        grad.scatter_add_(-1, yb.view(G, batch_size, 1, 1).expand(G, batch_size, slots, 1), minus_one)
        weight = valid.to(grad.dtype) / count.clamp(min=1).to(grad.dtype).unsqueeze(1)  # mean cross-entropy
        grad = (grad * weight.view(G, batch_size, 1, 1)).view(G, batch_size, slots * C)
        gW = torch.bmm(grad.transpose(1, 2), xb) + l2.unsqueeze(2) * W
        gb = grad.sum(1) + l2 * b
        if bool(running.all()):
            optim.step([W, b], [gW, gb], None)
        elif bool(running.any()):
            rows = running.nonzero().squeeze(1)
            optim.step([W, b], [gW[rows], gb[rows]], rows)


def _correct(X, y, dev_idx, dev_mask, W, b, C: int) -> torch.Tensor:
    """Correct validation predictions per model, ``(G, slots)``."""
    G, slots = W.shape[0], W.shape[1] // C
    correct = torch.zeros(G, slots, dtype=torch.long, device=W.device)
    chunk = 1024
    for start in range(0, dev_idx.shape[1], chunk):
        idx, mask = dev_idx[:, start : start + chunk], dev_mask[:, start : start + chunk]
        logits = torch.baddbmm(b.unsqueeze(1), _gather(X, idx), W.transpose(1, 2)).view(G, idx.shape[1], slots, C)
        hit = (logits.argmax(-1) == y[idx].unsqueeze(-1)) & mask.unsqueeze(-1)
        correct += hit.sum(1)
    return correct


def _collect(groups, jobs, best_W, best_b, best, dev_mask, C: int) -> Fitted:
    d = best_W.shape[2]
    weight = torch.empty(len(jobs), d, C, dtype=best_W.dtype, device=best_W.device)
    bias = torch.empty(len(jobs), C, dtype=best_W.dtype, device=best_W.device)
    devacc = np.zeros(len(jobs))
    n_dev = dev_mask.sum(1).cpu().numpy()
    best_np = best.cpu().numpy()
    for g, group in enumerate(groups):
        for s, j in enumerate(group.jobs):
            weight[j] = best_W[g, s * C : (s + 1) * C].T
            bias[j] = best_b[g, s * C : (s + 1) * C]
            devacc[j] = best_np[g, s] / n_dev[g]
    return Fitted(weight, bias, devacc)


# --------------------------------------------------------------------------- SentEval's validation schemes


@dataclass
class Outcome:
    """What a SentEval validation scheme reports: ×100 accuracies rounded as SentEval, the L2 chosen
    (one per outer fold for nested CV) and the test predictions (one array per test set)."""

    devacc: float
    acc: float
    l2: list[float]
    pred: list[np.ndarray]


def _tensors(X: np.ndarray, y: np.ndarray, device: torch.device | None, dtype: torch.dtype):
    device = device or default_device()
    return torch.as_tensor(np.asarray(X), dtype=dtype, device=device), torch.as_tensor(np.asarray(y), device=device)


def _best_l2(scores: Sequence[float]) -> tuple[int, float]:
    best = int(np.argmax(scores))
    return best, float(scores[best])


@full_precision
def inner_kfold(
    X: np.ndarray, y: np.ndarray, config: SentEvalConfig, device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> Outcome:
    """SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA): outer k folds, L2 by inner k folds."""
    Xt, yt = _tensors(X, y, device, dtype)
    nclasses, k = int(np.max(y)) + 1, config.folds
    outer = folds(y, k, config.seed)
    inner = [[(tr[a], tr[b]) for a, b in folds(y[tr], k, config.seed)] for tr, _ in outer]
    jobs = [Job(a, b, reg) for parts in inner for reg in L2_GRID for a, b in parts]
    fitted = fit_jobs(Xt, yt, jobs, nclasses, config)
    scores = fitted.devacc.reshape(k, len(L2_GRID), k)
    chosen, dev = [], []
    for o in range(k):
        best, score = _best_l2([round(100 * float(np.mean(s)), 2) for s in scores[o]])
        chosen.append(L2_GRID[best])
        dev.append(score)
    final = fit_jobs(Xt, yt, [Job(tr, None, reg) for (tr, _), reg in zip(outer, chosen)], nclasses, config)
    preds = [final.predict(Xt[torch.as_tensor(te, device=Xt.device)], o) for o, (_, te) in enumerate(outer)]
    test = [round(100 * float(np.mean(p == y[te])), 2) for p, (_, te) in zip(preds, outer)]
    return Outcome(round(float(np.mean(dev)), 2), round(float(np.mean(test)), 2), chosen, preds)


@full_precision
def kfold(
    train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], config: SentEvalConfig,
    device: torch.device | None = None, dtype: torch.dtype = torch.float32,
) -> Outcome:
    """SentEval's ``KFoldClassifier`` (TREC, MRPC): L2 by k-fold CV on train, refit on train (5 % split)."""
    (Xtr, ytr), (Xte, yte) = train, test
    Xt, yt = _tensors(Xtr, ytr, device, dtype)
    nclasses, k = int(np.max(ytr)) + 1, config.folds
    parts = folds(ytr, k, config.seed)
    fitted = fit_jobs(Xt, yt, [Job(a, b, reg) for reg in L2_GRID for a, b in parts], nclasses, config)
    scores = [round(100 * float(np.mean(s)), 2) for s in fitted.devacc.reshape(len(L2_GRID), k)]
    best, dev = _best_l2(scores)
    final = fit_jobs(Xt, yt, [Job(np.arange(len(ytr)), None, L2_GRID[best])], nclasses, config)
    pred = final.predict(_tensors(Xte, yte, Xt.device, dtype)[0], 0)
    return Outcome(dev, round(100 * float(np.mean(pred == yte)), 2), [L2_GRID[best]], [pred])


@full_precision
def split_classifier(
    train: tuple[np.ndarray, np.ndarray], dev: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray],
    config: SentEvalConfig, device: torch.device | None = None, dtype: torch.dtype = torch.float32,
) -> Outcome:
    """SentEval's ``SplitClassifier`` (SST2): L2 on the dev set, test accuracy of that model.

    SentEval refits the chosen L2 with the same seed and data, which reproduces the model already
    trained for it, so that model is scored directly.
    """
    Xall = np.concatenate([train[0], dev[0]])
    yall = np.concatenate([train[1], dev[1]])
    Xt, yt = _tensors(Xall, yall, device, dtype)
    nclasses = int(np.max(yall)) + 1
    tr, dv = np.arange(len(train[1])), np.arange(len(train[1]), len(yall))
    fitted = fit_jobs(Xt, yt, [Job(tr, dv, reg) for reg in L2_GRID], nclasses, config)
    best, devacc = _best_l2([round(100 * float(a), 2) for a in fitted.devacc])
    pred = fitted.predict(_tensors(test[0], test[1], Xt.device, dtype)[0], best)
    return Outcome(devacc, round(100 * float(np.mean(pred == test[1])), 2), [L2_GRID[best]], [pred])
