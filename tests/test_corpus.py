"""Bad corpus lines are skipped and counted by reason; they never stop a run."""

from __future__ import annotations

import gzip
import json

import pytest

from augcse.text.corpus import load_corpus, read_corpus


def test_bad_lines_are_skipped_and_counted(tmp_path, data_dir):
    real = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:20]
    raw = b"\n".join(
        [s.encode() for s in real[:10]]
        + [b"", b"   \t ", b"\xff\xfe broken bytes \xc3\x28", b"x" * 600, real[0].encode(), b"one"]
        + [s.encode() for s in real[10:]]
    ) + b"\n"
    path = tmp_path / "c.txt"
    path.write_bytes(raw)
    dataset, stats = load_corpus(path, dedupe=True, min_words=2, max_chars=500)
    assert dataset.column_names == ["text"]
    assert dataset["text"] == real
    assert stats.read == 26 and stats.kept == 20
    assert dict(stats.skipped) == {"empty": 1, "whitespace": 1, "undecodable": 1, "too_long": 1,
                                   "duplicate": 1, "too_short": 1}
    assert "undecodable 1" in stats.summary()


def test_gzip_jsonl_csv_and_limit_shuffle(tmp_path):
    sentences = [f"sentence number {i} here" for i in range(50)]
    gz = tmp_path / "c.txt.gz"
    with gzip.open(gz, "wt") as handle:
        handle.write("\n".join(sentences) + "\n")
    assert read_corpus(gz)[0] == sentences

    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("\n".join([json.dumps({"sentence": s}) for s in sentences[:3]] + ["{not json", json.dumps({"other": 1})]))
    got, stats = read_corpus(jsonl, column="sentence")
    assert got == sentences[:3] and stats.skipped == {"malformed": 1, "missing": 1}

    csv_path = tmp_path / "c.csv"
    csv_path.write_text('text,label\n"a, quoted sentence",1\nplain one,0\n')
    assert read_corpus(csv_path)[0] == ["a, quoted sentence", "plain one"]
    with pytest.raises(ValueError, match="no column 'sentence'"):
        read_corpus(csv_path, column="sentence")

    first, _ = read_corpus(gz, limit=10, shuffle=True, seed=1)
    again, stats = read_corpus(gz, limit=10, shuffle=True, seed=1)
    other, _ = read_corpus(gz, limit=10, shuffle=True, seed=2)
    assert first == again and first != other and len(first) == 10 and stats.skipped["over_limit"] == 40


def test_unusable_corpus_and_bad_format_fail_clearly(tmp_path):
    empty = tmp_path / "e.txt"
    empty.write_text("\n  \n")
    with pytest.raises(ValueError, match="no usable sentence"):
        read_corpus(empty)
    docx = tmp_path / "x.docx"
    docx.write_text("x")
    with pytest.raises(ValueError, match="unsupported format '.docx'"):
        read_corpus(docx)
    with pytest.raises(FileNotFoundError):
        read_corpus(tmp_path / "missing.txt")


@pytest.mark.parametrize("data, says", [
    ("hello world of words\nanother line here\n".encode("utf-16"), "it is UTF-16 text (byte-order mark FF FE), not "
                                                                   "UTF-8: convert it (e.g. iconv -f UTF-16 -t UTF-8)"),
    ("hello world of words\nanother line here\n".encode("utf-16-le"), "it looks like UTF-16 text without a byte-order "
                                                                      "mark"),
    (b"abc def\x00\x00 ghi\n" * 10, "it holds NUL bytes (20 in its first 140 bytes): a binary file, not text"),
])
def test_utf16_and_nul_files_are_told_what_they_are_not_latin1(tmp_path, data, says):
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    with pytest.raises(ValueError) as info:
        read_corpus(path)
    assert says in str(info.value) and "latin1" not in str(info.value)


def test_a_latin1_csv_and_an_empty_file_are_told_what_they_are(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"text\ncaf\xe9 au lait\nna\xefve sentence here\n")
    with pytest.raises(ValueError) as info:
        read_corpus(latin)
    assert str(info.value) == (f"corpus {latin} has no usable sentence (read 2 lines, kept 0, skipped: undecodable 2); "
                               "it is not UTF-8 text: convert it (e.g. iconv -f latin1 -t utf-8 for latin-1)")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"\(read 0 lines, kept 0, skipped: none\); the file is empty$"):
        read_corpus(empty)


SENTENCES = ["the first sentence here", "caf\u00e9 and \u65e5\u672c in the second", "a third one", "and the fourth"]
LINE_ENDS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}
WRITERS = {  # a corpus of SENTENCES in each format that has line ends, and the column that holds them
    "txt": lambda path, end: path.write_bytes(end.join(SENTENCES + [""]).encode()),
    "txt.gz": lambda path, end: path.write_bytes(gzip.compress(end.join(SENTENCES + [""]).encode())),
    "jsonl": lambda path, end: path.write_bytes(end.join([json.dumps({"text": s}) for s in SENTENCES] + [""]).encode()),
}


@pytest.mark.parametrize("block", [8, 1 << 20])  # 8: every line longer than a block
@pytest.mark.parametrize("end", sorted(LINE_ENDS))
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_lf_crlf_and_old_mac_cr_line_ends_give_the_same_lines(tmp_path, monkeypatch, kind, end, block):
    """A file of CR line ends (a CR and no LF in its head) is split at CR, not read as one line too long."""
    import augcse.text.corpus as corpus

    monkeypatch.setattr(corpus, "BLOCK_BYTES", block)
    path = tmp_path / f"corpus.{kind}"
    WRITERS[kind](path, LINE_ENDS[end])
    got, stats = read_corpus(path, max_chars=30)
    assert got == SENTENCES and stats.read == 4 and not stats.skipped


def test_a_cr_inside_an_lf_file_stays_inside_its_line(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"one line\rwith a CR inside\nthe next line\n")
    assert read_corpus(path)[0] == ["one line\rwith a CR inside", "the next line"]


@pytest.mark.parametrize("value, kind", [(3, "a number"), (2.5, "a number"), (True, "a boolean"),
                                         (["a", "list"], "a list"), ({"an": "object"}, "an object")])
def test_a_jsonl_value_that_is_not_text_is_named_by_line_and_key(tmp_path, caplog, value, kind):
    path = tmp_path / "corpus.jsonl"
    rows = [{"body": value}, {"body": value}, {"other": "x"}]
    path.write_text("\n".join(["", *map(json.dumps, rows)]) + "\n")
    with pytest.raises(ValueError) as info:
        read_corpus(path, column="body")
    assert str(info.value) == (f"corpus {path} has no usable sentence (read 4 lines, kept 0, skipped: empty 1, "
                               f"missing 1, not_text 2); the value at line 2 of key 'body' is {kind}, not text")

    path.write_text("\n".join(map(json.dumps, [{"body": "a real sentence"}, {"body": value}])) + "\n")
    got, stats = read_corpus(path, column="body")
    assert got == ["a real sentence"] and dict(stats.skipped) == {"not_text": 1}
    assert f"the value at line 2 of key 'body' is {kind}, not text" in caplog.text
