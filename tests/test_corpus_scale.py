"""A corpus is read into a memory-mapped Arrow file batch by batch: no list of its lines, same lines and counts."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

import augcse.text.corpus as corpus
from augcse.text.corpus import load_corpus, read_corpus
from augcse.text.dedupe import SeenLines


def _lines(n: int, seed: int = 0) -> list[str]:
    """Lines with duplicates near and far apart, and bad ones of every kind the text reader meets."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(50)]
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.1 and out:
            out.append(rng.choice(out))  # a duplicate of any earlier line (or of a bad one)
        elif roll < 0.13:
            out.append(rng.choice(["", "   ", "one", "x" * 90]))
        else:
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(2, 8))))
    return out


def test_the_dataset_is_memory_mapped_from_an_arrow_file(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("\n".join(_lines(300)) + "\n")
    for options in ({}, {"shuffle": True, "limit": 50}, {"limit": 50}):
        dataset, _ = load_corpus(path, cache_dir=tmp_path / "cache", **options)
        assert dataset.cache_files and all(f["filename"].startswith(str(tmp_path / "cache"))
                                           for f in dataset.cache_files), options
        assert dataset._indices is None  # no in-memory index mapping left over from shuffling


@pytest.mark.parametrize("batch", [7, 10_000])
def test_dedupe_by_digest_keeps_the_first_of_equal_lines_across_batches(tmp_path, monkeypatch, batch):
    monkeypatch.setattr(corpus, "BATCH_LINES", batch)  # 7: duplicates fall in other batches, runs merge
    lines = _lines(2000)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(lines) + "\n")
    got, stats = read_corpus(path, dedupe=True, min_words=2, max_chars=80)
    clean = [s.strip() for s in lines if s.strip() and len(s.strip()) <= 80 and len(s.split()) >= 2]
    assert got == list(dict.fromkeys(clean))
    assert stats.read == 2000 and stats.kept == len(got)
    assert stats.skipped["duplicate"] == len(clean) - len(got) > 100
    assert sum(stats.skipped.values()) + stats.kept == stats.read


def test_seen_lines_matches_a_set_over_many_batches():
    rng = random.Random(1)
    seen, reference = SeenLines(), set()
    for _ in range(300):
        batch = [str(rng.randrange(3000)) for _ in range(rng.randrange(0, 40))]
        expected = []
        for line in batch:
            expected.append(line not in reference)
            reference.add(line)
        assert seen.first_seen(batch).tolist() == expected
    assert len(seen) == len(reference) and len(seen._heads) < 20


@pytest.mark.parametrize("options", [{"limit": 40, "seed": 3}, {"limit": 40, "seed": 3, "dedupe": True},
                                     {"seed": 5}, {"limit": 10_000, "seed": 1}])
def test_shuffle_then_limit_selects_as_shuffling_the_list_of_sentences(tmp_path, monkeypatch, options):
    monkeypatch.setattr(corpus, "BATCH_LINES", 64)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(_lines(1000)) + "\n")
    limit = options.pop("limit", None)
    seed = options.pop("seed")
    everything, _ = read_corpus(path, **options)
    random.Random(seed).shuffle(everything)
    got, stats = read_corpus(path, shuffle=True, limit=limit, seed=seed, **options)
    assert got == everything[:limit]
    assert stats.skipped["over_limit"] == max(0, len(everything) - (limit or len(everything)))


def test_reading_holds_no_list_of_the_lines(tmp_path):
    rng = np.random.default_rng(0)
    vocabulary = np.array([f"word{i}" for i in range(5000)])
    lines = [" ".join(vocabulary[rng.integers(0, 5000, 10)]) for _ in range(200_000)]
    path = tmp_path / "c.txt"
    path.write_text("\n".join(lines) + "\n")
    size = path.stat().st_size  # about 18 MB; a list of its lines takes about 30 MB in Python
    del lines
    # shuffle and limit hold one batch and 4 bytes per line; dedupe adds 16 (up to 40 while its runs merge)
    for options, bound in (({"shuffle": True, "limit": 150_000}, size / 5), ({"dedupe": True}, size / 2)):
        tracemalloc.start()
        try:
            dataset, stats = load_corpus(path, cache_dir=tmp_path / "cache", **options)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert stats.kept == len(dataset) >= 150_000
        assert peak < bound, f"{options}: peak traced memory {peak / 1e6:.1f} MB for {size / 1e6:.1f} MB of text"


def test_a_parquet_corpus_is_read_a_batch_at_a_time(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"parquet sentence {i}" if i % 10 else None for i in range(100)]
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": texts, "n": list(range(100))}), path, row_group_size=16)
    monkeypatch.setattr(pq.ParquetFile, "read", lambda *a, **k: pytest.fail("the whole file was read"))
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: pytest.fail("the whole file was read"))
    got, stats = read_corpus(path)
    assert got == [t for t in texts if t] and dict(stats.skipped) == {"missing": 10}
    with pytest.raises(ValueError, match=r"has no column 'body' \(columns: \['text', 'n'\]\)"):
        read_corpus(path, column="body")


def _reference(raw: bytes, min_words: int, max_chars: int | None, dedupe: bool) -> tuple[list[str], dict]:
    """The line-by-line reader's rules, written plainly: what the Arrow reader must give."""
    kept, skipped = [], {}
    pieces = raw.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    for piece in pieces:
        try:
            value = piece.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            reason = "undecodable"
        else:
            sentence = value.strip()
            reason = ("undecodable" if "\x00" in value else "empty" if not value else "whitespace" if not sentence
                      else "too_long" if max_chars is not None and len(sentence) > max_chars
                      else "too_short" if len(sentence.split()) < min_words
                      else "duplicate" if dedupe and sentence in kept else None)
        if reason is None:
            kept.append(sentence)
        else:
            skipped[reason] = skipped.get(reason, 0) + 1
    return kept, skipped


PIECES = ["word", "caf\u00e9", "\u65e5\u672c", " ", "\t", "\u2003", "\u00a0", "\x1c", "\x85", "\r", "\x00", "\ufeff",
          "\U0001f600", "two words", ""]


@pytest.mark.parametrize("block", [5, 64, 1 << 20])
@pytest.mark.parametrize("min_words,max_chars,dedupe", [(1, None, False), (2, 12, True), (3, 30, True)])
def test_the_arrow_text_reader_keeps_and_counts_as_the_line_by_line_rules(tmp_path, monkeypatch, block, min_words,
                                                                          max_chars, dedupe):
    """Random lines of tricky pieces (Unicode whitespace, CR, NUL, BOM, bad UTF-8), blocks smaller than a line
    and none: the same sentences, in the same order, and the same counts as the plain rules."""
    monkeypatch.setattr(corpus, "BLOCK_BYTES", block)
    rng = random.Random(block * 7 + min_words)
    lines = []
    for _ in range(400):
        roll = rng.random()
        if roll < 0.05:
            lines.append(b"\xff bad \xc3\x28 bytes" if roll < 0.03 else "caf\u00e9".encode("latin-1"))
        elif roll < 0.15 and lines:
            lines.append(rng.choice(lines))
        else:
            lines.append("".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6))).encode())
    for ending in (b"\n", b""):  # with and without a final newline
        raw = b"\n".join(lines) + ending
        path = tmp_path / "c.txt"
        path.write_bytes(raw)
        expected, skipped = _reference(raw, min_words, max_chars, dedupe)
        got, stats = read_corpus(path, min_words=min_words, max_chars=max_chars, dedupe=dedupe)
        assert got == expected
        assert dict(stats.skipped) == skipped and stats.read == len(expected) + sum(skipped.values())


def test_byte_index_by_hand():
    """Ranges [3, 5), [0, 1), an empty one and [7, 10): 3 4 0 7 8 9."""
    starts, sizes = np.array([3, 0, 5, 7]), np.array([2, 1, 0, 3])
    assert corpus._byte_index(starts, sizes).tolist() == [3, 4, 0, 7, 8, 9]
    assert corpus._byte_index(np.array([4]), np.array([0])).tolist() == []
