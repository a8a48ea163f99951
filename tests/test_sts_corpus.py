"""ConSERT's unsupervised corpus: the seven STS tasks' sentences, as the authors' data_utils.py loads them."""

from __future__ import annotations

import pytest

from augcse.assets.resolve import has_data
from augcse.text import sts_corpus

pytestmark = pytest.mark.skipif(not has_data(f"{sts_corpus.ROOT}/SICK/SICK_train.txt"), reason="needs the data directory")


def test_the_authors_89192_sentences_in_their_order(tmp_path):
    out = tmp_path / "sts.txt"
    assert sts_corpus.main(["--output", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 89192  # ConSERT README note 2
    assert all(lines) and not any("\t" in line for line in lines)
    assert lines[0].startswith("the problem likely will mean corrective changes")  # STS12 MSRpar, first pair
    sick = (4500 + 500 + 4927) * 2
    assert lines[-sick].startswith("A group of kids is playing in a yard")  # SICK train's first pair, header skipped


def test_scores_are_never_read():
    scores = {"5.000", "4.750", "4.5", "3.6", "NEUTRAL", "ENTAILMENT"}
    assert not scores & set(sts_corpus.sts_sentences())
