"""`python -m checkpoint_runtime` runs the `checkpoint-runtime` command."""

import sys

from checkpoint_runtime.cli import main

sys.exit(main())
