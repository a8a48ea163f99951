"""Few-shot intent classification (VaSCL Table 3): a linear classifier on the frozen encoder.

Tasks (suite ``"intent"``; CSVs ``text,label`` under ``intent/<set>/``):

==========  ============================  ==========  ===========================
task        pool sampled from             test        published few-shot subsets
==========  ============================  ==========  ===========================
SNIPS       train.csv + valid.csv         test.csv    —
BANKING77   train.csv                     test.csv    fewshot_train_{5,10}.csv
CLINC150    train.csv + val.csv           test.csv    fewshot_train_{5,10}.csv
HWU64       train.csv + valid.csv         test.csv    fewshot_train_{5,10}.csv
==========  ============================  ==========  ===========================

CLINC150 is evaluated in scope only (150 intents; the ``oos_*`` files are not used), as in VaSCL.

Protocol (VaSCL §4.2): merge the training and validation sets into a pool; for each K in 5/10/20 and
each of 5 fixed splits, sample per class K training and K validation utterances (disjoint) from the
pool with a fixed seed (``numpy.random.default_rng((K, split))``; the splits never depend on the run
seed, so every model sees the same ones). Classifiers (:data:`CLASSIFIERS`):

- ``"vascl"`` (default, the paper's): a linear softmax layer on the frozen embeddings trained with
  Adam (lr 1e-4, batch 32, shuffled epochs) for 1000 iterations, validated on the K-shot validation
  set every 100 iterations; the best validation checkpoint is scored on the test set.
- ``"sklearn"`` (tasks ``SNIPS-sklearn``…, suite ``intent-sklearn``): multinomial L2 logistic
  regression (scikit-learn), C chosen on the K-shot validation set. Not VaSCL's classifier.

The published 5-/10-shot training subsets (DNNC / jianguoz Few-Shot-Intent-Detection) are evaluated
as one extra split each, ``5shot_published`` / ``10shot_published``: training rows = the file's rows
(found in the pool case-insensitively; the pool's cased text is encoded),
validation = K per class sampled (seeded) from the rest of the pool.

Metrics: ``5shot``, ``5shot_std``, ``10shot``, ``10shot_std``, ``20shot``, ``20shot_std`` (mean and
sample standard deviation over the 5 splits) and, where shipped, ``<K>shot_published``; ``<K>shot_devacc``
is the mean K-shot validation accuracy, the selection metric (``10shot_devacc``). The main metric is
``10shot``: the middle setting, with less split-to-split variance than 5-shot. Fast mode: 2 splits
(and a 2-value grid for ``sklearn``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from augcse.evaluation.clustering import read_labelled_csv
from augcse.evaluation.senteval import default_device, full_precision, initial_linear, torch_threads
from augcse.evaluation.tasks import Encoder, Task, TaskRecord, register_task
from augcse.evaluation.transfer import single_threaded, split_accuracy

SHOTS = (5, 10, 20)
SPLITS, SPLITS_FAST = 5, 2
GRID = tuple(2.0**t for t in range(-2, 8, 2))  # 0.25 .. 64
GRID_FAST = (1.0, 16.0)
PUBLISHED_SPLIT = 99  # rng stream for the validation half of a published subset
VASCL_STEPS, VASCL_EVERY, VASCL_LR, VASCL_BATCH = 1000, 100, 1e-4, 32

Split = tuple[np.ndarray, np.ndarray]


@full_precision
def linear_softmax_accuracy(
    train: Split, val: Split, test: Split, nclasses: int, seed: int = 0, device: torch.device | None = None
) -> dict[str, float]:
    """VaSCL's classifier: ``nn.Linear`` + cross-entropy, Adam lr 1e-4, batch 32, 1000 iterations,
    validation every 100; returns ×100 test ``acc`` of the best-validation checkpoint and its ``devacc``."""
    device = device or default_device()
    with torch_threads(1 if device.type == "cpu" else None):
        return _train_linear_softmax(train, val, test, nclasses, seed, device)


def _train_linear_softmax(train: Split, val: Split, test: Split, nclasses: int, seed: int,
                          device: torch.device) -> dict[str, float]:
    Xtr, ytr, Xva, yva, Xte, yte = (torch.as_tensor(np.asarray(a), device=device) for a in (*train, *val, *test))
    Xtr, Xva, Xte = Xtr.float(), Xva.float(), Xte.float()
    layer = initial_linear(Xtr.shape[1], nclasses, seed).to(device)
    optimizer = torch.optim.Adam(layer.parameters(), lr=VASCL_LR)
    rng = np.random.RandomState(seed)
    order: list[int] = []
    best, best_state = -1.0, None
    for step in range(1, VASCL_STEPS + 1):
        if not order:  # a new shuffled epoch
            order = rng.permutation(len(ytr)).tolist()
        idx, order = order[:VASCL_BATCH], order[VASCL_BATCH:]
        loss = torch.nn.functional.cross_entropy(layer(Xtr[idx]), ytr[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % VASCL_EVERY == 0:
            with torch.no_grad():
                acc = float((layer(Xva).argmax(1) == yva).float().mean())
            if acc > best:
                best, best_state = acc, {k: v.clone() for k, v in layer.state_dict().items()}
    layer.load_state_dict(best_state)
    with torch.no_grad():
        test_acc = float((layer(Xte).argmax(1) == yte).float().mean())
    return {"acc": 100 * test_acc, "devacc": 100 * best}


def _sklearn_accuracy(train: Split, val: Split, test: Split, nclasses: int, fast: bool, seed: int) -> dict[str, float]:
    return split_accuracy(train, val, test, GRID_FAST if fast else GRID, seed)


CLASSIFIERS: dict[str, Callable[..., dict[str, float]]] = {
    "vascl": lambda train, val, test, nclasses, fast, seed: linear_softmax_accuracy(train, val, test, nclasses, seed),
    "sklearn": _sklearn_accuracy,
}
DEFAULT_CLASSIFIER = "vascl"


def sample_per_class(
    labels: np.ndarray, shots: int, rng: np.random.Generator, exclude: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per class, ``shots`` training and ``shots`` validation indices (disjoint) drawn without replacement.

    ``exclude``: indices that may not be drawn. With fewer than 2·shots items a class keeps at least
    one validation item when it can.
    """
    allowed = np.ones(len(labels), dtype=bool)
    if exclude is not None:
        allowed[exclude] = False
    train, val = [], []
    for klass in np.unique(labels):
        idx = rng.permutation(np.flatnonzero((labels == klass) & allowed))
        n_train = min(shots, max(len(idx) - 1, 1))
        train.append(idx[:n_train])
        val.append(idx[n_train : n_train + shots])
    return np.concatenate(train), np.concatenate(val)


def _key(text: str) -> str:
    return " ".join(text.lower().split())


CITATIONS = {
    "SNIPS": "Coucke et al. 2018, Snips Voice Platform: an embedded Spoken Language Understanding system for "
             "private-by-design voice interfaces",
    "BANKING77": "Casanueva et al. 2020, Efficient Intent Detection with Dual Sentence Encoders",
    "CLINC150": "Larson et al. 2019, An Evaluation Dataset for Intent Classification and Out-of-Scope Prediction",
    "HWU64": "Liu et al. 2019, Benchmarking Natural Language Understanding Services for building Conversational "
             "Agents",
}


class IntentTask(Task):
    """One intent set: fixed K-shot splits built at load time, evaluated with a linear classifier."""

    def __init__(
        self, name: str, root: str, pool: tuple[str, ...], test: str, published: tuple[int, ...] = (),
        classifier: str = DEFAULT_CLASSIFIER,
    ) -> None:
        if classifier not in CLASSIFIERS:
            raise ValueError(f"unknown intent classifier {classifier!r}; known: {', '.join(CLASSIFIERS)}")
        default = classifier == DEFAULT_CLASSIFIER
        files = tuple(f"{root}/{file}" for file in (*pool, test, *(f"fewshot_train_{k}.csv" for k in published)))
        self.record = TaskRecord(
            name if default else f"{name}-{classifier}", "intent", "test", "10shot", "10shot_devacc", files,
            CITATIONS[name], ("intent",) if default else (f"intent-{classifier}",), in_all=default, family=name,
            variant="" if default else classifier)
        self.classifier = classifier
        self.root, self.pool, self.test, self.published = root, pool, test, published

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        texts: list[str] = []
        raw_labels: list[str] = []
        for file in self.pool:
            t, y, names = read_labelled_csv(f"{self.root}/{file}", data_dir)
            texts += t
            raw_labels += [names[i] for i in y]
        test_texts, ty, tnames = read_labelled_csv(f"{self.root}/{self.test}", data_dir)
        classes = sorted(set(raw_labels))
        index = {c: i for i, c in enumerate(classes)}
        labels = np.array([index[c] for c in raw_labels])
        test_labels = np.array([index[tnames[i]] for i in ty])
        splits: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for shots in SHOTS:
            splits[f"{shots}shot"] = [
                sample_per_class(labels, shots, np.random.default_rng((shots, split))) for split in range(SPLITS)
            ]
        for shots in self.published:
            splits[f"{shots}shot_published"] = [self._published(data_dir, shots, texts, labels, index)]
        return {"texts": texts, "labels": labels, "test_texts": test_texts, "test_labels": test_labels,
                "splits": splits}

    def _published(
        self, data_dir: Path | None, shots: int, texts: list[str], labels: np.ndarray, index: dict[str, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the shipped K-shot rows in the pool, plus a seeded validation draw from the rest.

        The shipped files are lower-cased; rows are matched to the pool case- and space-insensitively
        and the pool's original text is used, so training and test texts are cased alike.
        """
        rows, y, names = read_labelled_csv(f"{self.root}/fewshot_train_{shots}.csv", data_dir)
        position: dict[tuple[str, int], list[int]] = {}
        for i, (t, lab) in enumerate(zip(texts, labels)):
            position.setdefault((_key(t), int(lab)), []).append(i)
        train = []
        for t, lab in zip(rows, y):
            candidates = position.get((_key(t), index[names[lab]]))
            if not candidates:
                raise ValueError(f"{self.name}: published {shots}-shot row {t!r} is not in the pool")
            train.append(candidates.pop(0))
        train_idx = np.array(train)
        _, val = sample_per_class(labels, shots, np.random.default_rng((shots, PUBLISHED_SPLIT)), exclude=train_idx)
        return train_idx, val

    def sentences(self, data: dict[str, Any]) -> list[str]:
        used = np.unique(np.concatenate([np.concatenate(s) for runs in data["splits"].values() for s in runs]))
        return [data["texts"][i] for i in used] + data["test_texts"]

    @single_threaded
    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        fit = CLASSIFIERS[self.classifier]
        texts, labels = data["texts"], data["labels"]
        nclasses = int(max(labels.max(), data["test_labels"].max())) + 1
        test = (encode(data["test_texts"]), data["test_labels"])
        out: dict[str, float] = {}
        for key, runs in data["splits"].items():
            accs, devs = [], []
            for train_idx, val_idx in runs[: SPLITS_FAST if fast else None]:
                train = (encode([texts[i] for i in train_idx]), labels[train_idx])
                val = (encode([texts[i] for i in val_idx]), labels[val_idx])
                scores = fit(train, val, test, nclasses, fast, seed)
                accs.append(scores["acc"])
                devs.append(scores["devacc"])
            out[key] = float(np.mean(accs))
            out[f"{key}_devacc"] = float(np.mean(devs))
            if not key.endswith("published"):
                out[f"{key}_std"] = float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0
        return out


for _classifier in CLASSIFIERS:
    for _task in (
        IntentTask("SNIPS", "intent/snips", ("train.csv", "valid.csv"), "test.csv", classifier=_classifier),
        IntentTask("BANKING77", "intent/banking77", ("train.csv",), "test.csv", (5, 10), _classifier),
        IntentTask("CLINC150", "intent/clinc150", ("train.csv", "val.csv"), "test.csv", (5, 10), _classifier),
        IntentTask("HWU64", "intent/hwu64", ("train.csv", "valid.csv"), "test.csv", (5, 10), _classifier),
    ):
        register_task(_task)
