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
