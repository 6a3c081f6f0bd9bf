"""The signals that stop a plan's run, held back while its tasks are submitted and waited for."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def signals_between_waits() -> Iterator[Callable[[], bool]]:
    """Hold back what the signals that stop a run raise (KeyboardInterrupt) while the run's tasks are
    submitted and waited for, and raise it, by the handler it was for, between two waits or at the end:
    raised anywhere, it can land inside the process pool's own locking (a lock acquired, never
    released: the pool's thread then waits for it forever, and so does the plan, seen once in ten
    SIGINTs at 0.6 s) or in a fork's after-fork hooks, which drop it ("Exception ignored"). Yields
    whether one came. Only Python's handlers are held (SIG_IGN and SIG_DFL are left), in the main
    thread only, where they run."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    came: list[int] = []

    def hold(signum: int, frame: object) -> None:
        came.append(signum)

    names = ("SIGINT", "SIGTERM", "SIGHUP")
    numbers = [getattr(signal, name) for name in names if hasattr(signal, name)]
    held = {number: signal.getsignal(number) for number in numbers if callable(signal.getsignal(number))}
    for number in held:
        signal.signal(number, hold)
    try:
        yield lambda: bool(came)
    finally:
        for number, handler in held.items():
            signal.signal(number, handler)
    handler = held[came[0]] if came else None
    if callable(handler):
        handler(came[0], None)
