"""Shared artefacts built by one process while the others wait: two processes building one augmentation cache at
once (as torchrun's ranks do) write each shard once and read the same cache as one process; a waiter that waits
too long, for a lock or for another process's files, ends in one line."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from augcse.core.sole_builder import BuildWaitTimeout, lock_file, sole_builder
from augcse.text import augment
from augcse.text.augment import cache
from augcse.text.retrieval_shards import wait_for

NAMES = ["RandomSwap", "ContractionExpansions"]


@pytest.fixture(scope="module")
def wiki(data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()
    return [s for s in lines[:48] if s.strip()]


def _build(sentences, out, log, ready) -> None:
    """One of two processes: record every shard this process writes, start with the other, build."""
    original = cache._build_shard

    def recorded(out_dir, index, *args):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()} {index}\n")
        time.sleep(0.1)  # the two builds overlap whatever the machine's speed
        return original(out_dir, index, *args)

    cache._build_shard = recorded
    ready.wait()
    dataset = augment.build_cache(sentences, NAMES, out, seed=3, shard_size=8, progress=False)
    (out.parent / f"{os.getpid()}.txt").write_text("\n".join(dataset["RandomSwap"]))


def test_two_processes_build_one_cache_once(tmp_path, wiki):
    out, log = tmp_path / "shared" / "cache", tmp_path / "writes.log"
    context = multiprocessing.get_context("fork")
    ready = context.Barrier(2)
    workers = [context.Process(target=_build, args=(wiki, out, log, ready)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    writes = [line.split()[1] for line in log.read_text().splitlines()]
    n_shards = -(-len(wiki) // 8)
    assert sorted(writes) == [str(i) for i in range(n_shards)], "each shard is written once, by one process"
    one = augment.build_cache(wiki, NAMES, tmp_path / "alone", seed=3, shard_size=8, progress=False)
    for worker in workers:  # both read what one process builds, under the same key
        assert (out.parent / f"{worker.pid}.txt").read_text() == "\n".join(one["RandomSwap"])
    assert augment.load_cache(out)["ContractionExpansions"] == one["ContractionExpansions"]
    assert (out / "manifest.json").read_text() == (tmp_path / "alone" / "manifest.json").read_text()


def test_a_waiter_gives_up_in_one_line(tmp_path, wiki):
    out = tmp_path / "cache"
    with sole_builder(out, "the augmentation cache"):  # another process building it (filelock: per-object locks)
        with pytest.raises(BuildWaitTimeout) as caught:
            augment.build_cache(wiki, NAMES, out, progress=False, wait_seconds=0.2)
    message = str(caught.value)
    assert "\n" not in message and str(out) in message and str(lock_file(out)) in message
    assert "waited 0 s" in message and "training.ddp_timeout" in message
    assert augment.build_cache(wiki, NAMES, out, progress=False)["text"] == wiki  # the lock is free again


def test_waiting_for_files_gives_up_in_one_line(tmp_path):
    with pytest.raises(BuildWaitTimeout) as caught:
        wait_for([tmp_path / "neighbours.npz"], "the neighbour lists", timeout=0.1)
    message = str(caught.value)
    assert "\n" not in message and "neighbours.npz" in message and str(tmp_path) in message
