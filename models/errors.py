"""The errors pipesat raises for bad input; each carries one line that says what is wrong and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: object, choices: Iterable[str]) -> str | None:
    """The choice a mistyped `name` most likely meant (difflib's ratio of at least 0.6), or None."""
    found = difflib.get_close_matches(str(name), list(choices), n=1)
    return found[0] if found else None


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """`; did you mean 'kv_heads'?` for the choice a mistyped `name` most likely meant, else ''."""
    match = closest(name, choices)
    return f"; did you mean {match!r}?" if match else ""


def unknown_hint(name: object, choices: Iterable[str], listing: str) -> str:
    """What follows an unknown `name` in a message: `; did you mean 'kv_heads'? LISTING`, or `; LISTING`
    when no choice is close (the listing of what is known stays: a close name may not be the one meant)."""
    suggestion = did_you_mean(name, choices)
    return f"{suggestion} {listing}" if suggestion else f"; {listing}"


class PipesatError(Exception):
    """Base class: the message is one line meant for the user, never a traceback."""


class InputError(PipesatError):
    """Bad input: a file that cannot be read, or an option or file content that cannot be used."""


class InstanceError(InputError):
    """An instance file or option is malformed or inconsistent."""


class ScheduleError(PipesatError):
    """A schedule (or an op order) is malformed, incomplete or cannot be timed."""


class OptionError(InputError):
    """A solver option (objective, time limit, workers, gap, cap) is out of range or unknown."""
