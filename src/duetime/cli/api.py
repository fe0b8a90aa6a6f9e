"""The CLI commands for the rest of the API: ``tenant get|rotate-secret``, ``admin
tenant-create|tenant-list|tenant-get|tenant-set|tenant-delete|key-create|key-delete``,
``workers``, ``targets``, ``lease take|heartbeat|complete|fail|release``
Each takes ``--url``/``--api-key`` and ``-o``, like the others."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from duetime.cli.common import (
    EXIT_USAGE,
    ApiKeyOption,
    UrlOption,
    fail,
    json_arg,
    tenant_app,
    text_arg,
)
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, OutputOption, emit
from duetime.sdk.client import DEFAULT_URL

admin_app = typer.Typer(
    help="Tenants and API keys through the API (needs the admin token as --api-key).",
    no_args_is_help=True,
)
lease_app = typer.Typer(
    help="Lease worker tasks by hand (what a Worker does).", no_args_is_help=True
)

IdArg = Annotated[str, typer.Argument(metavar="ID")]
LeaseArg = Annotated[str, typer.Argument(metavar="LEASE_ID")]
LogsOption = Annotated[
    str | None,
    typer.Option(help="Text kept with the attempt (first 64 KiB), @file, or - (stdin)."),
]


@tenant_app.command("get")
def tenant_get(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """The calling key's tenant, with its webhook signing secrets."""
    with connected(url, api_key) as client:
        emit(output, client.get_tenant().to_json())


@tenant_app.command("rotate-secret")
def tenant_rotate(
    overlap_seconds: Annotated[
        float | None, typer.Option(help="How long the old secret stays valid (default 1 day).")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Add a new webhook signing secret; the old one expires after the overlap."""
    with connected(url, api_key) as client:
        emit(output, client.rotate_signing_secret(overlap_seconds).to_json())


@admin_app.command("tenant-create")
def admin_tenant_create(
    name: Annotated[str, typer.Argument(help="The tenant's display name.")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Create a tenant and its first API key through a running server (shown once)."""
    with connected(url, api_key) as client:
        emit(output, client.create_tenant(name).to_json())


@admin_app.command("key-create")
def admin_key_create(
    tenant_id: Annotated[str, typer.Argument(metavar="TENANT_ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Add an API key to a tenant (shown once)."""
    with connected(url, api_key) as client:
        emit(output, client.create_api_key(tenant_id).to_json())


@admin_app.command("key-delete")
def admin_key_delete(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Delete an API key: calls with it are refused at once."""
    with connected(url, api_key) as client:
        client.delete_api_key(key_id)
        emit(output, {"id": key_id, "deleted": True})


def workers(
    live_within_seconds: Annotated[
        float | None, typer.Option(help="Only workers seen this recently.")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """The workers that leased or heart-beat lately, per queue."""
    with connected(url, api_key) as client:
        found = client.list_workers(live_within_seconds=live_within_seconds)
        emit(output, {"items": [w.to_json() for w in found]})


@lease_app.command("take")
def lease_take(
    queue: Annotated[str, typer.Option(help="The queue to lease from.")] = "default",
    worker_id: Annotated[str, typer.Option(help="Who holds the leases.")] = "cli",
    max_tasks: Annotated[int, typer.Option()] = 1,
    lease_seconds: Annotated[float | None, typer.Option()] = None,
    wait_seconds: Annotated[float, typer.Option(help="Long-poll up to this long.")] = 0.0,
    name: Annotated[list[str] | None, typer.Option(help="Only tasks of this name; repeat.")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Lease due worker tasks of a queue."""
    with connected(url, api_key) as client:
        leases = client.lease_tasks(
            queue,
            worker_id=worker_id,
            max_tasks=max_tasks,
            lease_seconds=lease_seconds,
            wait_seconds=wait_seconds,
            names=name,
        )
        emit(output, {"items": [lease.to_json() for lease in leases]})


@lease_app.command("heartbeat")
def lease_heartbeat(
    lease_id: LeaseArg,
    extend_seconds: Annotated[float | None, typer.Option()] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Extend a lease (409, exit 4, when it is no longer current)."""
    with connected(url, api_key) as client:
        emit(output, client.heartbeat(lease_id, extend_seconds).to_json())


@lease_app.command("complete")
def lease_complete(
    lease_id: LeaseArg,
    result: Annotated[str | None, typer.Option(help="JSON result, @file.json, or -.")] = None,
    logs: LogsOption = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """End the leased attempt as succeeded."""
    value = None if result is None else json_arg(result, "--result")
    text = None if logs is None else text_arg(logs, "--logs")
    with connected(url, api_key) as client:
        emit(output, client.complete_lease(lease_id, value, logs=text).to_json())


@lease_app.command("fail")
def lease_fail(
    lease_id: LeaseArg,
    error: Annotated[str, typer.Option(help="What went wrong.")],
    retryable: Annotated[bool, typer.Option("--retryable/--final")] = True,
    retry_after_seconds: Annotated[float | None, typer.Option()] = None,
    logs: LogsOption = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """End the leased attempt as failed (retried unless --final)."""
    text = None if logs is None else text_arg(logs, "--logs")
    with connected(url, api_key) as client:
        done = client.fail_lease(
            lease_id,
            error,
            retryable=retryable,
            retry_after_seconds=retry_after_seconds,
            logs=text,
        )
        emit(output, done.to_json())


@lease_app.command("release")
def lease_release(
    lease_id: LeaseArg,
    delay_seconds: Annotated[float, typer.Option(help="Due again this long from now.")] = 0.0,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Hand the task back unstarted: it waits again and its attempt is not spent."""
    with connected(url, api_key) as client:
        emit(output, client.release_lease(lease_id, delay_seconds=delay_seconds).to_json())


_TENANT_COLUMNS = ("id", "name", "created_at")


@admin_app.command("tenant-list")
def admin_tenant_list(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Every tenant, oldest first, with its quotas and usage."""
    with connected(url, api_key) as client:
        found = client.list_tenants()
        emit(output, {"items": [t.to_json() for t in found]}, _TENANT_COLUMNS)


@admin_app.command("tenant-get")
def admin_tenant_get(
    tenant_id: Annotated[str, typer.Argument(metavar="TENANT_ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """One tenant with its quotas and usage."""
    with connected(url, api_key) as client:
        emit(output, client.get_tenant_admin(tenant_id).to_json())


@admin_app.command("tenant-set")
def admin_tenant_set(
    tenant_id: Annotated[str, typer.Argument(metavar="TENANT_ID")],
    max_pending_tasks: Annotated[int | None, typer.Option(help="Tasks not ended.")] = None,
    max_creates_per_second: Annotated[float | None, typer.Option(help="Task creates/s.")] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="Running tasks.")] = None,
    max_schedules: Annotated[int | None, typer.Option(help="Live schedules.")] = None,
    weight: Annotated[int | None, typer.Option(help="Share of claims (1-1000).")] = None,
    clear: Annotated[
        list[str] | None,
        typer.Option(help="Remove this quota (repeatable), e.g. --clear max_schedules."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Change a tenant's quotas: options given are set, --clear ones removed, others kept."""
    given: dict[str, Any] = {
        "max_pending_tasks": max_pending_tasks,
        "max_creates_per_second": max_creates_per_second,
        "max_concurrency": max_concurrency,
        "max_schedules": max_schedules,
        "weight": weight,
    }
    changes = {name: value for name, value in given.items() if value is not None}
    for name in clear or []:
        if name not in given:
            raise fail(f"--clear {name}: not a quota (use one of {', '.join(given)})", EXIT_USAGE)
        changes[name] = None
    with connected(url, api_key) as client:
        emit(output, client.set_tenant_quotas(tenant_id, **changes).to_json())


@admin_app.command("tenant-delete")
def admin_tenant_delete(
    tenant_id: Annotated[str, typer.Argument(metavar="TENANT_ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Delete a tenant that has no work left (refused while it has tasks or schedules)."""
    with connected(url, api_key) as client:
        client.delete_tenant(tenant_id)
        emit(output, {"id": tenant_id, "deleted": True})


def targets(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """The tenant's webhook origins whose circuit breaker ever opened, with their state."""
    with connected(url, api_key) as client:
        found = client.list_targets()
        columns = ("origin", "state", "failures", "open_until", "opened")
        emit(output, {"items": [c.to_json() for c in found]}, columns)
