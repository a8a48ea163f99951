"""Read a training corpus into a memory-mapped ``datasets.Dataset`` with one ``text`` column.

Bad lines never stop a run: empty, whitespace-only, undecodable, malformed, too short and too long
lines are skipped and counted by reason; the counts are returned, and logged as a warning whenever a
line was skipped for any reason but the recipe's ``limit``.
"""

from __future__ import annotations

import atexit
import csv
import gzip
import io
import json
import logging
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import compress, islice
from pathlib import Path

import numpy as np
import pyarrow as pa
from datasets import Dataset

from augcse.core.sanity import check_header
from augcse.core.textfile import why_not_utf8
from augcse.text.dedupe import SeenLines

logger = logging.getLogger(__name__)

BATCH_LINES = 10_000  # kept lines held in memory at a time (about 1 MB of text) before they go to Arrow
SCHEMA = pa.schema([("text", pa.string())])


@dataclass
class CorpusStats:
    """How many lines were read, kept, and skipped for which reason."""

    read: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.skipped.items())) or "none"
        return f"read {self.read} lines, kept {self.kept}, skipped: {reasons}"

    def as_dict(self) -> dict:
        return {"read": self.read, "kept": self.kept, "skipped": dict(self.skipped)}


def _open_bytes(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _text_lines(path: Path, stats: CorpusStats, column: str) -> Iterator[str | None]:
    with _open_bytes(path) as handle:
        for raw in handle:
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                stats.read += 1
                stats.skipped["undecodable"] += 1


def _jsonl_lines(path: Path, stats: CorpusStats, column: str) -> Iterator[str | None]:
    for line in _text_lines(path, stats, column):
        if not line.strip():
            yield line
            continue
        try:
            value = json.loads(line).get(column)
        except (json.JSONDecodeError, AttributeError):
            stats.read += 1
            stats.skipped["malformed"] += 1
            continue
        yield value if isinstance(value, str) else None


def _csv_lines(path: Path, stats: CorpusStats, column: str) -> Iterator[str | None]:
    with _open_bytes(path) as handle:
        text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="replace", newline="")  # Excel's BOM dropped
        reader = csv.DictReader(text, delimiter="\t" if ".tsv" in path.suffixes else ",")
        check_header(reader.fieldnames or [], str(path))
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise ValueError(f"{path} has no column {column!r} (columns: {reader.fieldnames}); set data.column")
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # a row the csv module refuses is skipped, as a bad line of any format
                stats.read += 1  # a cell over its limit (128 KiB) is far longer than any sentence
                stats.skipped["too_long" if "field larger" in str(exc) else "malformed"] += 1
                continue
            value = row.get(column)
            # a cell that is not UTF-8 is counted as undecodable by the reader's loop (it drops any NUL)
            yield None if value is None else ("\x00" if "\ufffd" in value else value)


def _parquet_lines(path: Path, stats: CorpusStats, column: str) -> Iterator[str | None]:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path)
    names = table.schema_arrow.names
    if column not in names:
        raise ValueError(f"{path} has no column {column!r} (columns: {names}); set data.column")
    for batch in table.iter_batches(columns=[column]):  # a row group's batches at a time, not the whole file
        for value in batch.column(0).to_pylist():
            yield value if isinstance(value, str) else None


READERS = {".txt": _text_lines, ".jsonl": _jsonl_lines, ".csv": _csv_lines, ".tsv": _csv_lines,
           ".parquet": _parquet_lines}


def _reader(path: Path):
    suffixes = [s for s in path.suffixes if s != ".gz"]
    kind = suffixes[-1] if suffixes else ".txt"
    if kind not in READERS:
        raise ValueError(f"corpus {path}: unsupported format {kind!r}; use one of {', '.join(READERS)} (optionally .gz)")
    return READERS[kind]


def _cleaned(values: Iterator[str | None], stats: CorpusStats, min_words: int,
             max_chars: int | None) -> Iterator[str]:
    """The stripped sentences that pass every check but deduplication; the others counted by reason."""
    for value in values:
        stats.read += 1
        if value is None:
            stats.skipped["missing"] += 1
            continue
        if "\x00" in value:
            stats.skipped["undecodable"] += 1
            continue
        if not value:
            stats.skipped["empty"] += 1
            continue
        sentence = value.strip()
        if not sentence:
            stats.skipped["whitespace"] += 1
            continue
        if max_chars is not None and len(sentence) > max_chars:
            stats.skipped["too_long"] += 1
            continue
        if len(sentence.split()) < min_words:
            stats.skipped["too_short"] += 1
            continue
        yield sentence


def _batches(sentences: Iterator[str], size: int) -> Iterator[list[str]]:
    while batch := list(islice(sentences, size)):
        yield batch


def _scratch_folder(cache_dir: str | Path | None) -> Path:
    """A new folder for this read's Arrow files, removed when the process exits.

    It lies in ``cache_dir``, else the datasets cache (``HF_DATASETS_CACHE``, on disk where a user put large
    data), else the system temporary folder. A new folder per read means no datasets cache file (``map``
    writes beside its source) can be taken for another corpus's.
    """
    import datasets

    for base in ([Path(cache_dir)] if cache_dir is not None else
                 [Path(datasets.config.HF_DATASETS_CACHE) / "augcse-corpus", Path(tempfile.gettempdir())]):
        try:
            base.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="corpus-", dir=base))
        except OSError:
            if cache_dir is not None:
                raise
            continue
        atexit.register(_remove, folder, os.getpid())
        return folder
    raise OSError(f"no folder to write the corpus to: {datasets.config.HF_DATASETS_CACHE} and "
                  f"{tempfile.gettempdir()} cannot be written; set HF_DATASETS_CACHE")


def _remove(folder: Path, owner: int) -> None:
    """At exit, the folder of a read made by this process (a forked child exiting leaves its parent's)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def _write_kept(lines: Iterator[str | None], stats: CorpusStats, out: Path, dedupe: bool, min_words: int,
                max_chars: int | None, keep: int | None) -> int:
    """Clean (and dedupe) ``lines`` into the Arrow stream ``out``, writing at most ``keep`` of them.

    Returns how many lines were kept in all, written or not; memory holds one batch and the digests.
    """
    seen = SeenLines() if dedupe else None
    total = written = 0
    with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_stream(sink, SCHEMA) as writer:
        for batch in _batches(_cleaned(lines, stats, min_words, max_chars), BATCH_LINES):
            if seen is not None:
                fresh = seen.first_seen(batch)
                if not fresh.all():
                    stats.skipped["duplicate"] += len(batch) - int(fresh.sum())
                    batch = list(compress(batch, fresh))
            total += len(batch)
            room = len(batch) if keep is None else min(len(batch), keep - written)
            if room > 0:
                writer.write_batch(pa.record_batch([pa.array(batch[:room], pa.string())], schema=SCHEMA))
                written += room
    return total


def load_corpus(
    path: str | Path,
    column: str = "text",
    limit: int | None = None,
    shuffle: bool = False,
    seed: int = 42,
    dedupe: bool = False,
    min_words: int = 1,
    max_chars: int | None = 10_000,
    cache_dir: str | Path | None = None,
) -> tuple[Dataset, CorpusStats]:
    """Clean sentences from ``path`` as a memory-mapped ``datasets.Dataset`` (one ``text`` column) and the statistics.

    Memory stays bounded whatever the corpus size: kept lines go to an Arrow file batch by batch
    (:data:`BATCH_LINES` at a time, in a new folder of :func:`_scratch_folder`), ``dedupe`` remembers 16 bytes
    per distinct line (:mod:`augcse.text.dedupe`), and ``shuffle`` permutes 8 bytes per kept line. The shuffle
    is ``random.Random(seed).shuffle`` over all kept lines before ``limit``: the same selection and order as
    shuffling the list of sentences (the permutation depends only on their number).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist")
    reader = _reader(path)
    stats = CorpusStats()
    folder = _scratch_folder(cache_dir)
    try:
        total = _write_kept(reader(path, stats, column), stats, folder / "kept.arrow", dedupe, min_words, max_chars,
                            keep=None if shuffle else limit)
        if limit is not None and total > limit:
            stats.skipped["over_limit"] += total - limit
        stats.kept = min(total, limit) if limit is not None else total
        if not stats.kept:
            raise ValueError(f"corpus {path} has no usable sentence ({stats.summary()}){_why_empty(stats, column, path)}")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    dataset = Dataset.from_file(str(folder / "kept.arrow"))
    if shuffle:
        dataset = _shuffled(dataset, seed, stats.kept, folder / "shuffled.arrow")
    bad = sum(count for reason, count in stats.skipped.items() if reason != "over_limit")
    logger.log(logging.WARNING if bad else logging.INFO, "corpus %s: %s", path.name, stats.summary())
    return dataset, stats


def _shuffled(dataset: Dataset, seed: int, keep: int, out: Path) -> Dataset:
    """The first ``keep`` rows of ``random.Random(seed).shuffle`` over ``dataset``'s rows, written to ``out``.

    The permutation is shuffled as an array of row numbers: the swaps depend on the length alone, so the
    rows come out as the sentences would in a shuffled list, in 8 bytes per row instead of the strings. Rows
    are gathered a batch at a time (``Dataset.select`` would turn the whole permutation into a Python list; Arrow's
    ``take`` on the chunked table first concatenates its chunks, the whole text in memory).
    """
    order = np.arange(len(dataset), dtype=np.int64)
    random.Random(seed).shuffle(order)
    rows = dataset.with_format("arrow")
    with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_stream(sink, SCHEMA) as writer:
        for start in range(0, keep, BATCH_LINES):
            writer.write_table(rows[order[start:min(start + BATCH_LINES, keep)]].combine_chunks())
    source = Path(dataset.cache_files[0]["filename"])
    del dataset, rows
    source.unlink()  # the unshuffled copy (a mapping of it stays valid until dropped)
    return Dataset.from_file(str(out))


def read_corpus(path: str | Path, column: str = "text", **options) -> tuple[list[str], CorpusStats]:
    """:func:`load_corpus` as a list of sentences, for corpora that fit in memory (benchmarks, tests, tools)."""
    dataset, stats = load_corpus(path, column=column, **options)
    return dataset.data.column("text").to_pylist(), stats


def _why_empty(stats: CorpusStats, column: str, path: str | Path) -> str:
    """What a corpus with nothing kept most likely needs, when every line failed the same way."""
    if stats.read == 0:
        return "; the file is empty"
    if stats.skipped["undecodable"] == stats.read:
        return f"; {why_not_utf8(path)}"
    if stats.skipped["missing"] == stats.read:
        return f"; no row has a text under {column!r}: set data.column"
    return ""
