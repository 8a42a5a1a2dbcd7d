"""``python -m mkernel`` is the ``mkernel`` command."""
import sys

from .cli import main

sys.exit(main())
