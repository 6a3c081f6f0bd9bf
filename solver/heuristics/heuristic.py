"""What the table of schedules holds: handwritten schedules (heuristics) and pipesat's starting schedules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipesat.models import InputError, Instance, OpKey, PipesatError, Step
from pipesat.models.names import SCHEDULE_TITLES
from pipesat.solver.evaluate.simulator import TransferPlan

Orders = list[list[OpKey]]
"""Per-device op orders, as most handwritten schedules build them."""

StepOrders = Sequence[Sequence[Step]]
"""Per-device orders of ops and overlapped pairs: what a handwritten schedule returns."""


class NotApplicable(PipesatError):
    """The heuristic cannot serve this instance; the message is the reason, starting with "needs"."""


class UnknownSchedule(InputError):
    """No schedule has this name; the message lists the names there are."""


@dataclass(frozen=True)
class Heuristic:
    """A named handwritten schedule.

    `requirement(instance)` returns None when the heuristic applies, else a reason such as
    "needs a split backward (weight_times)". `orders(instance)` builds the per-device op orders.
    Only a heuristic made for it (`bidirectional`) serves a bidirectional placement, whose
    microbatches pass half the stages; `unmet` holds both rules. An offload schedule (docs/offload.md)
    adds `transfers(instance, orders)`: its host-link transfers on those orders.
    """

    name: str
    requirement: Callable[[Instance], str | None]
    orders: Callable[[Instance], StepOrders]
    bidirectional: bool = False
    transfers: Callable[[Instance, StepOrders], TransferPlan] | None = None

    @property
    def offloads(self) -> bool:
        """Whether its schedules offload activations (they need a host link)."""
        return self.transfers is not None

    def unmet(self, instance: Instance) -> str | None:
        """Why the heuristic cannot serve `instance` ("needs ..."), or None when it can."""
        if instance.bidirectional and not self.bidirectional:
            return "needs every microbatch to pass every stage (not the bidirectional placement)"
        return self.requirement(instance)

    @property
    def title(self) -> str:
        return SCHEDULE_TITLES[self.name]


@dataclass(frozen=True)
class StartingSchedule:
    """A schedule pipesat makes only for the solver to start from, not a handwritten one.

    Its maker takes the backward mode (and the periodic one a deadline), so the solver calls it
    directly; it is in the table for its place in the tie order and its title.
    """

    name: str

    @property
    def title(self) -> str:
        return SCHEDULE_TITLES[self.name]
