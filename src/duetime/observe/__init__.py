"""Observability above the engine and the API: HTTP-server and store metrics, the one place
attempt endings are logged and counted, structured logs, optional OpenTelemetry traces."""
