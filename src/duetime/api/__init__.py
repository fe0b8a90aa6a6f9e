"""duetime's HTTP API v1 (SPEC §3). Build it with :func:`duetime.api.app.create_app`."""
