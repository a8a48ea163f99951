"""Read a training corpus into a ``datasets.Dataset`` with one ``text`` column.

Bad lines never stop a run: empty, whitespace-only, undecodable, malformed, too short and too long
lines are skipped and counted by reason; the counts are returned, and logged as a warning whenever a
line was skipped for any reason but the recipe's ``limit``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from datasets import Dataset

logger = logging.getLogger(__name__)


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
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="")
        reader = csv.DictReader(text, delimiter="\t" if ".tsv" in path.suffixes else ",")
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

    table = pq.read_table(path)
    if column not in table.column_names:
        raise ValueError(f"{path} has no column {column!r} (columns: {table.column_names}); set data.column")
    for value in table.column(column).to_pylist():
        yield value if isinstance(value, str) else None


READERS = {".txt": _text_lines, ".jsonl": _jsonl_lines, ".csv": _csv_lines, ".tsv": _csv_lines,
           ".parquet": _parquet_lines}


def _reader(path: Path):
    suffixes = [s for s in path.suffixes if s != ".gz"]
    kind = suffixes[-1] if suffixes else ".txt"
    if kind not in READERS:
        raise ValueError(f"corpus {path}: unsupported format {kind!r}; use one of {', '.join(READERS)} (optionally .gz)")
    return READERS[kind]


def read_corpus(
    path: str | Path,
    column: str = "text",
    limit: int | None = None,
    shuffle: bool = False,
    seed: int = 42,
    dedupe: bool = False,
    min_words: int = 1,
    max_chars: int | None = 10_000,
) -> tuple[list[str], CorpusStats]:
    """Clean sentences from ``path`` and the statistics of what was skipped."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist")
    stats = CorpusStats()
    seen: set[str] = set()
    kept: list[str] = []
    for value in _reader(path)(path, stats, column):
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
        if dedupe:
            if sentence in seen:
                stats.skipped["duplicate"] += 1
                continue
            seen.add(sentence)
        kept.append(sentence)
    if shuffle:
        random.Random(seed).shuffle(kept)
    if limit is not None and len(kept) > limit:
        stats.skipped["over_limit"] += len(kept) - limit
        kept = kept[:limit]
    stats.kept = len(kept)
    if not kept:
        raise ValueError(f"corpus {path} has no usable sentence ({stats.summary()}){_why_empty(stats, column)}")
    bad = sum(count for reason, count in stats.skipped.items() if reason != "over_limit")
    logger.log(logging.WARNING if bad else logging.INFO, "corpus %s: %s", path.name, stats.summary())
    return kept, stats


def _why_empty(stats: CorpusStats, column: str) -> str:
    """What a corpus with nothing kept most likely needs, when every line failed the same way."""
    if stats.read == 0:
        return "; the file is empty"
    if stats.skipped["undecodable"] == stats.read:
        return "; it is not UTF-8 text: convert it (e.g. iconv -f latin1 -t utf-8)"
    if stats.skipped["missing"] == stats.read:
        return f"; no row has a text under {column!r}: set data.column"
    return ""


def load_corpus(path: str | Path, column: str = "text", **options) -> tuple[Dataset, CorpusStats]:
    """:func:`read_corpus` as a ``datasets.Dataset`` with a single ``text`` column."""
    sentences, stats = read_corpus(path, column=column, **options)
    return Dataset.from_dict({"text": sentences}), stats
