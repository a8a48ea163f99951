"""Encoding CARDS' retrieval corpus in shards: the encoding, not the search, is what costs at 10^6+ sentences.

The deduplicated corpus is cut into ``shards`` contiguous row ranges on encoding-batch boundaries, so every
batch, and with it every embedding, is the one a single process would compute; concatenated in order the
shards are that process's matrix, and the index and neighbour lists built from them are its lists. Each
shard is written to the cache folder by whoever encodes it (a torchrun rank, a separate job naming its
``shard``, or one process encoding the missing ones in turn, which also resumes a stopped build); shard 0's
process merges them. The processes meet through files only, so the cache folder must be one they all see.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from augcse.core.sole_builder import WAIT_SECONDS, BuildWaitTimeout, wait_message

logger = logging.getLogger(__name__)

POLL_SECONDS = 2.0  # how often a process waiting for another's file looks for it
REPORT_SECONDS = 60.0  # how often it says what it is waiting for


def resolve_shards(shards: int | None, shard: int | None) -> tuple[int, int | None]:
    """(shard count, this process's shard or None: encode every missing shard in turn).

    ``shards`` None: torchrun's ``WORLD_SIZE`` when all its ranks are on this node (they share its disk),
    else 1. ``shard`` None: the torchrun ``RANK`` when the shards are the ranks."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if shards is None:
        one_node = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)) or world) == world
        shards = world if one_node else 1
    if shard is None and shards > 1 and shards == world and "RANK" in os.environ:
        shard = int(os.environ["RANK"])
    if shard is not None and not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is not one of the {shards} shards (0 to {shards - 1})")
    return shards, shard


def shard_rows(n: int, batch_size: int, shards: int) -> list[range]:
    """``shards`` contiguous row ranges of ``n`` rows, cut between encoding batches (some may be empty)."""
    batches = -(-n // batch_size)
    edges = [min(n, (batches * i // shards) * batch_size) for i in range(shards + 1)]
    return [range(edges[i], edges[i + 1]) for i in range(shards)]


def shard_file(folder: Path, shard: int, shards: int) -> Path:
    return folder / f"embeddings-{shard:05d}-of-{shards:05d}.npy"


def save_array(path: Path, array: np.ndarray) -> None:
    """Write ``array`` so that a reader sees the whole file or none (a temporary name, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with partial.open("wb") as handle:
        np.save(handle, array)
    os.replace(partial, path)


def wait_for(paths: Sequence[Path], what: str, timeout: float | None = None) -> None:
    """Block until every path exists (written by other processes), saying now and then what is missing;
    after ``timeout`` seconds (None: WAIT_SECONDS) raise :class:`BuildWaitTimeout` (one line)."""
    seconds = WAIT_SECONDS if timeout is None else timeout
    started = last = time.monotonic()
    while missing := [p for p in paths if not p.exists()]:
        if time.monotonic() - started >= seconds:
            raise BuildWaitTimeout(wait_message(what, missing[0].parent, seconds,
                                                f"the other processes to write {len(missing)} file(s), e.g. "
                                                f"{missing[0].name} (the cache folder must be one they all see)"))
        if time.monotonic() - last >= REPORT_SECONDS:
            last = time.monotonic()
            logger.info("retrieval: waited %.0f s for %s: %d file(s) missing, e.g. %s (the other processes write "
                        "them; the cache folder must be one they all see)", last - started, what, len(missing),
                        missing[0])
        time.sleep(min(POLL_SECONDS, max(0.0, seconds - (time.monotonic() - started))))


def merged(folder: Path, shards: int) -> np.ndarray:
    """The shards' embeddings concatenated in shard order: the single-process matrix."""
    parts = [np.load(shard_file(folder, i, shards), allow_pickle=False) for i in range(shards)]
    return np.concatenate([part for part in parts if len(part)])  # an empty shard has no width
