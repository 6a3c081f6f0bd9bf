"""The units every report shows: the instance's time unit, and its memory unit scaled to read well.

Memory is shown in GiB rather than MiB once the instance's amounts reach a GiB (the 1F1B peak, or a
limit); an instance without units (the earlier tool's configs) is shown without any, exactly as
before. Every table header, picture axis and JSON field that holds a time or a memory amount names
its unit through this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models import Instance
from pipesat.models.units import display_memory_unit


@dataclass(frozen=True)
class Units:
    """How a report shows times (`time`, the instance's unit) and memory (`memory`, reached from the
    instance's memory unit by multiplying by `memory_factor`)."""

    time: str = ""
    memory: str = ""
    memory_factor: float = 1.0

    def memory_value(self, amount: float) -> float:
        """A memory amount of the instance in the shown unit."""
        return amount * self.memory_factor

    def time_header(self, title: str) -> str:
        """`makespan (ms)`, or the title alone without a unit."""
        return f"{title} ({self.time})" if self.time else title

    def memory_header(self, title: str) -> str:
        """`peak memory (GiB)`, or the title alone without a unit."""
        return f"{title} ({self.memory})" if self.memory else title

    def with_time(self, text: str) -> str:
        """`12.5 ms`, or the number alone."""
        return f"{text} {self.time}" if self.time else text

    def with_memory(self, text: str) -> str:
        """`19.5 GiB`, or the number alone."""
        return f"{text} {self.memory}" if self.memory else text


def units_of(instance: Instance) -> Units:
    """The units to show `instance`'s numbers in (see the module notes)."""
    largest = max([instance.one_f_one_b_peak(), *(instance.memory_limit or ())])
    memory, factor = display_memory_unit(instance.memory_unit, largest)
    return Units(instance.time_unit, memory, factor)
