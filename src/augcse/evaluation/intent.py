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
seed, so every model sees the same ones). Train a multinomial logistic regression (scikit-learn, L2)
on the K-shot training set, choose C on the K-shot validation set, report test accuracy ×100.
VaSCL trains a softmax layer with Adam for 1000 steps with validation every 100 steps; an L2-tuned
logistic regression is the same linear model with a convex, deterministic fit.

The published 5-/10-shot training subsets (DNNC / jianguoz Few-Shot-Intent-Detection) are evaluated
as one extra split each, ``5shot_published`` / ``10shot_published``: training rows = the file's rows
(found in the pool case-insensitively; the pool's cased text is encoded),
validation = K per class sampled (seeded) from the rest of the pool.

Metrics: ``5shot``, ``5shot_std``, ``10shot``, ``10shot_std``, ``20shot``, ``20shot_std`` (mean and
sample standard deviation over the 5 splits) and, where shipped, ``<K>shot_published``. The main metric is
``10shot``: the middle setting, with less split-to-split variance than 5-shot. Fast mode: 2 splits
and a 2-value grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from augcse.evaluation.clustering import read_labelled_csv
from augcse.evaluation.tasks import Encoder, Task, register_task
from augcse.evaluation.transfer import single_threaded, split_accuracy

SHOTS = (5, 10, 20)
SPLITS, SPLITS_FAST = 5, 2
GRID = tuple(2.0**t for t in range(-2, 8, 2))  # 0.25 .. 64
GRID_FAST = (1.0, 16.0)
PUBLISHED_SPLIT = 99  # rng stream for the validation half of a published subset


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


class IntentTask(Task):
    """One intent set: fixed K-shot splits built at load time, evaluated with a linear classifier."""

    suites = ("intent",)
    main_metric = "10shot"

    def __init__(self, name: str, root: str, pool: tuple[str, ...], test: str, published: tuple[int, ...] = ()) -> None:
        self.name, self.root, self.pool, self.test, self.published = name, root, pool, test, published

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
        grid = GRID_FAST if fast else GRID
        texts, labels = data["texts"], data["labels"]
        test = (encode(data["test_texts"]), data["test_labels"])
        out: dict[str, float] = {}
        for key, runs in data["splits"].items():
            accs = []
            for train_idx, val_idx in runs[: SPLITS_FAST if fast else None]:
                train = (encode([texts[i] for i in train_idx]), labels[train_idx])
                val = (encode([texts[i] for i in val_idx]), labels[val_idx])
                accs.append(split_accuracy(train, val, test, grid, seed)["acc"])
            out[key] = float(np.mean(accs))
            if not key.endswith("published"):
                out[f"{key}_std"] = float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0
        return out


for _task in (
    IntentTask("SNIPS", "intent/snips", ("train.csv", "valid.csv"), "test.csv"),
    IntentTask("BANKING77", "intent/banking77", ("train.csv",), "test.csv", published=(5, 10)),
    IntentTask("CLINC150", "intent/clinc150", ("train.csv", "val.csv"), "test.csv", published=(5, 10)),
    IntentTask("HWU64", "intent/hwu64", ("train.csv", "valid.csv"), "test.csv", published=(5, 10)),
):
    register_task(_task)
