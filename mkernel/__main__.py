"""``python -m mkernel`` is the ``mkernel`` command."""
from .cli import entry

entry()
