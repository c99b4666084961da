import sys

from scalpel_executor.cli.app import main

sys.exit(main())
