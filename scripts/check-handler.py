#!/usr/bin/env python3
"""The conformance check of a handler, from the source folder (`pip install ./python` installs it as
broadcastd-check-handler): scripts/check-handler.py NAME [--broadcastd PATH] [--handlers-dir DIR] ... (--help)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "python"))
from broadcastd.check import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
