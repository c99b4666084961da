"""``python -m scalpel_executor.cli``: the ``scalpel`` command."""

import sys

from scalpel_executor.cli import main

sys.exit(main())
