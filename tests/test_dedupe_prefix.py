"""Deduplication searches each digest by its first 8 bytes; digests that share those bytes are still told apart."""

from __future__ import annotations

import numpy as np

import augcse.text.dedupe as dedupe


def test_digests_sharing_their_first_8_bytes_are_told_apart(monkeypatch):
    # lines named by their digests: "a…" and "b…" share the first 8 bytes with each other, "c…" shares none
    keys = {name: (prefix + suffix).encode() for name, prefix, suffix in
            [("a1", "AAAAAAAA", "00000001"), ("a2", "AAAAAAAA", "00000002"), ("a3", "AAAAAAAA", "00000003"),
             ("c", "CCCCCCCC", "00000000"), ("z", "ZZZZZZZZ", "99999999")]}
    monkeypatch.setattr(dedupe, "digests", lambda lines: np.array([keys[line] for line in lines], dtype=dedupe.DIGEST))
    seen = dedupe.SeenLines()
    assert seen.first_seen(["a2", "c"]).tolist() == [True, True]
    assert seen.first_seen(["a1", "a3", "a2", "z", "c", "a1"]).tolist() == [True, True, False, True, False, False]
    assert seen.first_seen(["a3", "a1", "z", "a2"]).tolist() == [False, False, False, False]
    assert len(seen) == 5


def test_many_digests_sharing_heads_across_merges_match_a_set(monkeypatch):
    """Heads drawn from 5 values, tails from 40: equal heads everywhere, in every run and merge."""
    import random

    monkeypatch.setattr(dedupe, "digests", lambda lines: np.array(
        [int(h).to_bytes(8, "big") + int(t).to_bytes(8, "big") for h, t in (line.split("-") for line in lines)],
        dtype=dedupe.DIGEST))
    rng = random.Random(4)
    seen, reference = dedupe.SeenLines(), set()
    for _ in range(200):
        batch = [f"{rng.randrange(5) << 40}-{rng.randrange(40)}" for _ in range(rng.randrange(0, 12))]
        expected = []
        for line in batch:
            expected.append(line not in reference)
            reference.add(line)
        assert seen.first_seen(batch).tolist() == expected
    assert len(seen) == len(reference) == 200
