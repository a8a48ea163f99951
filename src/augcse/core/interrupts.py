"""A Ctrl-C that no library can lose.

Some libraries wrap their own work in a bare ``except:`` (``datasets`` does so while fingerprinting a
transform), so a KeyboardInterrupt raised inside them is swallowed and the command runs on to the end. Inside
:class:`InterruptLatch` a SIGINT still raises KeyboardInterrupt where it lands, and is also remembered:
:meth:`InterruptLatch.check`, called between units of work, raises it again if it was swallowed.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType


class InterruptLatch:
    """Remember a SIGINT while the block runs; the handler that was there before is put back on exit.

    Off the main thread (where Python allows no signal handler) the latch does nothing.
    """

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: object = None
        self._installed = False

    def __enter__(self) -> "InterruptLatch":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous if self._previous is not None else signal.SIG_DFL)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise KeyboardInterrupt if a SIGINT came and whatever ran since swallowed it."""
        if self.interrupted:
            raise KeyboardInterrupt
