"""The dashboard at ``/ui`` (SPEC §9): server-rendered pages over the store's bounded, indexed
reads, with the API's auth and the API's own actions.

Jinja2 templates (``templates/``) render every page on the server; the few dynamic bits (the
overview refreshing itself) use htmx, whose one minified file ships in ``static/`` with the
stylesheet — nothing is fetched from the internet and nothing is built. :data:`router` is mounted
by :func:`duetime.api.app.create_app`. See ``docs/ui.md``.
"""

from __future__ import annotations

from duetime.api.ui.routes import router

__all__ = ["router"]
