"""Which lines were seen before, remembered by digest so that deduplicating a corpus never holds its strings.

Each distinct line costs 24 bytes: its XXH3-128 digest in sorted NumPy runs and the digest's first 8 bytes
as a number beside it (what is searched), and up to 24 more while the two newest runs merge (their copy and
timsort's buffer); a Python ``set`` of the same digests costs about 80 bytes per line. Runs merge like a binary counter (a run absorbs the next one once that is as large), so
there are O(log n) runs to search.
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


def leading(keys: np.ndarray) -> np.ndarray:
    """Each digest's first 8 bytes as a big-endian number: sorted digests give sorted numbers, which NumPy searches
    several times faster than 16-byte strings."""
    return np.ascontiguousarray(keys.view(">u8")[::2]).astype(np.uint64)


class SeenLines:
    """First occurrences over a stream of line batches, in 16 bytes per distinct line."""

    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []  # sorted, disjoint; sizes non-increasing
        self._prefixes: list[np.ndarray] = []  # each run's leading(): searched as numbers, not as bytes

    def __len__(self) -> int:
        return sum(len(run) for run in self._runs)

    def first_seen(self, lines: Sequence[str] | pa.Array) -> np.ndarray:
        """A mask of the lines seen neither earlier in this batch nor in any earlier batch; remembers them."""
        keys = digests(lines)
        fresh = np.zeros(len(keys), dtype=bool)
        if not len(keys):
            return fresh
        fresh[np.unique(keys, return_index=True)[1]] = True  # the first of equal lines within the batch
        prefixes = leading(keys)
        order = np.argsort(prefixes)  # searched in sorted order: the runs are then read forwards, 4x faster
        for run, run_prefixes in zip(self._runs, self._prefixes):
            at = np.empty(len(keys), dtype=np.intp)
            at[order] = np.minimum(np.searchsorted(run_prefixes, prefixes[order]), len(run) - 1)
            found = run[at] == keys
            shared = ~found & (run_prefixes[at] == prefixes)  # another digest with the same first 8 bytes: rare
            if shared.any():
                exact = np.minimum(np.searchsorted(run, keys[shared]), len(run) - 1)
                found[shared] = run[exact] == keys[shared]
            fresh &= ~found
        if fresh.any():
            self._push(np.sort(keys[fresh]))
        return fresh

    def _push(self, run: np.ndarray) -> None:
        self._runs.append(run)
        self._prefixes.append(leading(run))
        while len(self._runs) > 1 and len(self._runs[-1]) >= len(self._runs[-2]):
            del self._prefixes[-2:]
            merged = np.concatenate([self._runs.pop(-2), self._runs.pop()])  # the two runs are freed here
            merged.sort(kind="stable")  # in place; timsort merges the two sorted halves in linear time
            self._runs.append(merged)
            self._prefixes.append(leading(merged))
