"""SDA Table 9's Random Insertion view: one of PI's marks after a uniformly drawn word, fixed by the seed."""

from __future__ import annotations

import re

import numpy as np

from augcse.text.views.random_insertion import random_insertion

MARKS = (",", ".", ";", "!")  # the marks of the authors' PI.py, written here so a change to the module's set fails


def _strip_one_mark(original: str, augmented: str) -> tuple[int, str]:
    """Where one mark was inserted into ``original`` to give ``augmented``, and the mark."""
    assert len(augmented) == len(original) + 1
    at = next((i for i, (a, b) in enumerate(zip(original, augmented)) if a != b), len(original))
    assert augmented[:at] + augmented[at + 1:] == original
    return at, augmented[at]


def test_the_view_inserts_the_marks_pi_inserts() -> None:
    from augcse.text.augment import sda
    from augcse.text.views import random_insertion as view

    assert view.MARKS is sda.MARKS and tuple(sda.MARKS) == MARKS


def test_one_mark_of_pis_after_a_word_end() -> None:
    sentence = "The quick brown fox  jumps over the dog"
    ends = {m.end() for m in re.finditer(r"\S+", sentence)}
    for seed in range(50):
        out = random_insertion(sentence, np.random.default_rng(seed))
        at, mark = _strip_one_mark(sentence, out)
        assert mark in MARKS and at in ends
        assert out.split() != sentence.split()


def test_the_draw_is_fixed_by_the_seed_and_uniform_over_words_and_marks() -> None:
    sentence = "a b c d"
    assert random_insertion(sentence, np.random.default_rng(7)) == random_insertion(sentence, np.random.default_rng(7))
    # the rule on a fixed seed, by hand: numpy's choice of one of 4 word ends, then one of 4 marks
    rng = np.random.default_rng(7)
    word = int(rng.choice(4, size=1, replace=False)[0])
    mark = MARKS[int(rng.integers(0, 4, size=1)[0])]
    words = sentence.split()
    words[word] += mark
    assert random_insertion(sentence, np.random.default_rng(7)) == " ".join(words)
    positions, marks = [], []
    for seed in range(4000):
        at, mark = _strip_one_mark(sentence, random_insertion(sentence, np.random.default_rng(seed)))
        positions.append(at)
        marks.append(mark)
    assert sorted(set(positions)) == [1, 3, 5, 7]
    for counts in (np.unique(positions, return_counts=True)[1], np.unique(marks, return_counts=True)[1]):
        assert len(counts) == 4 and counts.min() > 850  # about 1000 each


def test_several_insertions_go_after_distinct_words_and_empty_text_is_kept() -> None:
    out = random_insertion("one two three", np.random.default_rng(1), insertions=5)
    assert [w.rstrip("".join(MARKS)) for w in out.split()] == ["one", "two", "three"]
    assert all(w[-1] in MARKS for w in out.split())  # three words: three marks, one after each
    assert random_insertion("   ", np.random.default_rng(1)) == "   "


def test_the_view_writes_the_positive_column_independent_of_batching(tmp_path) -> None:
    from datasets import Dataset

    from augcse.text.views import build_views
    from augcse.text.views.base import ViewContext

    sentences = [f"sentence number {i} is here." for i in range(2500)]
    context = ViewContext(model=None, seed=3, run_dir=tmp_path)
    built = build_views(Dataset.from_dict({"text": sentences}), [{"name": "random_insertion"}], context)
    assert built.column_names == ["anchor", "positive"]
    positives = built["positive"]
    for i in (0, 999, 1000, 2499):
        assert positives[i] == random_insertion(sentences[i], _row_rng(3, i))
    assert all(len(p) == len(s) + 1 for p, s in zip(positives, sentences))
    half = build_views(Dataset.from_dict({"text": sentences}), [{"name": "random_insertion", "proportion": 0.5}],
                       context)["positive"]
    changed = sum(p != s for p, s in zip(half, sentences))
    assert 1100 < changed < 1400


def _row_rng(seed: int, index: int):
    rng = np.random.default_rng((seed, index))
    rng.random()  # the proportion draw comes first
    return rng
