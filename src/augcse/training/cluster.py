"""``augcse cluster``'s training side: the starting clusters, the stopping rule checked at every checkpoint, and the
record of what ran.

The run is :func:`augcse.training.run.run` on the built-in recipe ``cluster`` (SCCL on the user's texts, which
are also the texts it clusters). Before it trains, :func:`prepare_start` embeds every text with the starting
model and writes the K-means centroids the loss starts from. While it trains, :class:`ClusterWatch` assigns a
seeded sample of the texts at every checkpoint (argmax of the loss's soft assignment q, with the centroids that
checkpoint holds, so each check is one a resume starts from) and asks :func:`stopping_rule` whether to stop.
The rule reads no labels: assignments, cluster sizes and the clustering loss only. When its collapse guard
trips, the command keeps the starting model. :func:`write_results` writes ``clusters.csv`` and ``cluster.json``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformers import TrainerCallback

from augcse.core.outputs import write_atomically, write_text_atomically

RECORD = "cluster.json"
TRACE = "cluster-trace.json"  # the checks so far, with the assignments a resumed run compares against
CENTROIDS = "cluster-centroids.npy"  # the centroids of the latest check
START = "start"  # beside the runs: <output_dir>/.cluster-texts/<digest>/start/{embeddings,centroids}.npy
MAX_CHECKED = 2000  # texts assigned at each check (a seeded sample when there are more)
CLUSTER_TERM = "cluster"  # the loss component the plateau test reads (the total loss when it is not logged)


@dataclass(frozen=True)
class RuleSettings:
    """The stopping rule's thresholds (every one is recorded in ``cluster.json``)."""

    min_change: float = 0.01  # stop when fewer than 1 % of the checked texts changed cluster (RSTC's tolerance)
    plateau: float = 0.01  # stop when the clustering loss moved by less than 1 % of itself since the last check
    max_share: float = 0.5  # collapse: the largest cluster holds more than half of the texts (and more than at start)
    max_empty: float = 0.5  # collapse: more than half of the K clusters are empty (and more than at start)


RULE = RuleSettings()  # the settings every run uses


@dataclass(frozen=True)
class Verdict:
    stop: bool
    keep_start: bool  # the collapse guard tripped: the starting model is kept
    reason: str  # why it stops ("" while it goes on)
    measures: dict[str, Any]


def _sizes(assignments: np.ndarray, clusters: int) -> np.ndarray:
    return np.bincount(np.asarray(assignments, dtype=np.int64), minlength=clusters)


def stopping_rule(start: Sequence[int], previous: Sequence[int], current: Sequence[int], clusters: int,
                  losses: tuple[float | None, float | None], settings: RuleSettings | None = None) -> Verdict:
    """Whether ``augcse cluster`` stops at a check, from assignments and losses only (it reads no labels).

    ``start``, ``previous`` and ``current`` are the cluster of each checked text under the starting model, at
    the last check and now; ``losses`` the mean clustering loss over the steps up to the last check and up to now
    (``None`` before one was logged). In this order:

    1. collapse guard: the largest cluster holds more than ``max_share`` of the texts, or more than ``max_empty``
       of the K clusters are empty, and that is worse than at the start (data whose largest topic already holds
       half of the texts does not trip it by itself): stop and keep the starting model;
    2. assignments settled: fewer than ``min_change`` of the texts changed cluster since the last check (DEC's
       and RSTC's tolerance test): stop;
    3. loss plateau: the clustering loss moved by less than ``plateau`` of its previous value: stop.

    Otherwise training goes on (to the recipe's step cap at most). ``settings``: :data:`RULE` unless given.
    """
    settings = settings or RULE
    start, previous, current = (np.asarray(a) for a in (start, previous, current))
    sizes, start_sizes = _sizes(current, clusters), _sizes(start, clusters)
    share, start_share = sizes.max() / len(current), start_sizes.max() / len(start)
    empty, start_empty = int((sizes == 0).sum()), int((start_sizes == 0).sum())
    changed = float((previous != current).mean())
    before, now = losses
    loss_change = abs(now - before) / max(abs(before), 1e-12) if before is not None and now is not None else None
    measures = {"changed": changed, "largest_share": float(share), "start_largest_share": float(start_share),
                "empty": empty, "start_empty": start_empty, "loss": now, "loss_change": loss_change,
                "sizes": sizes.tolist()}
    if share > settings.max_share and share > start_share:
        return Verdict(True, True, f"collapse: the largest cluster holds {share:.0%} of the texts (more than "
                                   f"{settings.max_share:.0%}, and {start_share:.0%} at the start)", measures)
    if empty > settings.max_empty * clusters and empty > start_empty:
        return Verdict(True, True, f"collapse: {empty} of the {clusters} clusters are empty (more than "
                                   f"{settings.max_empty:.0%}, and {start_empty} at the start)", measures)
    if changed < settings.min_change:
        return Verdict(True, False, f"settled: {changed:.2%} of the texts changed cluster since the last check "
                                    f"(below {settings.min_change:.0%})", measures)
    if loss_change is not None and loss_change < settings.plateau:
        return Verdict(True, False, f"plateau: the clustering loss moved by {loss_change:.2%} since the last check "
                                    f"(below {settings.plateau:.0%})", measures)
    return Verdict(False, False, "", measures)


# --------------------------------------------------------------------------- before training

def texts_digest(texts: Sequence[str], *parts: object) -> str:
    """A short digest of the texts and what else decides the starting clusters (model, K, seed)."""
    return hashlib.sha256("\n".join([*map(str, parts), *texts]).encode()).hexdigest()[:16]


def write_texts(texts: Sequence[str], folder: Path) -> Path:
    """Every text, one a line, in ``folder/texts.txt`` (the same texts, the same file: a resume finds it); its path."""
    path = folder / "texts.txt"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, "".join(t.replace("\n", " ").replace("\r", " ") + "\n" for t in texts))
    return path


def sample_indices(count: int, seed: int, limit: int = MAX_CHECKED) -> np.ndarray:
    """The texts assigned at each check: all of them, or a seeded sample of ``limit`` in input order."""
    if count <= limit:
        return np.arange(count)
    return np.array(sorted(random.Random(seed).sample(range(count), limit)))


def _save_npy(path: Path, array: np.ndarray) -> None:
    write_atomically(path, lambda handle: np.save(handle, array, allow_pickle=False))


def prepare_start(model, texts: Sequence[str], clusters: int, seed: int, folder: Path, batch_size: int) -> Path:
    """Embed every text with the starting ``model`` and write ``folder/embeddings.npy`` and the seeded K-means
    ``folder/centroids.npy`` (float32, (K, d)) the loss starts from; kept for a resume. The centroids' path."""
    from augcse.losses.sccl import kmeans_centroids

    centroids = folder / "centroids.npy"
    if centroids.is_file() and (folder / "embeddings.npy").is_file():
        return centroids
    folder.mkdir(parents=True, exist_ok=True)
    embeddings = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=True)
    _save_npy(folder / "embeddings.npy", embeddings.astype(np.float32))
    _save_npy(centroids, np.asarray(kmeans_centroids(embeddings, clusters, seed), dtype=np.float32))
    return centroids


def soft_assign(loss, embeddings: np.ndarray) -> np.ndarray:
    """The loss's soft assignment q (N, K) of ``embeddings``, as numpy."""
    import torch

    with torch.no_grad():
        device = next(loss.parameters()).device
        return loss.soft_assign(torch.as_tensor(embeddings, device=device)).float().cpu().numpy()


def build_sccl(model, params: dict[str, Any]):
    """The recipe's SCCL loss over ``model``, built without drawing from the training's random numbers."""
    import torch

    from augcse.losses import LOSSES

    with torch.random.fork_rng(devices=[]):
        return LOSSES["sccl"](model, **params)


# --------------------------------------------------------------------------- while training

def _mean_loss(history: Sequence[dict[str, Any]], after: int, upto: int) -> float | None:
    """The mean logged clustering loss of the steps in (after, upto] (the total loss when none is logged)."""
    rows = [r for r in history if after < r.get("step", -1) <= upto and ("loss" in r or CLUSTER_TERM in r)]
    values = [r[CLUSTER_TERM] if CLUSTER_TERM in r else r["loss"] for r in rows]
    return float(np.mean(values)) if values else None


class ClusterWatch(TrainerCallback):
    """At every checkpoint: the checked texts assigned with the centroids the checkpoint holds, the check added to
    ``run_dir/cluster-trace.json``, the centroids kept in ``cluster-centroids.npy``, and training stopped when
    :func:`stopping_rule` says so. A resumed run drops the checks after its checkpoint and goes on from there."""

    def __init__(self, texts: Sequence[str], start_embeddings: np.ndarray, loss_params: dict[str, Any], run_dir: Path,
                 seed: int, batch_size: int, settings: RuleSettings | None = None) -> None:
        self.indices = sample_indices(len(texts), seed)
        self.texts = [texts[i] for i in self.indices]
        self.start_embeddings = start_embeddings[self.indices]
        self.params, self.run_dir, self.batch_size = loss_params, Path(run_dir), batch_size
        self.settings = settings or RULE
        self.loss = None
        self.checks: list[dict[str, Any]] = []
        self.start: list[int] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs: Any):
        self.loss = build_sccl(model, self.params)
        self.start = soft_assign(self.loss, self.start_embeddings).argmax(1).tolist()
        trace = self.run_dir / TRACE
        earlier = json.loads(trace.read_text())["checks"] if trace.is_file() and state.global_step > 0 else []
        self.checks = [c for c in earlier if c["step"] <= state.global_step]

    def on_save(self, args, state, control, model=None, **kwargs: Any):
        from augcse.training.callbacks import restore_loss_state

        if not state.is_world_process_zero:
            return control
        restore_loss_state(self.loss, Path(args.output_dir) / f"checkpoint-{state.global_step}")
        embeddings = model.encode(self.texts, batch_size=self.batch_size, convert_to_numpy=True,
                                  show_progress_bar=False)
        current = soft_assign(self.loss, embeddings).argmax(1).tolist()
        last = self.checks[-1] if self.checks else {"step": 0, "assignments": self.start, "measures": {"loss": None}}
        losses = (last["measures"]["loss"], _mean_loss(state.log_history, last["step"], state.global_step))
        verdict = stopping_rule(self.start, last["assignments"], current, self.params["clusters"], losses,
                                self.settings)
        self.checks.append({"step": state.global_step, "stop": verdict.stop, "keep_start": verdict.keep_start,
                            "reason": verdict.reason, "measures": verdict.measures, "assignments": current})
        _save_npy(self.run_dir / CENTROIDS, centroids_of(self.loss))
        write_text_atomically(self.run_dir / TRACE, json.dumps({"start": self.start, "checks": self.checks}))
        if verdict.stop:
            control.should_training_stop = True
        return control


def centroids_of(loss) -> np.ndarray:
    """The loss's current centroids (K, d)."""
    return next(v for k, v in loss.state_dict().items() if k.endswith("centroids")).detach().float().cpu().numpy()


def load_centroids(loss, centroids: np.ndarray) -> None:
    """Put ``centroids`` (K, d) into the loss in place of its own."""
    import torch

    name = next(k for k in loss.state_dict() if k.endswith("centroids"))
    loss.load_state_dict({name: torch.from_numpy(centroids)}, strict=False)


def read_trace(run_dir: Path) -> dict[str, Any]:
    """The checks of a run (``{"start": [...], "checks": []}`` when none was made)."""
    trace = Path(run_dir) / TRACE
    return json.loads(trace.read_text()) if trace.is_file() else {"start": [], "checks": []}


# --------------------------------------------------------------------------- after training

def keep_start(run_dir: Path, recipe) -> None:
    """Write the starting model (the recipe's backbone as it loads before training) into ``final/``, replacing
    the trained weights."""
    from augcse.training.build import build_model

    final, start = Path(run_dir) / "final", Path(run_dir) / "final.start"
    shutil.rmtree(start, ignore_errors=True)
    build_model(recipe).save(str(start))
    shutil.rmtree(final)
    start.rename(final)


def clusters_csv(texts: Sequence[str], q: np.ndarray) -> str:
    """One row per text, in input order: text, cluster, confidence (max q)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["text", "cluster", "confidence"])
    for text, row in zip(texts, q):
        writer.writerow([text, int(row.argmax()), f"{float(row.max()):.4f}"])
    return out.getvalue()


@dataclass(frozen=True)
class Inputs:
    """What the user gave and how it was read (for ``cluster.json``)."""

    texts_file: str
    sha256: str
    column: str
    texts: int
    skipped_empty: int
    clusters: int


def outcome(trace: dict[str, Any], max_steps: int, final_step: int) -> tuple[str, bool]:
    """Why training ended and whether the starting model is kept, from the last check."""
    last = trace["checks"][-1] if trace["checks"] else None
    if last is not None and last["stop"]:
        return last["reason"], last["keep_start"]
    return f"step cap: {final_step} of at most {max_steps} steps, the rule did not stop earlier", False


def compare_peers(before: np.ndarray, after: np.ndarray, ours: np.ndarray, clusters: int) -> list[dict[str, Any]]:
    """Each peer pipeline (:mod:`augcse.evaluation.topic_pipelines`) on the starting and the kept embeddings: the
    clusters it finds, its largest cluster's share, and its agreement (NMI, mean over seeds) with the command's
    clusters. Descriptive only: without labels none of these says which clustering is right."""
    from sklearn.metrics import normalized_mutual_info_score

    from augcse.evaluation.topic_pipelines import run_pipelines

    rows = []
    for model, embeddings in (("starting", before), ("kept", after)):
        for name, runs in run_pipelines(embeddings, clusters).items():
            rows.append({"model": model, "pipeline": name,
                         "clusters": float(np.mean([len(np.unique(r)) for r in runs])),
                         "largest_share": float(np.mean([np.bincount(r).max() / len(r) for r in runs])),
                         "nmi_with_ours": float(np.mean([normalized_mutual_info_score(ours, r) for r in runs]))})
    return rows


def write_results(run_dir: Path, texts: Sequence[str], inputs: Inputs, recipe, start_folder: Path,
                  peers: bool = False) -> dict[str, Any]:
    """Assign every text with the kept model, write ``clusters.csv`` and ``cluster.json`` (with ``peers``, the
    peer pipelines' clusterings described too); the record, with the embeddings before and after for the report."""
    from sentence_transformers import SentenceTransformer

    run_dir = Path(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    trace = read_trace(run_dir)
    reason, kept_start = outcome(trace, int(recipe.training.get("max_steps", -1)), summary["global_step"])
    if kept_start:
        keep_start(run_dir, recipe)
    loss = build_sccl(SentenceTransformer(str(run_dir / "final"), device="cpu"), recipe.loss.params)
    before = np.load(start_folder / "embeddings.npy", allow_pickle=False)
    q_before = soft_assign(loss, before)  # the recipe's centroids: K-means on the starting embeddings
    after, q_after = before, q_before
    if not kept_start:
        after = loss.model.encode(list(texts), batch_size=recipe.eval.batch_size, convert_to_numpy=True,
                                  show_progress_bar=True)
        load_centroids(loss, np.load(run_dir / CENTROIDS, allow_pickle=False))
        q_after = soft_assign(loss, after)
    write_text_atomically(run_dir / "clusters.csv", clusters_csv(texts, q_after))
    record = {
        **asdict(inputs), "method": "sccl", "recipe": "cluster", "run": recipe.name, "model": recipe.model.backbone,
        "steps": summary["global_step"], "max_steps": recipe.training.get("max_steps"),
        "stopping_reason": reason, "kept": "the starting model" if kept_start else "the trained model",
        "rule": {"function": "augcse.training.cluster.stopping_rule", **asdict(RULE),
                 "checked_texts": len(sample_indices(len(texts), recipe.seed)), "check_every": "each checkpoint",
                 "save_steps": recipe.training.get("save_steps")},
        "start": {"centroids": "scikit-learn KMeans of the starting embeddings, 10 restarts", "seed": recipe.seed,
                  "folder": str(Path(start_folder).resolve())},
        "sizes_before": _sizes(q_before.argmax(1), inputs.clusters).tolist(),
        "sizes_after": _sizes(q_after.argmax(1), inputs.clusters).tolist(),
        "trace": [{k: c[k] for k in ("step", "stop", "keep_start", "reason", "measures")} for c in trace["checks"]],
    }
    if peers:
        record["peers"] = compare_peers(before, after, q_after.argmax(1), inputs.clusters)
    record["verdict"] = verdict_line(record)
    write_text_atomically(run_dir / RECORD, json.dumps(record, indent=2))
    return {**record, "embeddings_before": before, "embeddings_after": after, "q_before": q_before,
            "q_after": q_after}


def verdict_line(record: dict[str, Any]) -> str:
    """The one line a user reads first."""
    largest = max(record["sizes_after"]) / max(1, record["texts"])
    if record["kept"] == "the starting model":
        return (f"kept the starting model ({record['stopping_reason']}); {record['texts']} texts in "
                f"{record['clusters']} K-means clusters of its embeddings")
    return (f"{record['texts']} texts in {record['clusters']} clusters after {record['steps']} steps of SCCL "
            f"(stopped: {record['stopping_reason'].split(':')[0]}); largest cluster {largest:.0%}")
