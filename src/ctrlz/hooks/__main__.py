"""``python -m ctrlz.hooks AGENT``: the hook without the CLI's import cost."""

import sys

from .runner import run

sys.exit(run(sys.argv[1] if len(sys.argv) > 1 else ""))
