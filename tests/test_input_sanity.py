"""Degenerate input (docs/FAULTS.md, "Degenerate input") is refused in one line naming the file, before a model
trains or scores on it; a corpus of mostly repeats is flagged."""

from __future__ import annotations

import logging
import random

import pytest

from augcse.commands.main import main
from conftest import tiny_cls_recipe

NO_EVAL = {"dev": None, "before": None, "after": None}


def wiki(data_dir, n: int) -> list[str]:
    return (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:n]


def corpora(data_dir) -> dict:
    lines = wiki(data_dir, 40)
    noise = random.Random(0)
    return {
        "same header twice": ("c.csv", "text,text\n" + "".join(f"{a},{b}\n" for a, b in zip(lines, lines[1:])),
                              "the header names column 'text' 2 times"),
        "one sentence repeated": ("c.txt", "The cat sleeps on the mat.\n" * 500, "only 1 distinct lines"),
        "random bytes": ("c.txt", bytes(noise.randrange(256) for _ in range(200_000)), "undecodable or malformed"),
        "symbols": ("c.txt", "".join(f"{i} -- {i * 7} ## {i % 13}\n" for i in range(300)), "are not text"),
    }


@pytest.mark.parametrize("case", ["same header twice", "one sentence repeated", "random bytes", "symbols"])
def test_degenerate_corpus_refused(tmp_path, tiny_model_dir, data_dir, capsys, case):
    name, content, said = corpora(data_dir)[case]
    corpus = tmp_path / name
    corpus.write_bytes(content if isinstance(content, bytes) else content.encode())
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "d", NO_EVAL, {"max_steps": 2})
    assert main(["train", str(recipe), f"data.corpus={corpus}", "data.limit=null"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(corpus) in err[0] and said in err[0], err
    assert not (tmp_path / "runs" / "d" / "final").exists()


def test_mostly_repeats_flagged(tmp_path, tiny_model_dir, data_dir, caplog):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(wiki(data_dir, 10) * 4) + "\n")
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "m", NO_EVAL, {"max_steps": 1})
    with caplog.at_level(logging.WARNING):
        assert main(["train", str(recipe), f"data.corpus={corpus}", "data.limit=null"]) == 0
    assert any("10 distinct lines among the first 40" in r.getMessage() and str(corpus) in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize(("rows", "said"), [
    ([("a b", "x"), ("c d", "x"), ("e f", ""), ("g h", ""), ("i j", "y"), ("k l", "y")], "2 rows have an empty label"),
    ([(f"text {i}", f"l{i}") for i in range(6)], "6 labels for 6 rows"),
    ([("a b", "x"), ("c d", "y")], "2 labels for 2 rows"),
    ([("a b", "x"), ("c d", "x")], "needs at least 2 distinct labels"),
])
def test_labelled_sample_that_cannot_score_refused(tmp_path, tiny_model_dir, capsys, rows, said):
    sample = tmp_path / "s.csv"
    sample.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in rows))
    assert main(["eval", str(tiny_model_dir), "--tasks", f"clustering:{sample}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"clustering:{sample}" in err[0] and said in err[0], err


def test_labelled_sample_with_a_column_named_twice_refused(tmp_path, tiny_model_dir, capsys):
    sample = tmp_path / "s.csv"
    sample.write_text("text,label,label\n" + "".join(f"t {i},a,b\n" for i in range(8)))
    assert main(["eval", str(tiny_model_dir), "--tasks", f"clustering:{sample}"]) == 2
    assert "the header names column 'label' 2 times" in capsys.readouterr().err
