"""Which lines were seen before, remembered by digest so that deduplicating a corpus never holds its strings.

Each distinct line costs 16 bytes: its XXH3-128 digest as two 64-bit numbers (head and tail) in sorted NumPy
runs, ordered by head (which is what is searched: NumPy searches numbers several times faster than 16-byte
strings). Runs merge like a binary counter (a run absorbs the next one once that is as large), so there are
O(log n) runs to search; a merge places the newer run's heads among the older's by search, with no sort, and
holds up to 29 bytes a line while it runs; a filter of the heads seen adds 2 bytes a line (:class:`_HeadFilter`).
A Python ``set`` of the digests would cost about 80 bytes a line.
Two distinct lines share a digest with probability about n²/2¹²⁹: nil for any corpus (10⁸ lines: 10⁻²³).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import xxhash

DIGEST = np.dtype("S16")  # fixed-width bytes: sorted and compared on all 16 bytes


def digests(lines: Sequence[str] | pa.Array) -> np.ndarray:
    """The 16-byte XXH3-128 digest of each line's UTF-8 bytes, as one array (an Arrow array's bytes are hashed as
    they are, never decoded). XXH3 is not a cryptographic hash: a corpus built to collide can make dedupe drop
    a line, nothing more."""
    raw = (lines.cast(pa.large_binary()).to_pylist() if isinstance(lines, (pa.Array, pa.ChunkedArray))
           else [line.encode("utf-8") for line in lines])
    return np.frombuffer(b"".join(map(xxhash.xxh3_128_digest, raw)), dtype=DIGEST)


def halves(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each digest's first and last 8 bytes as big-endian numbers (head, tail): digests sorted by (head, tail) are
    sorted as bytes."""
    words = keys.view(">u8")
    return words[::2].astype(np.uint64), words[1::2].astype(np.uint64)


class SeenLines:
    """First occurrences over a stream of line batches, in 18 bytes per distinct line (16 of digest, 2 of filter)."""

    def __init__(self) -> None:
        self._heads: list[np.ndarray] = []  # each run's heads, sorted; runs disjoint, sizes non-increasing
        self._tails: list[np.ndarray] = []  # each run's tails, beside its heads
        self._filter = _HeadFilter()

    def __len__(self) -> int:
        return sum(len(run) for run in self._heads)

    def first_seen(self, lines: Sequence[str] | pa.Array) -> np.ndarray:
        """A mask of the lines seen neither earlier in this batch nor in any earlier batch; remembers them."""
        heads, tails = halves(digests(lines))
        order = np.lexsort((tails, heads))  # by digest; equal digests in line order (lexsort is stable)
        heads, tails = heads[order], tails[order]
        new = np.ones(len(order), dtype=bool)  # in sorted order from here on
        new[1:] = (heads[1:] != heads[:-1]) | (tails[1:] != tails[:-1])  # the first of equal lines in the batch
        ask = np.flatnonzero(new & self._filter.may_hold(heads))  # most new lines are told apart here
        for run_heads, run_tails in zip(self._heads, self._tails):
            new[ask] &= ~_found(run_heads, run_tails, heads[ask], tails[ask])
        if new.any():
            self._push(heads[new], tails[new])
            self._filter.add(heads[new], self._heads)
        fresh = np.zeros(len(order), dtype=bool)
        fresh[order] = new
        return fresh

    def _push(self, heads: np.ndarray, tails: np.ndarray) -> None:
        self._heads.append(heads)
        self._tails.append(tails)
        while len(self._heads) > 1 and len(self._heads[-1]) >= len(self._heads[-2]):
            newer = self._heads.pop()
            # where each of the newer run's heads goes among the older run's (and its own earlier ones)
            to = np.searchsorted(self._heads[-1], newer, side="right") + np.arange(len(newer))
            for runs, newest in ((self._heads, newer), (self._tails, self._tails.pop())):
                older = runs.pop()
                merged = np.empty(len(older) + len(newest), dtype=np.uint64)
                merged[to] = newest
                rest = np.ones(len(merged), dtype=bool)
                rest[to] = False
                merged[rest] = older
                del older, rest
                runs.append(merged)
            del newer, newest


def _found(run_heads: np.ndarray, run_tails: np.ndarray, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """Which of the (sorted) digests ``heads``/``tails`` the run holds. A run's heads are sorted; among equal heads
    (two digests sharing their first 8 bytes: about never) its tails are in no order, so those are scanned."""
    at = np.minimum(np.searchsorted(run_heads, heads), len(run_heads) - 1)
    same_head = run_heads[at] == heads
    found = same_head & (run_tails[at] == tails)
    for k in np.flatnonzero(same_head & ~found):
        end = np.searchsorted(run_heads, heads[k], side="right")
        found[k] = bool((run_tails[at[k]:end] == tails[k]).any())
    return found


class _HeadFilter:
    """One bit per slot, set for the heads seen, :data:`BITS_PER_LINE` slots a line: a head whose bit is clear was
    never seen, which tells most new lines apart without searching the runs (about 6 % of new lines need the
    search). Doubled, and refilled from the runs' heads, as lines are added."""

    BITS_PER_LINE = 16

    def __init__(self) -> None:
        self.bits = 13
        self.slots = np.zeros(1 << (self.bits - 3), dtype=np.uint8)
        self.held = 0

    def _slot(self, heads: np.ndarray) -> np.ndarray:
        return heads >> np.uint64(64 - self.bits)

    def may_hold(self, heads: np.ndarray) -> np.ndarray:
        slot = self._slot(heads)
        return ((self.slots[slot >> np.uint64(3)] >> (slot & np.uint64(7)).astype(np.uint8)) & 1).astype(bool)

    def add(self, heads: np.ndarray, runs: list[np.ndarray]) -> None:
        self.held += len(heads)
        if self.held * self.BITS_PER_LINE <= 1 << self.bits:
            self._set(heads)
            return
        while self.held * self.BITS_PER_LINE > 1 << self.bits:
            self.bits += 1
        self.slots = np.zeros(1 << (self.bits - 3), dtype=np.uint8)
        for run in runs:  # every head seen, the new ones included (they are in the runs by now)
            self._set(run)

    def _set(self, heads: np.ndarray) -> None:
        slot = self._slot(heads)
        np.bitwise_or.at(self.slots, slot >> np.uint64(3), np.left_shift(1, (slot & np.uint64(7)).astype(np.uint8)))

