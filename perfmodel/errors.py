"""The errors perfmodel raises. Only the CLI turns them into messages and exit codes.

A message is one sentence for the user. It names a Python parameter in backquotes (`confidence`), never a
command-line flag: the command line shows the flag that sets the parameter instead (--confidence), as it
does for the library's warnings and for the text a command prints from it (console.for_the_command_line).
"""

from perfmodel import exit_codes


class PerfmodelError(Exception):
    """Base of every error perfmodel raises on purpose; the message is meant for the user."""

    exit_code = exit_codes.FAILURE


class InputError(PerfmodelError, ValueError):
    """Bad input from the user: an argument, a file, a model name.

    A ValueError too, as scikit-learn's and the solvers' errors are, so that `except ValueError` in a
    caller's code catches a wrong value given to perfmodel.
    """

    exit_code = exit_codes.BAD_INPUT


class ProfileFormatError(InputError):
    """A profile CSV that does not follow the profile contract."""


class PredictorFormatError(InputError):
    """A predictor file that is not a valid perfmodel predictor."""


class DeviceError(InputError):
    """The requested device or backend is not available on this machine."""


class BackendError(PerfmodelError):
    """A backend failed while measuring (a server died, a request timed out)."""


class InfeasibleError(PerfmodelError):
    """No plan meets the deadline with the GPUs given."""

    exit_code = exit_codes.NO_PLAN


class PerfmodelWarning(UserWarning):
    """Something the user should know that does not stop the work (the CLI prints it once)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for a one-sentence error."""
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__
