"""``python -m effectledger``: the same as the ``effectledger`` command."""

import sys

from effectledger.cli import main

sys.exit(main())
