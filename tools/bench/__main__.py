"""Entry point of ``python -m tools.bench`` (see tools.bench.cli)."""

import sys

from tools.bench import cli

sys.exit(cli.main())
