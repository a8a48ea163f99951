"""One writer for each shared artefact (an augmentation cache, a retrieval index) that several processes ask for.

The processes of one job (torchrun's ranks on a node, or the nodes of a job sharing a disk) each call the
builder; the first takes an OS file lock beside the artefact and builds it, the others wait on the lock and then
find it built and read it. So an artefact on a node's own disk is built once per node, and once per job on a
disk the nodes share, with the same key and content as one process would write.

The lock is ``filelock``'s (``flock``): the operating system releases it when its holder ends, even by SIGKILL,
so a killed builder leaves no stale lock and the next waiter resumes the build where it stopped. A waiter gives
up after ``timeout`` seconds with one line naming the artefact, the lock and what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from augcse.core.outputs import check_file_target

WAIT_SECONDS = 1800.0  # torch.distributed's own default timeout: a waiter gives up no sooner than a collective would


class BuildWaitTimeout(TimeoutError):
    """Another process held an artefact's lock for longer than the wait allowed."""


def lock_file(target: Path) -> Path:
    """The lock beside ``target`` (not in it: a builder may empty or replace the folder it builds)."""
    return target.parent / f".{target.name}.lock"


def wait_message(what: str, target: Path, seconds: float, holder: str) -> str:
    return (f"{what} in {target}: waited {seconds:.0f} s for {holder}; let that build finish (or build it first "
            f"in one process) and start again, or allow a longer wait (training.ddp_timeout)")


@contextmanager
def sole_builder(target: str | Path, what: str, timeout: float | None = None) -> Iterator[None]:
    """Hold ``target``'s build lock inside the block; wait at most ``timeout`` seconds (None: WAIT_SECONDS).

    Inside the block, look whether ``target`` is already complete before building it: a waiter gets the lock
    only after the builder before it has finished (or died)."""
    from filelock import FileLock, Timeout

    target = Path(target)
    path = lock_file(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_file_target(path, "the build lock")  # filelock truncates its file: never through a link left there
    seconds = WAIT_SECONDS if timeout is None else timeout
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=seconds)
    except Timeout:
        raise BuildWaitTimeout(wait_message(what, target, seconds, f"the process building it (it holds {path})")
                               ) from None
    try:
        yield
    finally:
        lock.release()


__all__ = ["BuildWaitTimeout", "WAIT_SECONDS", "lock_file", "sole_builder", "wait_message"]
