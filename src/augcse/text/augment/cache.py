"""Content-keyed, resumable, sharded Arrow cache of augmented corpora, with statistics.

Layout of ``out_dir``::

    manifest.json      key, names, params, seed, shard size, shard count, the resources found (WordNet…);
                       "complete" once all shards exist
    shards/00000/      one ``datasets`` folder per shard, renamed into place only when fully written
    shards/00000.json  per-shard counts: changed, edit sizes, examples, errors
    stats.json         per-augmentation statistics, written when the cache is complete

A shard is written to a temporary folder and renamed, so a killed build leaves either a whole shard or
none; rerunning the same build skips finished shards. :func:`load_cache` refuses a cache whose
manifest is not marked complete.

A failed augmentation is not a result: a resource an augmentation needs (WordNet) that is missing stops the
build before it starts, and more than :data:`MAX_ERROR_RATE` of sentences on which an augmentation raised
stops it before the cache is marked complete, unless ``allow_errors`` (those sentences are then kept
unchanged and counted in the statistics). A cache built while a resource was missing is rebuilt once it is
there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, Union

if TYPE_CHECKING:  # annotations only: importing the cache module loads no datasets
    from datasets import Dataset

from augcse.assets.resolve import AssetError, wordnet
from augcse.core.interrupts import InterruptLatch
from augcse.core.outputs import write_text_atomically
from augcse.core.sole_builder import sole_builder
from augcse.text.augment.base import AugmentationError, get, resolve_names
from augcse.text.augment.parse import parse

FORMAT_VERSION = 1
# what a cache folder holds: its manifest, its shards, and the lock of the command building it
WRITTEN = ("manifest.json", "shards", ".lock")
logger = logging.getLogger(__name__)

N_EXAMPLES = 3
N_ERROR_EXAMPLES = 3
MAX_ERROR_RATE = 0.01  # sentences on which an augmentation may raise before the build stops (without allow_errors)
# a need named in an augmentation's ``needs`` -> a loader that raises AssetError (one line) when it is missing
RESOURCES = {"wordnet": wordnet}
ALLOW = "pass --allow-errors (allow_errors=True) to keep those sentences unchanged instead"


class AugmentationFailed(ValueError):
    """An augmentation raised on too many sentences: its output would be the input, counted as a result."""


class CacheConflict(ValueError):
    """The output folder holds a cache built from other inputs (corpus, names, parameters or seed)."""

    def __init__(self, out: Path, key: str) -> None:
        super().__init__(f"{out} holds a cache for other inputs (key {key[:12]}); "
                         "choose another output folder or pass overwrite=True")
        self.out, self.key = out, key


HASH_BATCH = 1000  # sentences read and hashed at a time: a corpus is never held whole in memory
Texts = Union[Sequence[str], "Dataset", Iterable[str]]  # a list, a Dataset (its text/anchor column), a stream


def text_column(dataset: "Dataset") -> str:
    """The column of a view's dataset (``anchor``) or of a corpus (``text``) that holds the sentences."""
    names = dataset.column_names
    for name in ("anchor", "text"):  # the order of views.base.texts_of
        if name in names:
            return name
    if len(names) == 1:
        return names[0]
    raise ValueError(f"no text column among {names}: name it 'text' or 'anchor'")


def text_batches(sentences: Texts, size: int = HASH_BATCH, start: int = 0, stop: int | None = None) -> Iterator[list[str]]:
    """The sentences ``[start:stop]`` as lists of at most ``size``; a Dataset is read a slice at a time (Arrow)."""
    from datasets import Dataset

    if isinstance(sentences, Dataset):
        column = text_column(sentences)
        stop = len(sentences) if stop is None else min(stop, len(sentences))
        for i in range(start, stop, size):
            yield sentences[i:min(i + size, stop)][column]
    elif isinstance(sentences, Sequence):
        stop = len(sentences) if stop is None else min(stop, len(sentences))
        for i in range(start, stop, size):
            yield list(sentences[i:min(i + size, stop)])
    else:
        stream = islice(iter(sentences), start, stop)
        while batch := list(islice(stream, size)):
            yield batch


def cache_key(sentences: Texts, names: Sequence[str], params: dict[str, dict[str, Any]], seed: int) -> str:
    """SHA-256 over the corpus content, the augmentation names and parameters, the seed and the format.

    The texts are streamed into the hash a batch at a time (the bytes hashed are those of every sentence
    followed by a newline, as when the key hashed a list one sentence at a time, so existing keys stay).
    """
    corpus, n = hashlib.sha256(), 0
    for batch in text_batches(sentences):
        corpus.update("\n".join(batch).encode("utf-8") + b"\n")
        n += len(batch)
    spec = json.dumps({"corpus": corpus.hexdigest(), "n": n, "names": list(names),
                       "params": {n: params.get(n, {}) for n in names}, "seed": seed,
                       "format": FORMAT_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(spec.encode()).hexdigest()


def edit_size(a: str, b: str) -> int:
    """Word-level Levenshtein distance, after stripping the common prefix and suffix."""
    x, y = a.split(), b.split()
    while x and y and x[0] == y[0]:
        x, y = x[1:], y[1:]
    while x and y and x[-1] == y[-1]:
        x, y = x[:-1], y[:-1]
    if not x or not y:
        return max(len(x), len(y))
    prev = list(range(len(y) + 1))
    for i, wx in enumerate(x, 1):
        cur = [i]
        for j, wy in enumerate(y, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (wx != wy)))
        prev = cur
    return prev[-1]


def resources(augs: Sequence[Any]) -> dict[str, str]:
    """Each resource the augmentations need: ``"available"``, or ``"missing: <how to get it>"``."""
    found = {}
    for need in sorted({n for aug in augs for n in aug.needs if n in RESOURCES}):
        try:
            RESOURCES[need]()
            found[need] = "available"
        except AssetError as exc:
            found[need] = f"missing: {exc}"
    return found


def _check_resources(augs: Sequence[Any], found: dict[str, str], allow_errors: bool) -> None:
    for need, state in found.items():
        if state != "available" and not allow_errors:
            users = ", ".join(aug.name for aug in augs if need in aug.needs)
            raise AssetError(f"{users} cannot run: {state.removeprefix('missing: ')}; or {ALLOW}")


def _check_errors(stats: dict[str, Any]) -> None:
    """Refuse a build in which an augmentation raised on more than MAX_ERROR_RATE of the sentences."""
    for name, s in stats.items():
        if s["errors"] > MAX_ERROR_RATE * s["sentences"]:
            example = s["error_examples"][0][1] if s["error_examples"] else "no example kept"
            raise AugmentationFailed(
                f"{name} raised on {s['errors']} of {s['sentences']} sentences (more than {MAX_ERROR_RATE:.0%}), "
                f"e.g. {example}; fix the cause and rerun, or {ALLOW}")


def _build_shard(out_dir: str, index: int, sentences: list[str], names: list[str],
                 params: dict[str, dict[str, Any]], seed: int) -> int:
    """Parse and augment one shard, then move it into place atomically. Returns its index."""
    import datasets
    from datasets import Dataset

    datasets.disable_progress_bars()

    augs = [get(n, **params.get(n, {})) for n in names]
    docs = parse(sentences) if any(a.needs_parse for a in augs) else None
    columns: dict[str, list] = {"text": sentences}
    meta: dict[str, dict] = {}
    for aug in augs:
        out, errors = aug.apply_safe(sentences, seed, docs)
        changed = [o != s for o, s in zip(out, sentences)]
        columns[aug.name] = out
        columns[f"{aug.name}__changed"] = changed
        edits = [edit_size(s, o) for s, o, c in zip(sentences, out, changed) if c]
        meta[aug.name] = {
            "n": len(sentences), "changed": sum(changed), "edit_sum": sum(edits),
            "examples": [[s, o] for s, o, c in zip(sentences, out, changed) if c][:N_EXAMPLES],
            "errors": len(errors),
            "error_examples": [[sentences[i], msg] for i, msg in list(errors.items())[:N_ERROR_EXAMPLES]],
        }
    shards = Path(out_dir) / "shards"
    tmp = shards / f".tmp-{index:05d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    # the shard's fingerprint hashes only strings, so its one failure is a Ctrl-C that ``datasets`` swallows
    # (InterruptLatch raises it again); its warning would blame the data, so it is not shown
    fingerprint_log = logging.getLogger("datasets.fingerprint")
    level = fingerprint_log.level
    fingerprint_log.setLevel(logging.ERROR)
    try:
        Dataset.from_dict(columns).save_to_disk(str(tmp))
    finally:
        fingerprint_log.setLevel(level)
    write_text_atomically(tmp / "augment_meta.json", json.dumps(meta))
    os.replace(tmp, shards / f"{index:05d}")
    return index


def _read_manifest(out_dir: Path) -> dict[str, Any] | None:
    path = out_dir / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _write_json(path: Path, data: Any) -> None:
    write_text_atomically(path, json.dumps(data, indent=1, ensure_ascii=False))


def build_cache(sentences: Texts, names: Sequence[str] | str, out_dir: str | os.PathLike, seed: int = 0,
                shard_size: int = 5000, n_process: int = 1, params: dict[str, dict[str, Any]] | None = None,
                overwrite: bool = False, progress: bool = True, allow_errors: bool = False,
                wait_seconds: float | None = None) -> "Dataset":  # noqa: F821
    """Augment ``sentences`` with every augmentation in ``names`` into ``out_dir`` and return the dataset.

    The same key (corpus, names, params, seed) reuses or resumes what is in ``out_dir`` (rebuilt when the
    resources found differ from those it was built with); another key there is an error unless ``overwrite``.
    Shards are built by ``n_process`` worker processes. A missing resource or an augmentation raising on
    more than :data:`MAX_ERROR_RATE` of the sentences stops the build unless ``allow_errors``.
    A Dataset (or list) is read one shard's slice at a time, so the corpus need not fit in memory; only a
    stream without a length (a generator) is first made a list.
    Processes building the same ``out_dir`` at once (torchrun's ranks) take turns
    (:func:`augcse.core.sole_builder.sole_builder`): one builds, the others wait up to ``wait_seconds``, then read it.
    """
    from datasets import Dataset

    if not isinstance(sentences, (Dataset, Sequence)):
        sentences = list(sentences)
    if not len(sentences):
        raise ValueError("no sentences to augment: the corpus is empty")
    names = resolve_names(names)
    params = {n: dict(p) for n, p in (params or {}).items() if n in names}
    augs = [get(name, **params.get(name, {})) for name in names]  # fail early on bad parameters
    found = resources(augs)
    _check_resources(augs, found, allow_errors)
    for aug in augs:  # and on unavailable models
        if any(x.startswith("model:") for x in aug.needs):
            aug.apply_safe(["A sentence."], seed)
    key = cache_key(sentences, names, params, seed)
    out = Path(out_dir)
    with sole_builder(out, "the augmentation cache", wait_seconds):
        return _build_locked(sentences, names, params, seed, key, found, out, shard_size, n_process, overwrite,
                             progress, allow_errors)


def _build_locked(sentences: Texts, names: list[str], params: dict[str, dict[str, Any]], seed: int, key: str,
                  found: dict[str, str], out: Path, shard_size: int, n_process: int, overwrite: bool, progress: bool,
                  allow_errors: bool) -> "Dataset":  # noqa: F821
    """:func:`build_cache` past its checks, by the one process holding the cache's lock."""
    from tqdm.auto import tqdm

    manifest = _read_manifest(out)
    if manifest is not None and manifest["key"] != key:
        if not overwrite:
            raise CacheConflict(out, manifest["key"])
        shutil.rmtree(out)
        manifest = None
    if manifest is not None and manifest.get("resources", {}) != found:
        logger.warning("rebuilding the cache in %s: it was built with resources %s, now %s", out,
                       manifest.get("resources", {}), found)
        shutil.rmtree(out)
        manifest = None
    if manifest is not None and manifest.get("complete"):
        return load_cache(out)
    n_shards = max(1, -(-len(sentences) // shard_size))
    manifest = {"key": key, "names": names, "params": params, "seed": seed, "shard_size": shard_size,
                "n_shards": n_shards, "n_sentences": len(sentences), "format": FORMAT_VERSION,
                "resources": found, "complete": False}
    (out / "shards").mkdir(parents=True, exist_ok=True)
    _write_json(out / "manifest.json", manifest)
    for stale in (out / "shards").glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    todo = [i for i in range(n_shards) if not (out / "shards" / f"{i:05d}").is_dir()]
    # each shard's sentences are sliced when its job starts: only the shards in flight are in memory
    jobs = ((str(out), i, next(text_batches(sentences, shard_size, i * shard_size, (i + 1) * shard_size)),
             names, params, seed) for i in todo)
    bar = tqdm(total=n_shards, initial=n_shards - len(todo), desc="augment shards", unit="shard",
               disable=not progress)
    # a Ctrl-C that ``datasets`` swallows while fingerprinting a shard still stops the build after that shard
    try:
        with InterruptLatch() as latch:
            if n_process <= 1 or len(todo) <= 1:
                for job in jobs:
                    _build_shard(*job)
                    bar.update()
                    latch.check()
            else:
                _run_bounded(jobs, n_process, bar.update)
    finally:
        bar.close()  # also when a shard fails or Ctrl-C comes: the error is then a line of its own
    stats = _merge_stats(out, names, n_shards)
    if not allow_errors:
        _check_errors(stats)
    _write_json(out / "stats.json", stats)
    manifest["complete"] = True
    _write_json(out / "manifest.json", manifest)
    return load_cache(out)


def _run_bounded(jobs: Iterator[tuple], n_process: int, done: Any) -> None:
    """Run ``_build_shard`` over ``jobs`` in ``n_process`` processes with at most two jobs a process queued.

    ``Executor.map`` would submit (and so slice and pickle) every shard at once: the whole corpus in memory.
    """
    with ProcessPoolExecutor(max_workers=n_process) as pool:
        running: set[Future] = set()
        for job in jobs:
            if len(running) >= 2 * n_process:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    future.result()
                    done()
            running.add(pool.submit(_build_shard, *job))
        for future in running:
            future.result()
            done()


def _merge_stats(out: Path, names: list[str], n_shards: int) -> dict[str, Any]:
    total: dict[str, dict[str, Any]] = {}
    for i in range(n_shards):
        meta = json.loads((out / "shards" / f"{i:05d}" / "augment_meta.json").read_text())
        for name in names:
            m, t = meta[name], total.setdefault(name, {"n": 0, "changed": 0, "edit_sum": 0, "examples": [],
                                                        "errors": 0, "error_examples": []})
            for k in ("n", "changed", "edit_sum", "errors"):
                t[k] += m[k]
            t["examples"] = (t["examples"] + m["examples"])[:N_EXAMPLES]
            t["error_examples"] = (t["error_examples"] + m["error_examples"])[:N_ERROR_EXAMPLES]
    stats = {}
    for name, t in total.items():
        stats[name] = {
            "sentences": t["n"], "changed": t["changed"],
            "perturbation_rate": t["changed"] / t["n"] if t["n"] else 0.0,
            "mean_edit_size": t["edit_sum"] / t["changed"] if t["changed"] else 0.0,
            "errors": t["errors"], "examples": t["examples"], "error_examples": t["error_examples"],
        }
    return stats


def load_cache(out_dir: str | os.PathLike) -> "Dataset":  # noqa: F821
    """The cached dataset; raises if ``out_dir`` holds no cache or only a partial one."""
    from datasets import concatenate_datasets, load_from_disk

    out = Path(out_dir)
    manifest = _read_manifest(out)
    if manifest is None:
        raise FileNotFoundError(f"{out} holds no augmentation cache (no manifest.json)")
    if not manifest.get("complete"):
        done = len([p for p in (out / "shards").glob("[0-9]*") if p.is_dir()])
        raise ValueError(f"{out} holds a partial cache ({done}/{manifest['n_shards']} shards); "
                         "rerun the same build to resume it")
    parts = [load_from_disk(str(out / "shards" / f"{i:05d}")) for i in range(manifest["n_shards"])]
    return concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def load_stats(out_dir: str | os.PathLike) -> dict[str, Any]:
    return json.loads((Path(out_dir) / "stats.json").read_text())


def format_stats(stats: dict[str, Any]) -> str:
    """A Markdown table: perturbation rate, mean edit size (words), errors per augmentation."""
    lines = ["| augmentation | perturbation rate | mean edit size (words) | errors |", "|---|---:|---:|---:|"]
    for name, s in stats.items():
        lines.append(f"| {name} | {100 * s['perturbation_rate']:.2f} % | {s['mean_edit_size']:.2f} | {s['errors']} |")
    return "\n".join(lines)


__all__ = ["AugmentationError", "AugmentationFailed", "CacheConflict", "build_cache", "cache_key", "edit_size", "text_batches", "text_column", "format_stats", "load_cache", "load_stats"]
