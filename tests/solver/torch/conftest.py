"""What the tests of a profile share: one torch thread while they measure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    # One torch thread: the machine's two cores are shared, and threads fighting for them make the
    # medians swing; one thread keeps B + W against the whole backward within a few percent.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
