"""``python -m correlator``: the same as the ``correlator`` command.

The guard matters: ``correlator ingest`` parses large files in ``spawn``ed worker processes,
which re-import this module.
"""

from __future__ import annotations

import sys

from correlator.cli import main

if __name__ == "__main__":
    sys.exit(main())
