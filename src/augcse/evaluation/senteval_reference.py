"""SentEval's classifier loops, one model at a time: the reference :mod:`augcse.evaluation.senteval` must match.

A plain transcription of ``senteval/tools/classifier.py`` (``MLP`` with ``nhid = 0``) and of
``InnerKFoldClassifier``, ``KFoldClassifier`` and ``SplitClassifier`` from ``validation.py``, using
``nn.Linear`` and ``torch.optim`` as SentEval does, on any device. It is slow (hundreds of models
trained in turn) and exists for the equivalence test and the benchmark.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from augcse.evaluation.senteval import (
    L2_GRID,
    VALIDATION_SPLIT,
    Outcome,
    SentEvalConfig,
    default_device,
    folds,
    full_precision,
    initial_linear,
)

TORCH_OPTIMIZERS = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}


class ReferenceLogReg:
    """SentEval's ``MLP(nhid=0)``: seeded init and permutations, early stopping on validation accuracy."""

    def __init__(self, config: SentEvalConfig, inputdim: int, nclasses: int, l2reg: float,
                 device: torch.device, dtype: torch.dtype) -> None:
        self.config, self.device, self.dtype = config, device, dtype
        self.rng = np.random.RandomState(config.seed)  # SentEval: np.random.seed(seed)
        self.model = nn.Sequential(initial_linear(inputdim, nclasses, config.seed)).to(device, dtype)
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = TORCH_OPTIMIZERS[config.optim](self.model.parameters())
        self.optimizer.param_groups[0]["weight_decay"] = l2reg

    def _tensor(self, X: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.as_tensor(X, dtype=self.dtype, device=self.device), torch.as_tensor(y, device=self.device)

    def fit(self, X: np.ndarray, y: np.ndarray, validation_data=None, validation_split: float | None = None) -> float:
        if validation_data is not None:
            (trainX, trainy), (devX, devy) = (X, y), validation_data
        else:
            permutation = self.rng.permutation(len(X))
            cut = int(validation_split * len(X))
            trainX, trainy = X[permutation[cut:]], y[permutation[cut:]]
            devX, devy = X[permutation[:cut]], y[permutation[:cut]]
        trainX, trainy = self._tensor(trainX, trainy)
        nepoch, best, best_model, stop, waited = 0, -1.0, None, False, 0
        while not stop and nepoch <= self.config.max_epoch:
            for _ in range(self.config.epoch_size):
                self._epoch(trainX, trainy)
            nepoch += self.config.epoch_size
            accuracy = self.score(devX, devy)
            if accuracy > best:
                best, best_model = accuracy, copy.deepcopy(self.model)
            else:
                if waited >= self.config.tenacity:
                    stop = True
                waited += 1
        self.model = best_model
        return best

    def _epoch(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.model.train()
        permutation = self.rng.permutation(len(X))
        for i in range(0, len(X), self.config.batch_size):
            idx = torch.as_tensor(permutation[i : i + self.config.batch_size], device=self.device)
            loss = self.loss_fn(self.model(X[idx]), y[idx])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def predict(self, X: np.ndarray) -> np.ndarray:
        self.model.eval()
        with torch.no_grad():
            return self.model(torch.as_tensor(X, dtype=self.dtype, device=self.device)).argmax(1).cpu().numpy()

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))


def _clf(config, X, y, reg, device, dtype) -> ReferenceLogReg:
    return ReferenceLogReg(config, X.shape[1], int(np.max(y)) + 1, reg, device or default_device(), dtype)


@full_precision
def inner_kfold(X: np.ndarray, y: np.ndarray, config: SentEvalConfig, device=None, dtype=torch.float32) -> Outcome:
    """``InnerKFoldClassifier.run``."""
    dev, test, chosen, preds = [], [], [], []
    for tr, te in folds(y, config.folds, config.seed):
        scores = []
        for reg in L2_GRID:
            regscores = []
            for a, b in folds(y[tr], config.folds, config.seed):
                clf = _clf(config, X, y, reg, device, dtype)
                clf.fit(X[tr][a], y[tr][a], validation_data=(X[tr][b], y[tr][b]))
                regscores.append(clf.score(X[tr][b], y[tr][b]))
            scores.append(round(100 * float(np.mean(regscores)), 2))
        optreg = L2_GRID[int(np.argmax(scores))]
        chosen.append(optreg)
        dev.append(float(np.max(scores)))
        clf = _clf(config, X, y, optreg, device, dtype)
        clf.fit(X[tr], y[tr], validation_split=VALIDATION_SPLIT)
        preds.append(clf.predict(X[te]))
        test.append(round(100 * clf.score(X[te], y[te]), 2))
    return Outcome(round(float(np.mean(dev)), 2), round(float(np.mean(test)), 2), chosen, preds)


@full_precision
def kfold(train, test, config: SentEvalConfig, device=None, dtype=torch.float32) -> Outcome:
    """``KFoldClassifier.run``."""
    (X, y), (Xte, yte) = train, test
    scores = []
    for reg in L2_GRID:
        scanscores = []
        for a, b in folds(y, config.folds, config.seed):
            clf = _clf(config, X, y, reg, device, dtype)
            clf.fit(X[a], y[a], validation_data=(X[b], y[b]))
            scanscores.append(clf.score(X[b], y[b]))
        scores.append(round(100 * float(np.mean(scanscores)), 2))
    optreg = L2_GRID[int(np.argmax(scores))]
    clf = _clf(config, X, y, optreg, device, dtype)
    clf.fit(X, y, validation_split=VALIDATION_SPLIT)
    pred = clf.predict(Xte)
    return Outcome(float(np.max(scores)), round(100 * clf.score(Xte, yte), 2), [optreg], [pred])


@full_precision
def split_classifier(train, dev, test, config: SentEvalConfig, device=None, dtype=torch.float32) -> Outcome:
    """``SplitClassifier.run`` (the chosen L2 is refitted, as SentEval does)."""
    (X, y), (Xdv, ydv), (Xte, yte) = train, dev, test
    scores = []
    for reg in L2_GRID:
        clf = _clf(config, X, y, reg, device, dtype)
        clf.fit(X, y, validation_data=(Xdv, ydv))
        scores.append(round(100 * clf.score(Xdv, ydv), 2))
    optreg = L2_GRID[int(np.argmax(scores))]
    clf = _clf(config, X, y, optreg, device, dtype)
    clf.fit(X, y, validation_data=(Xdv, ydv))
    pred = clf.predict(Xte)
    return Outcome(float(np.max(scores)), round(100 * clf.score(Xte, yte), 2), [optreg], [pred])
