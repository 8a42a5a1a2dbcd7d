"""The one exception family mkernel raises on purpose.

Every error a user can trigger is an :class:`MkernelError`; the CLI maps its kind to an exit code
(2 for bad input, 1 for a failed check) and prints its message as one sentence.
"""


class MkernelError(Exception):
    """Base class of every deliberate mkernel error."""


class InputError(MkernelError):
    """Bad input from the user: a scenario file, a CLI flag or an API argument (exit code 2)."""


class ScenarioError(InputError):
    """A scenario file is unreadable, has an unknown or missing key, a wrong type or an impossible value."""


class ProblemError(InputError):
    """A shape or option that the chosen op cannot split across the cluster."""


class ScheduleError(MkernelError):
    """``validate()`` found a mistake in a schedule; the message names the task and the rule broken."""


class DeadlockError(MkernelError):
    """A backend found that nothing can run while tasks still wait; the message lists every waiter."""


class TransportError(MkernelError):
    """A message was lost for good: the transport gave up retransmitting it (an error completion)."""


class DeadlineExceeded(MkernelError):
    """A command ran past its ``--timeout``; the message says what was still running (exit 1)."""


class BackendUnavailable(MkernelError):
    """The requested backend cannot run here (no GPU, a missing package, or not built yet)."""
