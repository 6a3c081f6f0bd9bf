from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from pipesat.solver.plan.held_signals import signals_between_waits


def _soon(check: Callable[[], bool]) -> bool:
    end = time.monotonic() + 1
    while not check() and time.monotonic() < end:
        time.sleep(0.01)
    return check()


def test_a_signal_in_the_block_is_raised_at_its_end_not_where_it_lands() -> None:
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt), signals_between_waits() as signalled:
        assert not signalled()
        os.kill(os.getpid(), signal.SIGINT)  # Python's handler runs here, in the main thread
        assert signalled()
        reached_the_end = True
    assert reached_the_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_signal_nothing_is_raised_and_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with signals_between_waits() as signalled:
            os.kill(os.getpid(), signal.SIGTERM)
            assert not signalled()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
