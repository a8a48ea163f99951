"""Views and the augmentation cache in chunks: the same outputs as whole-corpus code, Python memory bounded.

The memory tests trace Python allocations (``tracemalloc``) while a view or a cache is built over a Dataset
of 50,000 generated lines: code that makes a list of the corpus holds every line as a ``str`` (more than the
text's own size), code that reads slices holds one batch. Arrow buffers are not Python allocations.
"""

from __future__ import annotations

import gc
import random
import tracemalloc

import numpy as np
import pytest
from datasets import Dataset

from augcse.text import augment
from augcse.text.augment.cache import cache_key, text_batches
from augcse.text.views import VIEWS
from augcse.text.views import augcse as augcse_module
from augcse.text.views import sda as sda_module
from augcse.text.views import tsdae as tsdae_module
from augcse.text.views.base import RowDraws, ViewContext

WORDS = ("the a cat dog is was not never can will run quickly slowly house big small river stone "
         "and or but because green old new city").split()

# computed by the list-joining cache_key of before the streaming one (commit 1e9f21c): a cache built then is reused
PINNED_KEY = "a9887742e25785b73a2d271d383fcb68cccffac57e37c612034fa7389959ad66"
PINNED_CORPUS = [f"Sentence number {i} is here." for i in range(7)] + ["Ünïcode – line", ""]


def _lines(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))).capitalize() + "."
            for _ in range(n)]


def test_cache_key_of_an_existing_cache_is_unchanged() -> None:
    args = (["RandomDeletion", "Negation"], {"RandomDeletion": {"p": 0.2}}, 3)
    assert cache_key(PINNED_CORPUS, *args) == PINNED_KEY
    assert cache_key(Dataset.from_dict({"text": PINNED_CORPUS}), *args) == PINNED_KEY
    assert cache_key(iter(PINNED_CORPUS), *args) == PINNED_KEY  # a stream, hashed as it comes


def test_text_batches_cover_the_slice_in_order() -> None:
    lines = _lines(23)
    ds = Dataset.from_dict({"anchor": lines})
    for source in (lines, ds, iter(lines)):
        assert [s for b in text_batches(source, 5) for s in b] == lines
    assert [s for b in text_batches(ds, 4, 3, 17) for s in b] == lines[3:17]
    assert [len(b) for b in text_batches(lines, 4, 3, 17)] == [4, 4, 4, 2]


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_row_draws_in_batches_equal_one_shot(k: int) -> None:
    n = 5003
    rng = np.random.default_rng(11)
    choice, uniform = rng.integers(0, k, size=n), rng.random(n)
    draws = RowDraws(11, n, k, uniform=True)
    got = [draws.take(m) for m in (1, 2, 999, 1000, 3, 2998)]
    assert np.array_equal(np.concatenate([c for c, _ in got]), choice)
    assert np.array_equal(np.concatenate([u for _, u in got]), uniform)


def test_build_cache_from_a_dataset_equals_the_list(tmp_path) -> None:
    lines = _lines(37)
    names = ["RandomDeletion", "RandomSwap"]
    from_list = augment.build_cache(lines, names, tmp_path / "a", seed=4, shard_size=5, progress=False)
    from_ds = augment.build_cache(Dataset.from_dict({"text": lines}), names, tmp_path / "b", seed=4, shard_size=5,
                                  progress=False)
    assert from_ds.to_dict() == from_list.to_dict()
    assert from_ds["RandomDeletion"] == augment.get("RandomDeletion").apply(lines, seed=4)
    assert (tmp_path / "b" / "shards" / "00007").is_dir()  # 37 lines in shards of 5: 8 shards


def test_build_cache_in_processes_from_a_dataset(tmp_path) -> None:
    lines = _lines(40)
    ds = augment.build_cache(Dataset.from_dict({"text": lines}), ["RandomSwap"], tmp_path / "c", seed=1,
                             shard_size=3, n_process=2, progress=False)
    assert ds["text"] == lines and ds["RandomSwap"] == augment.get("RandomSwap").apply(lines, seed=1)


@pytest.fixture()
def small_batches(monkeypatch):
    """Batches of 4 rows, so the references below are crossed by many batch boundaries."""
    for module in (augcse_module, sda_module, tsdae_module):
        monkeypatch.setattr(module, "MAP_BATCH", 4)


def test_augcse_sample_matches_a_whole_corpus_reference(tmp_path, small_batches) -> None:
    lines = _lines(30)
    lines[6] = "Word."  # RandomDeletion keeps a one-word sentence: unchanged
    names = ["RandomDeletion", "RandomSwap"]
    out = VIEWS["augcse_sample"].builder(Dataset.from_dict({"text": lines}), ViewContext(None, cache_dir=tmp_path),
                                         augmentations=names, seed=9)
    outputs = {n: augment.get(n).apply(lines, seed=9) for n in names}
    choice = np.random.default_rng(9).integers(0, len(names), size=len(lines))
    texts, labels = [], []
    for row, index in enumerate(choice):
        new = outputs[names[index]][row]
        ok = new != lines[row] and bool(new.strip())
        texts.append(new if ok else lines[row])
        labels.append(int(index) if ok else len(names))
    assert out["augmented"] == texts and out["label"] == labels and out["anchor"] == lines
    assert len(names) in labels
    kept = VIEWS["augcse_sample"].builder(Dataset.from_dict({"text": lines}), ViewContext(None, cache_dir=tmp_path),
                                          augmentations=names, seed=9, drop_unchanged=True, label_column=None)
    assert kept.column_names == ["anchor", "augmented"]
    assert kept["augmented"] == [t for t, label in zip(texts, labels) if label != len(names)]


def test_sda_matches_a_whole_corpus_reference(tmp_path, small_batches) -> None:
    lines = ["The cat can run.", "It is not green.", "Dogs will never sleep.", "A house.", "She is old.",
             "We can go home now.", "They run quickly.", "He was here.", "The river is big.", "It will rain."]
    out = VIEWS["sda"].builder(Dataset.from_dict({"text": lines}), ViewContext(None, cache_dir=tmp_path),
                               proportion=0.7, seed=5)
    rules = ["PunctuationInsertion", "ModalVerbs", "DoubleNegation"]
    outputs = {n: augment.get(n).apply(lines, seed=5) for n in [*rules, "Negation"]}
    rng = np.random.default_rng(5)
    choice, uniform = rng.integers(0, 3, size=len(lines)), rng.random(len(lines))
    expected = []
    for row, (index, u) in enumerate(zip(choice, uniform)):
        new = outputs[rules[index]][row]
        expected.append(new if u < 0.7 and new != lines[row] and new.strip() else lines[row])
    assert out["positive"] == expected and out["negation"] == outputs["Negation"]
    assert expected != lines


def test_tsdae_noise_matches_one_generator_over_the_corpus(small_batches) -> None:
    lines = _lines(21)
    out = VIEWS["tsdae_noise"].builder(Dataset.from_dict({"text": lines}), ViewContext(None, seed=3))
    rng = np.random.default_rng(3)
    assert out["noisy"] == [tsdae_module.delete_words(t, 0.6, rng) for t in lines]


N_MEMORY = 50_000


@pytest.fixture(scope="module")
def big_corpus() -> tuple[Dataset, int]:
    """A Dataset of 50,000 lines (held by Arrow) and the UTF-8 size of its text."""
    lines = _lines(N_MEMORY, seed=1)
    size = sum(len(s.encode()) for s in lines)
    ds = Dataset.from_dict({"text": lines})
    del lines
    gc.collect()
    return ds, size


def _traced_peak(fn) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_build_cache_holds_a_shard_not_the_corpus(tmp_path, big_corpus) -> None:
    ds, size = big_corpus
    peak = _traced_peak(lambda: augment.build_cache(ds, ["RandomDeletion"], tmp_path / "c", shard_size=1000,
                                                    progress=False))
    assert peak < size / 3, f"traced peak {peak / 1e6:.1f} MB for {size / 1e6:.1f} MB of text"


@pytest.mark.parametrize("view, params", [("dropout_copy", {}),
                                          ("augcse_sample", {"augmentations": ["RandomDeletion", "RandomSwap"]})])
def test_view_holds_a_batch_not_the_corpus(tmp_path, big_corpus, view, params) -> None:
    ds, size = big_corpus
    context = ViewContext(None, cache_dir=tmp_path)
    if view == "augcse_sample":  # the cache first (its shards are tested above): this is about the view's columns
        VIEWS[view].builder(ds, context, **params)
    result = {}
    peak = _traced_peak(lambda: result.setdefault("ds", VIEWS[view].builder(ds, context, **params)))
    assert len(result["ds"]) == N_MEMORY
    assert peak < size / 3, f"{view}: traced peak {peak / 1e6:.1f} MB for {size / 1e6:.1f} MB of text"
