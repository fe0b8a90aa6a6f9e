"""``duetime tenant grant-sql TENANT ROLE`` and ``revoke-sql ROLE`` against the store --db names."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sql_helpers import Roles, as_role
from typer.testing import CliRunner

from duetime import cli
from duetime.store.postgres.backend import PostgresStore


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in ("DUETIME_DB", "DUETIME_DATA_DIR", "DUETIME_MAX_PAYLOAD_BYTES"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def test_grant_sql_lets_a_role_create_for_the_tenant_and_revoke_sql_takes_it_back(
    runner: CliRunner, pg_url: str, roles: Roles, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def setup() -> tuple[str, str]:
        store = PostgresStore(pg_url)
        await store.open()
        try:
            return (await store.tenant_create("acme")).id, await roles.make()
        finally:
            await store.close()

    tenant, role = asyncio.run(setup())
    monkeypatch.setenv("DUETIME_MAX_PAYLOAD_BYTES", "64")
    done = runner.invoke(cli.app, ["tenant", "grant-sql", tenant, role, "--db", pg_url])
    assert done.exit_code == 0, done.output
    assert f"role {role} creates tasks for tenant {tenant}" in done.output

    async def create(payload: str) -> str:
        conn = await asyncpg.connect(as_role(pg_url, role))
        try:
            try:
                await conn.fetchval(
                    "SELECT id FROM duetime.create_task_v1(payload => $1::jsonb)", payload
                )
            except asyncpg.PostgresError as exc:
                return str(exc.sqlstate)
            return "made"
        finally:
            await conn.close()

    assert asyncio.run(create('"small"')) == "made"
    assert asyncio.run(create('"' + "x" * 100 + '"')) == "54000"  # the granted max_payload_bytes

    missing = runner.invoke(cli.app, ["tenant", "grant-sql", "no-such", role, "--db", pg_url])
    assert missing.exit_code == 3 and "not found" in missing.output
    revoked = runner.invoke(cli.app, ["tenant", "revoke-sql", role, "--db", pg_url])
    assert revoked.exit_code == 0, revoked.output
    assert asyncio.run(create('"small"')) == "42501"
    again = runner.invoke(cli.app, ["tenant", "revoke-sql", role, "--db", pg_url])
    assert again.exit_code == 3 and "no SQL API grant" in again.output


def test_grant_sql_needs_postgresql(runner: CliRunner, tmp_path: object) -> None:
    done = runner.invoke(
        cli.app, ["tenant", "grant-sql", "t", "r", "--db", f"sqlite:///{tmp_path}/x.db"]
    )
    assert done.exit_code == 2 and "needs a PostgreSQL store" in done.output
