"""``python -m correlator``: the same as the ``correlator`` command."""

from __future__ import annotations

import sys

from correlator.cli import main

sys.exit(main())
