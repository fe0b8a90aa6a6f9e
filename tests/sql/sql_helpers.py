"""Helpers of the SQL API tests: login roles made for one test, URLs as a role."""

from __future__ import annotations

import uuid

import asyncpg

from duetime.bench.runs import as_role
from duetime.store.postgres.schema import connect as pg_connect

__all__ = ["MAX_PAYLOAD_BYTES", "Roles", "as_role"]

MAX_PAYLOAD_BYTES = 1024
"""What the tests grant with (the HTTP API tests' ``max_payload_bytes``)."""


class Roles:
    """Login roles made for one test and dropped after it (roles belong to the whole server)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[str] = []

    async def make(self) -> str:
        name = f"dt_producer_{uuid.uuid4().hex[:10]}"
        conn = await pg_connect(self.url)
        try:
            await conn.execute(f"CREATE ROLE {name} LOGIN")
        finally:
            await conn.close()
        self.made.append(name)
        return name

    async def connect(self, role: str) -> asyncpg.Connection:
        """A plain connection as ``role``, on the role's own default search path."""
        return await asyncpg.connect(as_role(self.url, role))

    async def drop(self) -> None:
        conn = await pg_connect(self.url)
        try:
            for name in self.made:
                await conn.execute(f"DROP OWNED BY {name}")
                await conn.execute(f"DROP ROLE {name}")
        finally:
            await conn.close()
