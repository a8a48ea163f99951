"""Read a training corpus into a memory-mapped ``datasets.Dataset`` with one ``text`` column.

Bad lines never stop a run: empty, whitespace-only, undecodable, malformed, too short and too long
lines are skipped and counted by reason; the counts are returned, and logged as a warning whenever a
line was skipped for any reason but the recipe's ``limit``.

Lines end at LF (a CRLF's CR is dropped), except in a text or JSON-lines file whose first :data:`HEAD_BYTES` hold a
CR and no LF: such a file has old Mac line ends, and its lines end at CR. A JSON-lines value that is not a string
is skipped as ``not_text``, and the first one is named by line and key (:attr:`CorpusStats.where`).
"""

from __future__ import annotations

import atexit
import codecs
import csv
import gzip
import io
import json
import logging
import os
import random
import shutil
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset

from augcse.core.sanity import check_header
from augcse.core.textfile import why_not_utf8
from augcse.text.dedupe import SeenLines

logger = logging.getLogger(__name__)

BATCH_LINES = 2_000  # lines of a JSON lines or CSV corpus cleaned at a time; rows a shuffle gathers at a time
BLOCK_BYTES = 1 << 20  # bytes of a text corpus read, split and cleaned at a time (1 MiB: 13,000 lines of 80 bytes)
HEAD_BYTES = 1 << 20  # bytes looked at for the file's line end: CR and no LF in them, the lines end at CR
JSON_TYPES = {bool: "boolean", int: "number", float: "number", list: "list", dict: "object"}  # what a value is
SCHEMA = pa.schema([("text", pa.string())])
# what Python's str.split() and str.strip() take for whitespace (Arrow's utf8_*_whitespace agree on every code point)
WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


@dataclass
class CorpusStats:
    """How many lines were read, kept, and skipped for which reason."""

    read: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    where: dict[str, str] = field(default_factory=dict)  # a skip reason's first line, in words, where it helps

    def summary(self) -> str:
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.skipped.items())) or "none"
        return f"read {self.read} lines, kept {self.kept}, skipped: {reasons}"

    def as_dict(self) -> dict:
        return {"read": self.read, "kept": self.kept, "skipped": dict(self.skipped)}


def _open_bytes(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _line_end(path: Path) -> bytes:
    """``b"\\r"`` for a file with old Mac line ends (a CR, no LF in its first :data:`HEAD_BYTES`), else ``b"\\n"``."""
    with _open_bytes(path) as handle:
        head = handle.read(HEAD_BYTES)
    return b"\r" if b"\r" in head and b"\n" not in head else b"\n"


def _raw_lines(handle: io.BufferedIOBase, end: bytes) -> Iterator[bytes]:
    """The lines of ``handle`` as bytes, split at ``end`` (LF: the file's own iteration)."""
    if end == b"\n":
        yield from handle
        return
    rest = b""
    while chunk := handle.read(BLOCK_BYTES):
        *lines, rest = (rest + chunk).split(end)
        yield from lines
    if rest:
        yield rest


def _text_lines(path: Path, stats: CorpusStats, column: str) -> Iterator[str | None]:
    with _open_bytes(path) as handle:
        for raw in _raw_lines(handle, _line_end(path)):
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                stats.read += 1
                stats.skipped["undecodable"] += 1


def _text_blocks(path: Path, stats: CorpusStats, column: str) -> Iterator[pa.Array]:
    """The lines of a text file as Arrow strings, :data:`BLOCK_BYTES` at a time, split and decoded by Arrow.

    A line that is not UTF-8 is counted as undecodable and left out, as the line-by-line reader did; the
    trailing ``\\r`` of a CRLF file is dropped. Lines end at :func:`_line_end`'s byte.
    """
    line_end = _line_end(path)
    with _open_bytes(path) as handle:
        rest = b""
        while chunk := handle.read(BLOCK_BYTES):
            block = rest + chunk if rest else chunk
            del chunk
            end = block.rfind(line_end)
            if end < 0:
                rest = block  # one line longer than a block: read on
                continue
            rest = block[end + 1:]
            yield _decoded_lines(memoryview(block)[:end], stats, line_end)
        if rest:
            yield _decoded_lines(memoryview(rest), stats, line_end)


def _decoded_lines(block: memoryview, stats: CorpusStats, line_end: bytes = b"\n") -> pa.Array:
    """``block``'s lines (split at ``line_end``, none after the last) as Arrow strings; those not UTF-8 counted
    and dropped."""
    whole = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 1, [None, pa.py_buffer(
        np.array([0, len(block)], dtype=np.int64)), pa.py_buffer(block)])  # no copy of the block
    lines = pc.split_pattern(whole, line_end).flatten()
    try:
        text = lines.cast(pa.large_string())  # checks that every line is UTF-8
    except pa.ArrowInvalid:
        bad = _undecodable_lines(block, len(lines), line_end)
        stats.read += int(bad.sum())
        stats.skipped["undecodable"] += int(bad.sum())
        text = lines.filter(pa.array(~bad)).cast(pa.large_string())
    return pc.utf8_rtrim(text, characters="\r") if b"\r" in block.obj and line_end == b"\n" else text  # CRLF


def _undecodable_lines(block: memoryview, lines: int, line_end: bytes = b"\n") -> np.ndarray:
    """A mask of the ``lines`` lines (ending at ``line_end``) of ``block`` that are not UTF-8.

    The decoder stops at the first bad byte, so the block is decoded once in all: from each bad line on to the
    next.
    """
    data = block.tobytes()
    at, line, bad = 0, 0, np.zeros(lines, dtype=bool)
    while at < len(data):
        try:
            codecs.utf_8_decode(block[at:], "strict", True)
            break
        except UnicodeDecodeError as error:
            where = at + error.start
        line += data.count(line_end, at, where)
        bad[line] = True
        following = data.find(line_end, where)
        at, line = (len(data), line) if following < 0 else (following + 1, line + 1)
    return bad


def _blocks(values: Iterator[str | None]) -> Iterator[pa.Array]:
    """The values of a reader of rows, :data:`BATCH_LINES` at a time, as Arrow strings (None: missing)."""
    while batch := list(islice(values, BATCH_LINES)):
        yield pa.array(batch, pa.large_string())


def _jsonl_lines(path: Path, stats: CorpusStats, column: str) -> Iterator[str | None]:
    """Each row's value of ``column`` (None: missing); a value that is not a string is counted as ``not_text``."""
    for number, line in enumerate(_text_lines(path, stats, column), start=1):
        if not line.strip():
            yield line
            continue
        try:
            value = json.loads(line).get(column)
        except (json.JSONDecodeError, AttributeError):
            stats.read += 1
            stats.skipped["malformed"] += 1
            continue
        if value is None or isinstance(value, str):
            yield value
            continue
        stats.read += 1
        stats.skipped["not_text"] += 1
        stats.where.setdefault("not_text", f"the value at line {number} of key {column!r} is "
                                           f"{_a(JSON_TYPES.get(type(value), type(value).__name__))}, not text")


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


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


def _parquet_blocks(path: Path, stats: CorpusStats, column: str) -> Iterator[pa.Array]:
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path)
    names = table.schema_arrow.names
    if column not in names:
        raise ValueError(f"{path} has no column {column!r} (columns: {names}); set data.column")
    for batch in table.iter_batches(columns=[column]):  # a row group's batches at a time, not the whole file
        values = batch.column(0)
        textual = pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or (
            pa.types.is_dictionary(values.type) and pa.types.is_string(values.type.value_type))
        yield values.cast(pa.large_string()) if textual else pa.nulls(len(values), pa.large_string())


RowReader = Callable[[Path, CorpusStats, str], Iterator[str | None]]
BlockReader = Callable[[Path, CorpusStats, str], Iterator[pa.Array]]


def _in_blocks(rows: RowReader) -> BlockReader:
    """A reader of rows (one value or None at a time) as a reader of Arrow blocks."""
    def read(path: Path, stats: CorpusStats, column: str) -> Iterator[pa.Array]:
        return _blocks(rows(path, stats, column))
    return read


# each reader yields the corpus as Arrow string arrays (None where a row has no text), a block at a time
READERS = {".txt": _text_blocks, ".jsonl": _in_blocks(_jsonl_lines), ".csv": _in_blocks(_csv_lines),
           ".tsv": _in_blocks(_csv_lines), ".parquet": _parquet_blocks}


def _reader(path: Path):
    suffixes = [s for s in path.suffixes if s != ".gz"]
    kind = suffixes[-1] if suffixes else ".txt"
    if kind not in READERS:
        raise ValueError(f"corpus {path}: unsupported format {kind!r}; use one of {', '.join(READERS)} (optionally .gz)")
    return READERS[kind]


def _cleaned(values: pa.Array, stats: CorpusStats, min_words: int, max_chars: int | None) -> pa.Array:
    """The stripped sentences of ``values`` that pass every check but deduplication; the others counted by reason.

    Each check runs on the whole block in Arrow and is counted on the lines the earlier checks kept, in the
    order: missing, undecodable (a NUL), empty, whitespace, too long, too short.
    """
    stats.read += len(values)
    values = _skip(values, values.is_null(), "missing", stats)
    if _holds_nul(values):  # one search of the block's bytes first: a NUL is rare
        values = _skip(values, pc.match_substring(values, "\x00"), "undecodable", stats)
    values = _skip(values, pc.equal(pc.binary_length(values), 0), "empty", stats)
    values = pc.utf8_trim_whitespace(values)
    values = _skip(values, pc.equal(pc.binary_length(values), 0), "whitespace", stats)
    # a line has no more characters than bytes: characters are counted only in blocks with a line long in bytes
    if max_chars is not None and len(values) and pc.max(pc.binary_length(values)).as_py() > max_chars:
        values = _skip(values, pc.greater(pc.utf8_length(values), max_chars), "too_long", stats)
    if min_words > 1:  # a stripped non-empty line has one word at least
        words = f"[^{WHITESPACE}]+(?:[{WHITESPACE}]+[^{WHITESPACE}]+){{{min_words - 1}}}"
        values = _skip(values, pc.invert(pc.match_substring_regex(values, words)), "too_short", stats)
    return values


def _holds_nul(values: pa.Array) -> bool:
    """Whether any byte of ``values``' text is NUL (one search of its data buffer, of the rows it covers)."""
    if not len(values) or values.buffers()[2] is None:
        return False
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64 if pa.types.is_large_string(values.type) else np.int32)
    first, last = int(offsets[values.offset]), int(offsets[values.offset + len(values)])
    return memoryview(values.buffers()[2])[first:last].tobytes().find(b"\x00") >= 0


def _skip(values: pa.Array, mask: pa.Array, reason: str, stats: CorpusStats) -> pa.Array:
    """``values`` without the rows of ``mask``, whose number is counted under ``reason``."""
    count = pc.sum(mask).as_py() or 0
    if not count:
        return values
    stats.skipped[reason] += count
    return values.filter(pc.invert(mask))


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


def _write_kept(blocks: Iterator[pa.Array], stats: CorpusStats, out: Path, dedupe: bool, min_words: int,
                max_chars: int | None, keep: int | None) -> int:
    """Clean (and dedupe) ``blocks`` into the Arrow stream ``out``, writing at most ``keep`` lines.

    Returns how many lines were kept in all, written or not; memory holds one block and the digests.
    """
    seen = SeenLines() if dedupe else None
    total = written = 0
    with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_stream(sink, SCHEMA) as writer:
        for block in blocks:
            batch = _cleaned(block, stats, min_words, max_chars)
            if seen is not None and len(batch):
                fresh = seen.first_seen(batch)
                if not fresh.all():
                    stats.skipped["duplicate"] += len(batch) - int(fresh.sum())
                    batch = batch.filter(pa.array(fresh))
            total += len(batch)
            room = len(batch) if keep is None else min(len(batch), keep - written)
            if room > 0:
                writer.write_batch(pa.record_batch([batch.slice(0, room).cast(pa.string())], schema=SCHEMA))
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

    Memory stays bounded whatever the corpus size: kept lines go to an Arrow file block by block
    (:data:`BLOCK_BYTES` of text or :data:`BATCH_LINES` rows at a time, in a new folder of :func:`_scratch_folder`),
    ``dedupe`` remembers 18 bytes per distinct line (:mod:`augcse.text.dedupe`), and ``shuffle`` permutes 4 bytes
    per kept line. The shuffle is ``random.Random(seed).shuffle`` over all kept lines before ``limit``: the same
    selection and order as shuffling the list of sentences (the permutation depends only on their number).
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
    kept = folder / "kept.arrow"
    if shuffle:
        _shuffled(kept, seed, stats.kept, folder / "shuffled.arrow")
        kept = folder / "shuffled.arrow"
    dataset = Dataset.from_file(str(kept))
    bad = sum(count for reason, count in stats.skipped.items() if reason != "over_limit")
    notes = "".join(f"; {note}" for note in stats.where.values())
    logger.log(logging.WARNING if bad else logging.INFO, "corpus %s: %s%s", path.name, stats.summary(), notes)
    return dataset, stats


def _shuffled(source: Path, seed: int, keep: int, out: Path) -> None:
    """The first ``keep`` rows of ``random.Random(seed).shuffle`` over the rows of the Arrow stream ``source``,
    written to ``out``; ``source`` is then removed.

    The permutation is shuffled as a typed array of row numbers (4 bytes a row below 2³¹ rows, indexed as fast as
    a list): the swaps depend on the length alone, so the rows come out as the sentences would in a shuffled list.
    Rows are gathered :data:`BATCH_LINES` at a time as byte ranges of the memory-mapped file, read through its own
    offset buffers (``Dataset.select`` would turn the permutation into a Python list; Arrow's ``take`` on the
    chunked table first concatenates its chunks, the whole text in memory).
    """
    with pa.memory_map(str(source)) as mapped:
        spans = _RowSpans(mapped)
        order = array("i" if spans.rows < 2**31 else "q", range(spans.rows))  # 4 bytes a row where they fit
        random.Random(seed).shuffle(order)
        picked_rows = np.frombuffer(order, dtype=f"i{order.itemsize}")[:keep]
        with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_stream(sink, SCHEMA) as writer:
            for start in range(0, keep, BATCH_LINES):
                rows = picked_rows[start:start + BATCH_LINES].astype(np.int64)
                writer.write_batch(pa.record_batch([spans.gather(rows)], schema=SCHEMA))
        del spans, picked_rows
    source.unlink()


class _RowSpans:
    """Random access to the rows of a memory-mapped Arrow stream of one string column, in O(1) memory a chunk.

    A row's bytes are found from its chunk's offsets buffer and data buffer, both inside the mapping.
    """

    def __init__(self, mapped: pa.MemoryMappedFile) -> None:
        chunks = [c for c in pa.ipc.open_stream(mapped).read_all().column("text").chunks if len(c)]
        mapped.seek(0)
        whole = mapped.read_buffer()
        self.text = np.frombuffer(whole, dtype=np.uint8)
        self.words = np.frombuffer(whole, dtype=np.int32, count=whole.size // 4)
        lengths = np.array([len(c) for c in chunks], dtype=np.int64)
        self.rows = int(lengths.sum())
        self.first_row = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        offsets_at = np.array([c.buffers()[1].address - whole.address for c in chunks], dtype=np.int64)
        if (offsets_at % 4).any():
            raise RuntimeError("an Arrow offsets buffer is not 4-byte aligned in the mapped file")
        self.offset_word = offsets_at // 4 + np.array([c.offset for c in chunks], dtype=np.int64)
        self.data_at = np.array([c.buffers()[2].address - whole.address for c in chunks], dtype=np.int64)

    def gather(self, rows: np.ndarray) -> pa.StringArray:
        """The strings of ``rows``, in that order, copied out of the mapping."""
        chunk = np.searchsorted(self.first_row, rows, side="right") - 1
        word = self.offset_word[chunk] + (rows - self.first_row[chunk])
        begin = self.words[word].astype(np.int64)
        size = self.words[word + 1] - begin
        ends = np.cumsum(size)
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        return pa.StringArray.from_buffers(len(rows), pa.py_buffer(offsets),
                                           pa.py_buffer(self.text[_byte_index(self.data_at[chunk] + begin, size)]))


def _byte_index(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions of the bytes of the ranges ``[start, start + size)``, one range after another, built with one
    array of their number (a step of 1 within a range, a jump to the next range's start): a cumulative sum."""
    steps = np.ones(int(sizes.sum()), dtype=np.int64)
    starts, sizes = starts[sizes > 0], sizes[sizes > 0]
    if len(starts):
        steps[0] = starts[0]
        steps[np.cumsum(sizes)[:-1]] = starts[1:] - (starts[:-1] + sizes[:-1]) + 1
        np.cumsum(steps, out=steps)
    return steps


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
    if "not_text" in stats.where:  # the values are under the column, but not strings
        return f"; {stats.where['not_text']}"
    return ""
