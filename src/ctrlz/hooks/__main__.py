"""``python -m ctrlz.hooks AGENT``: the hook without the CLI's import cost."""

import sys

from .runner import main

sys.exit(main())
