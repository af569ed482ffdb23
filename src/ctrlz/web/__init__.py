"""The dashboard: one page of plain JavaScript modules and vendored libraries, no build step.

``static/`` holds ``index.html``, the page's own modules (``app.js`` and the views it imports)
and ``vendor/`` with the libraries it uses, each with its licence: Apache ECharts (the timeline
picture), diff2html (the diff viewer) and highlight.js (syntax highlighting). The gateway
(:mod:`ctrlz.service.gateway`) serves them; the page talks to the API with the login cookie
and follows ``/v1/events``, so nothing is loaded from outside and it works offline.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
