"""InterruptLatch: a SIGINT swallowed by a bare ``except:`` (as ``datasets`` does while fingerprinting) is
raised again at the next check, and the previous handler comes back."""

import os
import signal
import sys

import pytest

from augcse.core.interrupts import InterruptLatch


def _swallowing_work() -> str:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between bytecodes: give it some
            pass
        return "finished"
    except:  # noqa: E722 - the library behaviour this guards against
        return "swallowed"


def test_a_swallowed_ctrl_c_is_raised_at_the_next_check() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with InterruptLatch() as latch:
            assert _swallowing_work() == "swallowed"  # the library carried on...
            latch.check()  # ...the latch does not
    assert signal.getsignal(signal.SIGINT) is before


def test_no_sigint_no_interrupt() -> None:
    before = signal.getsignal(signal.SIGINT)
    with InterruptLatch() as latch:
        latch.check()
    assert not latch.interrupted and signal.getsignal(signal.SIGINT) is before


def test_without_the_latch_the_interrupt_is_lost() -> None:
    """The failure the latch exists for, shown: the library swallows it and nothing else sees it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert _swallowing_work() == "swallowed"
    finally:
        signal.signal(signal.SIGINT, before)


def _called_from(name: str) -> bool:
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != name:
        frame = frame.f_back
    return frame is not None


def test_a_ctrl_c_inside_datasets_fingerprinting_stops_augment_after_that_shard(tmp_path, monkeypatch, capsys) -> None:
    """The fault seen for real: SIGINT lands while ``datasets`` hashes a shard's transform; its bare except
    swallows it. The build still stops after that shard, unfinished, with no warning blaming the data."""
    import json

    import datasets.fingerprint as fingerprint

    from augcse.text.augment.cache import build_cache

    hash_bytes = fingerprint.Hasher.hash_bytes
    sent = []

    def interrupted_once(value):
        # update_fingerprint hashes the old fingerprint first, then the transform inside its bare except
        if _called_from("update_fingerprint"):
            sent.append(True)
            if len(sent) == 2:
                os.kill(os.getpid(), signal.SIGINT)
        return hash_bytes(value)

    monkeypatch.setattr(fingerprint.Hasher, "hash_bytes", staticmethod(interrupted_once))
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            build_cache([f"Sentence number {i} is here." for i in range(12)], ["RandomSwap"], tmp_path / "c",
                        shard_size=4, progress=False)
    finally:
        signal.signal(signal.SIGINT, before)
    assert len(sent) >= 2  # the SIGINT was sent inside the bare except
    assert not json.loads((tmp_path / "c" / "manifest.json").read_text())["complete"]
    assert len([p for p in (tmp_path / "c" / "shards").iterdir() if p.is_dir()]) == 1  # the shard in flight, whole
    assert "couldn't be hashed" not in capsys.readouterr().err
