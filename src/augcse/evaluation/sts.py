"""Semantic textual similarity the SentEval way (as SimCSE evaluates it).

Cosine similarity of frozen embeddings against gold scores, Spearman ×100. STS12–16 concatenate
their subsets and compute one Spearman over all pairs (``all``, SimCSE's number) and also report the
mean and the size-weighted mean of per-subset values; STS-B and SICK-R use their test split (their
dev splits serve model selection). Pairs without a gold score are dropped. Sentences are
whitespace-split and re-joined with single spaces, as SentEval's batcher does.

Two file sets: SentEval's processed files (tokenised, lower-cased; the default, registered as
``STS12`` … ``SICKRelatedness``) and the untokenised official releases (``STS12-original`` …).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import pearsonr, spearmanr

from augcse.assets.resolve import resolve_data
from augcse.evaluation.tasks import Encoder, Task, TaskRecord, register_task

SENTEVAL = "sts/senteval/downstream"
ORIGINAL = "sts/original"


@dataclass(frozen=True)
class Subset:
    """One file pair: ``input`` (tab-separated sentence pairs) and ``gold`` (one score a line)."""

    name: str
    input: str
    gold: str
    columns: tuple[int, int, int | None] = (0, 1, None)  # sentence 1, sentence 2, score column in input
    skip_header: bool = False


def _year_subsets(folder: str, names: list[str], prefix: str = "STS") -> list[Subset]:
    return [Subset(n, f"{folder}/{prefix}.input.{n}.txt", f"{folder}/{prefix}.gs.{n}.txt") for n in names]


STS_SUBSETS = {
    "STS12": ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    "STS13": ["FNWN", "headlines", "OnWN"],
    "STS14": ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"],
    "STS15": ["answers-forums", "answers-students", "belief", "headlines", "images"],
    "STS16": ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}
ORIGINAL_FOLDERS = {
    "STS12": ("STS12-en-test/test-gold", "STS"),
    "STS13": ("STS13-en-test/test-gs", "STS"),
    "STS14": ("STS14-en-test/sts-en-test-gs-2014", "STS"),
    "STS15": ("STS15-en-test/test_evaluation_task2a", "STS"),
    "STS16": ("STS16-en-test/sts2016-english-with-gs-v1.0", "STS2016"),
}


def _stsb(folder: str, split: str) -> list[Subset]:
    return [Subset(split, f"{folder}/sts-{split}.csv", "", (5, 6, 4))]


def _sick(folder: str, split: str) -> list[Subset]:
    name = {"test": "SICK_test_annotated", "dev": "SICK_trial", "train": "SICK_train"}[split]
    return [Subset(split, f"{folder}/{name}.txt", "", (1, 2, 3), skip_header=True)]


@dataclass
class Pairs:
    """Sentence pairs with gold scores, per subset."""

    subsets: dict[str, tuple[list[str], list[str], np.ndarray]]

    def all_sentences(self) -> list[str]:
        return [s for a, b, _ in self.subsets.values() for s in (*a, *b)]


def _read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def read_subset(subset: Subset, data_dir: Path | None) -> tuple[list[str], list[str], np.ndarray]:
    """Read one subset; pairs with an empty gold score are dropped, as SentEval does."""
    rows = [line.split("\t") for line in _read_lines(resolve_data(subset.input, data_dir))]
    if subset.skip_header:
        rows = rows[1:]
    i1, i2, iscore = subset.columns
    if iscore is None:
        gold = _read_lines(resolve_data(subset.gold, data_dir))
        if len(gold) != len(rows):
            raise ValueError(f"{subset.input}: {len(rows)} pairs but {len(gold)} gold scores")
        scores = [g.strip() for g in gold]
    else:
        scores = [row[iscore].strip() if len(row) > iscore else "" for row in rows]
    first, second, values = [], [], []
    for row, score in zip(rows, scores):
        if not score or len(row) <= max(i1, i2):
            continue
        first.append(" ".join(row[i1].split()))
        second.append(" ".join(row[i2].split()))
        values.append(float(score))
    return first, second, np.asarray(values, dtype=np.float64)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
    b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
    return (a * b).sum(axis=1)


def score_pairs(encode: Encoder, pairs: Pairs) -> dict[str, float]:
    """Spearman/Pearson ×100 per subset, and the ``all`` / ``mean`` / ``wmean`` aggregations."""
    system, gold, per_subset, sizes = [], [], {}, {}
    for name, (first, second, scores) in pairs.subsets.items():
        sims = cosine(encode(first), encode(second))
        per_subset[name] = 100 * spearmanr(sims, scores).statistic
        sizes[name] = len(scores)
        system.append(sims)
        gold.append(scores)
    all_sys, all_gold = np.concatenate(system), np.concatenate(gold)
    weights = np.array([sizes[n] for n in per_subset], dtype=np.float64)
    values = np.array(list(per_subset.values()))
    out = {f"spearman_{name}": value for name, value in per_subset.items()}
    out.update(
        all=100 * spearmanr(all_sys, all_gold).statistic,
        pearson_all=100 * pearsonr(all_sys, all_gold).statistic,
        mean=float(values.mean()),
        wmean=float((values * weights).sum() / weights.sum()),
        pairs=float(len(all_gold)),
    )
    return out


class STSTask(Task):
    """An STS task: a list of subsets scored together (main metric: ``all``).

    Only a dev split may select models: its ``selection_metric`` is ``all``.
    """

    def __init__(self, name: str, subsets: list[Subset], suites: tuple[str, ...], in_all: bool = True, *,
                 family: str, split: str = "test", variant: str = "") -> None:
        self.subset_files = subsets
        files = tuple(f for s in subsets for f in (s.input, s.gold) if f)
        self.record = TaskRecord(name, "sts", split, "all", "all" if split == "dev" else None, files,
                                 CITATIONS[family], suites, in_all, family=family, variant=variant)

    def load(self, data_dir: Path | None) -> Pairs:
        return Pairs({s.name: read_subset(s, data_dir) for s in self.subset_files})

    def sentences(self, data: Pairs) -> list[str]:
        return data.all_sentences()

    def evaluate(self, encode: Encoder, data: Pairs, fast: bool = False, seed: int = 0) -> dict[str, float]:
        return score_pairs(encode, data)


CITATIONS = {
    "STS12": "Agirre et al. 2012, SemEval-2012 Task 6: A Pilot on Semantic Textual Similarity",
    "STS13": "Agirre et al. 2013, *SEM 2013 shared task: Semantic Textual Similarity",
    "STS14": "Agirre et al. 2014, SemEval-2014 Task 10: Multilingual Semantic Textual Similarity",
    "STS15": "Agirre et al. 2015, SemEval-2015 Task 2: Semantic Textual Similarity, English, Spanish and Pilot on "
             "Interpretability",
    "STS16": "Agirre et al. 2016, SemEval-2016 Task 1: Semantic Textual Similarity, Monolingual and Cross-Lingual "
             "Evaluation",
    "STSBenchmark": "Cer et al. 2017, SemEval-2017 Task 1: Semantic Textual Similarity Multilingual and "
                    "Crosslingual Focused Evaluation",
    "SICKRelatedness": "Marelli et al. 2014, SemEval-2014 Task 1: Evaluation of Compositional Distributional "
                       "Semantic Models on Full Sentences through Semantic Relatedness and Textual Entailment",
}


def _register_all() -> None:
    for task, names in STS_SUBSETS.items():
        register_task(STSTask(task, _year_subsets(f"{SENTEVAL}/STS/{task}-en-test", names), ("sts",), family=task))
        folder, prefix = ORIGINAL_FOLDERS[task]
        register_task(STSTask(f"{task}-original", _year_subsets(f"{ORIGINAL}/{folder}", names, prefix),
                              ("sts-original",), in_all=False, family=task, variant="original"))
    for variant, stsb, sick, suffix in (
        ("", f"{SENTEVAL}/STS/STSBenchmark", f"{SENTEVAL}/SICK", ""),
        ("original", f"{ORIGINAL}/STSBenchmark/stsbenchmark", f"{ORIGINAL}/SICK", "-original"),
    ):
        folders = {"STSBenchmark": (stsb, _stsb), "SICKRelatedness": (sick, _sick)}
        for family, (folder, files) in folders.items():
            register_task(STSTask(f"{family}{suffix}", files(folder, "test"), (f"sts-{variant}" if variant else "sts",),
                                  not variant, family=family, variant=variant))
        for family, (folder, files) in folders.items():
            register_task(STSTask(f"{family}-dev{suffix}", files(folder, "dev"), ("dev",), in_all=False,
                                  family=family, split="dev", variant=variant))


_register_all()
