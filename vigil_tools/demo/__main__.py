"""``python -m vigil_tools.demo``: see :mod:`vigil_tools.demo.main`."""

from __future__ import annotations

import sys

from vigil_tools.demo.main import main

if __name__ == "__main__":
    sys.exit(main())
