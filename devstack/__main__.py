"""``python -m devstack``: see :mod:`devstack.cli`."""

from __future__ import annotations

import sys

from devstack.cli import main

sys.exit(main())
