"""SentEval transfer tasks: logistic regression on frozen sentence embeddings (AugCSE Table 5).

Seven tasks, each a registered :class:`~augcse.evaluation.tasks.Task` in suite ``"transfer"``:

========  =====================================  ==========================================
task      data (``transfer/`` in the data dir)   protocol
========  =====================================  ==========================================
MR        ``MR/rt-polarity.{pos,neg}``           10-fold CV, C chosen by inner 10-fold CV
CR        ``CR/custrev.{pos,neg}``               10-fold CV, C chosen by inner 10-fold CV
SUBJ      ``SUBJ/subj.{objective,subjective}``   10-fold CV, C chosen by inner 10-fold CV
MPQA      ``MPQA/mpqa.{pos,neg}``                10-fold CV, C chosen by inner 10-fold CV
SST2      ``SST/binary/sentiment-{train,dev,test}``  train / dev / test: C chosen on dev
TREC      ``TREC/{train_5500,TREC_10}.label``    C chosen by 10-fold CV on train, test once
MRPC      ``MRPC/msr_paraphrase_{train,test}.txt``  pair features, C by 10-fold CV on train
========  =====================================  ==========================================

The SentEval protocol is kept so that numbers compare with the papers' tables:

- Reading: MR/CR/SUBJ/MPQA and TREC are decoded as latin-1, SST2 and MRPC as UTF-8; every line is
  split on whitespace and re-joined with single spaces (SentEval hands token lists to the batcher,
  which joins them with spaces). Empty lines of CR and MPQA are **kept** as (empty) samples, as
  SentEval's ``splitlines()`` does (3775 CR and 10606 MPQA samples). TREC keeps the coarse label
  (``DESC:manner`` -> ``DESC``) and drops the fine one, and removes the backquotes and apostrophes
  SentEval's download script strips from the cogcomp files; MRPC drops its header line (with a BOM).
- Sample order before the folds are drawn is SentEval's (sorted by token count, then label; SST2's
  three splits too, MRPC by the two token counts then label), and the folds are
  ``StratifiedKFold(shuffle=True, random_state=1111 + seed)``, so ``seed=0`` reproduces
  SentEval's folds exactly.
- Classifier (:data:`CLASSIFIERS`): ``"senteval"`` (default, the papers' protocol) is SentEval's
  PyTorch logistic regression with its L2 grid, optimiser and early stopping, every model of a task
  trained at once (:mod:`augcse.evaluation.senteval`). ``"sklearn"`` (tasks ``MR-sklearn``…, suite
  ``transfer-sklearn``) is scikit-learn's L-BFGS ``LogisticRegression`` with SentEval's scikit-learn
  C grids (2^-2..2^3 nested / dev split, 2^-1..2^5 train-set CV): a deterministic convex fit, faster on
  a CPU, but *not* the classifier behind the papers' figures (up to ~2 points apart on single tasks).
  Either way the regularisation is chosen on training folds or the dev set, never on the test data.
- MRPC pair features are SentEval's ``[|u - v|, u * v]`` (its ``mrpc.py``); u and v themselves are
  *not* included there (SentEval includes them only for SNLI-style tasks). Other layouts are
  registered in :data:`PAIR_FEATURES` (``"full"`` = ``[u, v, |u - v|, u * v]``).

Metrics (×100): ``acc`` (test accuracy, the main metric), ``devacc`` (selection accuracy: the
score model selection reads) and, for MRPC, ``f1``. Fast mode (during training): SentEval's fast
mode (RMSprop, batch 128, tenacity 3, epoch size 2, 5 folds); for ``sklearn``, 5 folds and a
3-value grid.
"""

from __future__ import annotations

import copy
import functools
from abc import ABC, abstractmethod
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from threadpoolctl import threadpool_limits

from augcse.assets.resolve import resolve_data
from augcse.evaluation import senteval
from augcse.evaluation.tasks import Encoder, Task, TaskRecord, register_task

SENTEVAL_SEED = senteval.SENTEVAL_SEED
GRID_NESTED = tuple(2.0**t for t in range(-2, 4))  # SentEval InnerKFold / SplitClassifier (sklearn)
GRID_KFOLD = tuple(2.0**t for t in range(-1, 6))  # SentEval KFoldClassifier (sklearn)
GRID_FAST = (0.5, 2.0, 8.0)


@dataclass(frozen=True)
class Protocol:
    """Classifier settings of one mode: number of folds and the C grids."""

    folds: int
    nested_grid: tuple[float, ...]
    kfold_grid: tuple[float, ...]
    max_iter: int = 1000


FULL = Protocol(folds=10, nested_grid=GRID_NESTED, kfold_grid=GRID_KFOLD)
FAST = Protocol(folds=5, nested_grid=GRID_FAST, kfold_grid=GRID_FAST, max_iter=300)


def protocol(fast: bool) -> Protocol:
    return FAST if fast else FULL


# --------------------------------------------------------------------------- classifier


def single_threaded(fn: Callable) -> Callable:
    """Run ``fn`` with one BLAS/OpenMP thread: the matrices here are small, and on a shared machine
    multi-threaded BLAS made each logistic-regression fit 6-20x slower (measured on 2 busy cores)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1):
            return fn(*args, **kwargs)

    return wrapper


def _logreg(C: float, seed: int, max_iter: int) -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=max_iter, random_state=seed)


def _fit(clf: LogisticRegression, X: np.ndarray, y: np.ndarray) -> LogisticRegression:
    with warnings.catch_warnings():  # unnormalised embeddings can need many lbfgs steps; accuracy is what counts
        warnings.simplefilter("ignore", ConvergenceWarning)
        return clf.fit(X, y)


def folds(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """SentEval's stratified, shuffled folds (``random_state = 1111 + seed``)."""
    return senteval.folds(y, k, SENTEVAL_SEED + seed)


def select_c(
    X: np.ndarray, y: np.ndarray, grid: Sequence[float], k: int, seed: int, max_iter: int = 1000
) -> tuple[float, float]:
    """Pick C by k-fold CV on (X, y) only; returns (best C, its mean accuracy ×100).

    C is visited from strong to weak regularisation, warm-starting each fit from the previous
    one (a regularisation path: the same optimum, several times faster). Mean accuracies are
    rounded to 2 decimals and ties go to the smaller C, as in SentEval.
    """
    grid = sorted(grid)
    scores = np.zeros((len(grid), k))
    for f, (tr, va) in enumerate(folds(y, k, seed)):
        clf = _logreg(grid[0], seed, max_iter)
        clf.warm_start = True
        for g, C in enumerate(grid):
            clf.C = C
            _fit(clf, X[tr], y[tr])
            scores[g, f] = clf.score(X[va], y[va])
    means = np.round(100 * scores.mean(axis=1), 2)
    best = int(np.argmax(means))
    return grid[best], float(means[best])


@single_threaded
def fit_selected(
    X: np.ndarray, y: np.ndarray, grid: Sequence[float], k: int, seed: int, max_iter: int = 1000
) -> tuple[LogisticRegression, float]:
    """Choose C by CV on (X, y), then refit on all of (X, y); returns (classifier, CV accuracy)."""
    C, dev = select_c(X, y, grid, k, seed, max_iter)
    return _fit(_logreg(C, seed, max_iter), X, y), dev


@single_threaded
def nested_cv_accuracy(X: np.ndarray, y: np.ndarray, proto: Protocol, seed: int = 0) -> dict[str, float]:
    """SentEval's ``InnerKFoldClassifier``: outer k-fold test accuracy, C chosen inside each training part.

    The held-out fold is never passed to :func:`fit_selected`, so selection cannot see it.
    """
    dev, test = [], []
    for tr, te in folds(y, proto.folds, seed):
        clf, dev_acc = fit_selected(X[tr], y[tr], proto.nested_grid, proto.folds, seed, proto.max_iter)
        dev.append(dev_acc)
        test.append(100 * clf.score(X[te], y[te]))
    return {"acc": float(np.mean(test)), "devacc": float(np.mean(dev))}


@single_threaded
def split_accuracy(
    train: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    grid: Sequence[float],
    seed: int = 0,
    max_iter: int = 1000,
) -> dict[str, float]:
    """SentEval's ``SplitClassifier``: C chosen on the dev set, test accuracy of that classifier."""
    (Xtr, ytr), (Xdv, ydv), (Xte, yte) = train, dev, test
    best: tuple[float, LogisticRegression] | None = None
    clf = _logreg(sorted(grid)[0], seed, max_iter)
    clf.warm_start = True
    for C in sorted(grid):
        clf.C = C
        _fit(clf, Xtr, ytr)
        score = 100 * clf.score(Xdv, ydv)
        if best is None or score > best[0]:
            best = (score, copy.deepcopy(clf))
    assert best is not None
    return {"acc": 100 * best[1].score(Xte, yte), "devacc": best[0]}


# --------------------------------------------------------------------------- pair features

PAIR_FEATURES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "senteval": lambda u, v: np.hstack([np.abs(u - v), u * v]),
    "full": lambda u, v: np.hstack([u, v, np.abs(u - v), u * v]),
}


def pair_features(u: np.ndarray, v: np.ndarray, layout: str = "senteval") -> np.ndarray:
    """Features of sentence pairs; ``"senteval"`` = ``[|u - v|, u * v]`` (dimension 2d)."""
    if layout not in PAIR_FEATURES:
        raise ValueError(f"unknown pair feature layout {layout!r}; known: {', '.join(PAIR_FEATURES)}")
    return PAIR_FEATURES[layout](np.asarray(u), np.asarray(v))


# --------------------------------------------------------------------------- classifiers

Split = tuple[np.ndarray, np.ndarray]


class TransferClassifier(ABC):
    """SentEval's three validation schemes for one classifier; scores are ×100 ``acc`` and ``devacc``."""

    @abstractmethod
    def nested(self, X: np.ndarray, y: np.ndarray, fast: bool, seed: int) -> dict[str, float]:
        """MR/CR/SUBJ/MPQA: outer k-fold test accuracy, regularisation by inner k-fold CV."""

    @abstractmethod
    def kfold(self, train: Split, test: Split, fast: bool, seed: int) -> tuple[dict[str, float], np.ndarray]:
        """TREC/MRPC: regularisation by k-fold CV on train, one test evaluation; also the test predictions."""

    @abstractmethod
    def split(self, train: Split, dev: Split, test: Split, fast: bool, seed: int) -> dict[str, float]:
        """SST2: regularisation on the dev set."""


class SentEvalClassifier(TransferClassifier):
    """SentEval's PyTorch logistic regression, batched (:mod:`augcse.evaluation.senteval`)."""

    def nested(self, X, y, fast, seed):
        out = senteval.inner_kfold(X, y, senteval.senteval_config(fast, seed))
        return {"acc": out.acc, "devacc": out.devacc}

    def kfold(self, train, test, fast, seed):
        out = senteval.kfold(train, test, senteval.senteval_config(fast, seed))
        return {"acc": out.acc, "devacc": out.devacc}, out.pred[0]

    def split(self, train, dev, test, fast, seed):
        out = senteval.split_classifier(train, dev, test, senteval.senteval_config(fast, seed))
        return {"acc": out.acc, "devacc": out.devacc}


class SklearnClassifier(TransferClassifier):
    """scikit-learn's L-BFGS logistic regression with SentEval's scikit-learn C grids (not the papers')."""

    def nested(self, X, y, fast, seed):
        return nested_cv_accuracy(X, y, protocol(fast), seed)

    def kfold(self, train, test, fast, seed):
        proto = protocol(fast)
        clf, dev = fit_selected(train[0], train[1], proto.kfold_grid, proto.folds, seed, proto.max_iter)
        pred = clf.predict(test[0])
        return {"acc": 100 * float(np.mean(pred == test[1])), "devacc": dev}, pred

    def split(self, train, dev, test, fast, seed):
        proto = protocol(fast)
        return split_accuracy(train, dev, test, proto.nested_grid, seed, proto.max_iter)


CLASSIFIERS: dict[str, TransferClassifier] = {"senteval": SentEvalClassifier(), "sklearn": SklearnClassifier()}
DEFAULT_CLASSIFIER = "senteval"


def variant_name(base: str, classifier: str) -> str:
    """Registry name of a transfer task under ``classifier`` (``MR``, ``MR-sklearn``)."""
    return base if classifier == DEFAULT_CLASSIFIER else f"{base}-{classifier}"


CITATIONS = {
    "MR": "Pang and Lee 2005, Seeing stars: Exploiting class relationships for sentiment categorization with "
          "respect to rating scales",
    "CR": "Hu and Liu 2004, Mining and summarizing customer reviews",
    "SUBJ": "Pang and Lee 2004, A sentimental education: Sentiment analysis using subjectivity summarization "
            "based on minimum cuts",
    "MPQA": "Wiebe et al. 2005, Annotating expressions of opinions and emotions in language",
    "SST2": "Socher et al. 2013, Recursive deep models for semantic compositionality over a sentiment treebank",
    "TREC": "Li and Roth 2002, Learning question classifiers",
    "MRPC": "Dolan and Brockett 2005, Automatically constructing a corpus of sentential paraphrases",
}


class TransferTask(Task):
    """A SentEval transfer task evaluated with one of :data:`CLASSIFIERS`: accuracy on test data
    (test folds or the test split), regularisation chosen on ``devacc`` (never test data)."""

    def __init__(self, base: str, classifier: str, files: tuple[str, ...]) -> None:
        if classifier not in CLASSIFIERS:
            raise ValueError(f"unknown transfer classifier {classifier!r}; known: {', '.join(CLASSIFIERS)}")
        self.classifier = CLASSIFIERS[classifier]
        default = classifier == DEFAULT_CLASSIFIER
        self.record = TaskRecord(
            variant_name(base, classifier), "transfer", "test", "acc", "devacc", files, CITATIONS[base],
            ("transfer",) if default else (f"transfer-{classifier}",), in_all=default, family=base,
            variant="" if default else classifier)


# --------------------------------------------------------------------------- reading


def _tokens(line: str) -> str:
    return " ".join(line.split())


def _read_lines(relpath: str, data_dir: Path | None, encoding: str) -> list[str]:
    """Every line, empty ones included (SentEval's ``read().splitlines()``)."""
    text = resolve_data(relpath, data_dir).read_text(encoding=encoding)
    return [_tokens(line) for line in text.splitlines()]


def _senteval_order(samples: list[Any], labels: list[int], key: Callable[[Any], tuple]) -> tuple[list, np.ndarray]:
    """SentEval sorts samples (by length, then label) before drawing folds; keep that order."""
    order = sorted(range(len(labels)), key=lambda i: (*key(samples[i]), labels[i]))
    return [samples[i] for i in order], np.array([labels[i] for i in order])


def _ntok(sentence: str) -> int:
    return len(sentence.split())


# --------------------------------------------------------------------------- tasks


class BinaryTask(TransferTask):
    """MR, CR, SUBJ, MPQA: two files (label 1, label 0), nested 10-fold cross-validation."""

    def __init__(self, name: str, positive: str, negative: str, classifier: str = DEFAULT_CLASSIFIER) -> None:
        super().__init__(name, classifier, (positive, negative))
        self.positive, self.negative = positive, negative

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        pos = _read_lines(self.positive, data_dir, "latin-1")
        neg = _read_lines(self.negative, data_dir, "latin-1")
        samples, labels = _senteval_order(pos + neg, [1] * len(pos) + [0] * len(neg), lambda s: (_ntok(s),))
        return {"X": samples, "y": labels}

    def sentences(self, data: dict[str, Any]) -> list[str]:
        return data["X"]

    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        return self.classifier.nested(encode(data["X"]), data["y"], fast, seed)


SST2_SPLITS = ("train", "dev", "test")


class SST2Task(TransferTask):
    """SST2: phrase-level train (67,349 lines), sentence dev and test; ``sentence \\t label`` per line."""

    root = "transfer/SST/binary"

    def __init__(self, classifier: str = DEFAULT_CLASSIFIER) -> None:
        super().__init__("SST2", classifier, tuple(f"{self.root}/sentiment-{split}" for split in SST2_SPLITS))

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        out = {}
        for split in SST2_SPLITS:
            lines = resolve_data(f"{self.root}/sentiment-{split}", data_dir).read_text(encoding="utf-8").splitlines()
            rows = [line.strip().split("\t") for line in lines]
            out[split] = _senteval_order([_tokens(r[0]) for r in rows], [int(r[1]) for r in rows],
                                         lambda s: (_ntok(s),))
        return out

    def sentences(self, data: dict[str, Any]) -> list[str]:
        return [s for split in SST2_SPLITS for s in data[split][0]]

    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        parts = {split: (encode(X), y) for split, (X, y) in data.items()}
        return self.classifier.split(parts["train"], parts["dev"], parts["test"], fast, seed)


TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


class TRECTask(TransferTask):
    """TREC coarse question type (6 classes): regularisation by k-fold CV on train, one test evaluation."""

    root = "transfer/TREC"

    def __init__(self, classifier: str = DEFAULT_CLASSIFIER) -> None:
        super().__init__("TREC", classifier, (f"{self.root}/train_5500.label", f"{self.root}/TREC_10.label"))

    def _read(self, relpath: str, data_dir: Path | None) -> tuple[list[str], np.ndarray]:
        samples, labels = [], []
        for line in resolve_data(relpath, data_dir).read_text(encoding="latin-1").splitlines():
            if not line.strip():
                continue
            line = line.replace("`", "").replace("'", "")  # SentEval's download script strips these
            target, rest = line.strip().split(":", 1)
            samples.append(_tokens(rest.split(" ", 1)[1]))
            labels.append(TREC_CLASSES.index(target))
        X, y = _senteval_order(samples, labels, lambda s: (_ntok(s),))
        return X, y

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        train, test = self.record.files
        return {"train": self._read(train, data_dir), "test": self._read(test, data_dir)}

    def sentences(self, data: dict[str, Any]) -> list[str]:
        return data["train"][0] + data["test"][0]

    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        (Xtr, ytr), (Xte, yte) = data["train"], data["test"]
        return self.classifier.kfold((encode(Xtr), ytr), (encode(Xte), yte), fast, seed)[0]


MRPC_SPLITS = ("train", "test")


class MRPCTask(TransferTask):
    """MRPC paraphrase detection on pair features (:func:`pair_features`), regularisation by CV on train."""

    root = "transfer/MRPC"

    def __init__(self, layout: str = "senteval", classifier: str = DEFAULT_CLASSIFIER) -> None:
        super().__init__("MRPC", classifier, tuple(f"{self.root}/msr_paraphrase_{split}.txt" for split in MRPC_SPLITS))
        self.layout = layout

    def _read(self, relpath: str, data_dir: Path | None) -> dict[str, Any]:
        lines = resolve_data(relpath, data_dir).read_text(encoding="utf-8").splitlines()[1:]  # header (with BOM)
        rows = [line.strip().split("\t") for line in lines if line.strip()]
        pairs = [(_tokens(r[3]), _tokens(r[4])) for r in rows]
        pairs, y = _senteval_order(pairs, [int(r[0]) for r in rows], lambda p: (_ntok(p[0]), _ntok(p[1])))
        return {"A": [p[0] for p in pairs], "B": [p[1] for p in pairs], "y": y}

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        return {split: self._read(file, data_dir) for split, file in zip(MRPC_SPLITS, self.record.files)}

    def sentences(self, data: dict[str, Any]) -> list[str]:
        return [s for split in MRPC_SPLITS for side in ("A", "B") for s in data[split][side]]

    def features(self, encode: Encoder, part: dict[str, Any]) -> np.ndarray:
        return pair_features(encode(part["A"]), encode(part["B"]), self.layout)

    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        train, test = data["train"], data["test"]
        scores, pred = self.classifier.kfold((self.features(encode, train), train["y"]),
                                             (self.features(encode, test), test["y"]), fast, seed)
        return {**scores, "f1": 100 * float(f1_score(test["y"], pred))}


for _classifier in CLASSIFIERS:
    for _task in (
        BinaryTask("MR", "transfer/MR/rt-polarity.pos", "transfer/MR/rt-polarity.neg", _classifier),
        BinaryTask("CR", "transfer/CR/custrev.pos", "transfer/CR/custrev.neg", _classifier),
        BinaryTask("SUBJ", "transfer/SUBJ/subj.objective", "transfer/SUBJ/subj.subjective", _classifier),  # objective = 1
        BinaryTask("MPQA", "transfer/MPQA/mpqa.pos", "transfer/MPQA/mpqa.neg", _classifier),
        SST2Task(_classifier),
        TRECTask(_classifier),
        MRPCTask(classifier=_classifier),
    ):
        register_task(_task)
