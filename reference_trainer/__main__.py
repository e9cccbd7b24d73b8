"""``python -m reference_trainer``: see :mod:`reference_trainer.cli`."""

import sys

from .cli import main

sys.exit(main())
