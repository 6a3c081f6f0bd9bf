"""The errors pipesat raises for bad input; each carries one line that says what is wrong and how to fix it."""


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
