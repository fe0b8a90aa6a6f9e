"""Named credentials, and the rows that hold sealed values: the rules, once for both backends;
contracts in :mod:`duetime.store.protocols` (``CredentialStore``, ``SealedStore``).

A credential is stored as given to the store: its secret sealed already (the API seals it,
:mod:`duetime.delivery.credentials`); the store never sees a plain value. A tenant holds at most
:data:`MAX_CREDENTIALS`, so the dispatcher can read them all at once.

The sealed rows are read page by page in key order (``sealed_page``) and each is written back
only if it still holds the text read (``sealed_replace``), so ``duetime secrets rotate`` runs
beside live nodes: a row changed in between is left as the change made it.
"""

from __future__ import annotations

from duetime.errors import Conflict, ValidationError
from duetime.store.core.plan import Decode, Plan, Row, all_, count, one, value
from duetime.store.core.runner import Runs
from duetime.types import Credential, SealedRow

MAX_CREDENTIALS = 1000
"""Named credentials per tenant."""

_STATEMENTS = {
    table: (f"sealed_page_{table}", f"sealed_replace_{table}")
    for table in (
        "tasks",
        "schedules",
        "notifications",
        "credentials",
        "signing_keys",
        "client_certificates",
    )
}
SEALED_TABLES = tuple(_STATEMENTS)
"""The tables whose rows may hold sealed values, and the page and replace statement of each
(revisions and history hold none: they keep a credential only as ``***`` and its
fingerprint). ``signing_keys`` and ``client_certificates`` hold text sealed for the node
itself (:meth:`duetime.delivery.sealing.TargetSealer.seal_text`)."""

NODE_SEALED = frozenset({"signing_keys", "client_certificates"})
"""The tables of :data:`SEALED_TABLES` whose values are sealed for the node, not a tenant."""


def credential(r: Row, d: type[Decode]) -> Credential:
    return Credential(
        tenant_id=r["tenant_id"],
        name=r["name"],
        kind=r["kind"],
        secret=r["secret"],
        created_at=d.time(r["created_at"]),
        updated_at=d.time(r["updated_at"]),
    )


def credential_put(
    tenant_id: str, name: str, kind: str, secret: str
) -> Plan[tuple[Credential, bool]]:
    exists = yield one("credential_get", credential, tenant_id=tenant_id, name=name)
    if exists is None and (yield value("credential_count", tenant_id=tenant_id)) >= (
        MAX_CREDENTIALS
    ):
        raise Conflict(
            f"the tenant has {MAX_CREDENTIALS} credentials, the most it may hold; delete one "
            "it no longer uses first"
        )
    found: Credential | None = yield one(
        "credential_put", credential, tenant_id=tenant_id, name=name, kind=kind, secret=secret
    )
    assert found is not None
    return found, exists is None


def credential_get(tenant_id: str, name: str) -> Plan[Credential | None]:
    found: Credential | None = yield one(
        "credential_get", credential, tenant_id=tenant_id, name=name
    )
    return found


def credential_list(tenant_id: str) -> Plan[list[Credential]]:
    found: list[Credential] = yield all_("credential_list", credential, tenant_id=tenant_id)
    return found


def credential_delete(tenant_id: str, name: str) -> Plan[bool]:
    return bool((yield count("credential_delete", tenant_id=tenant_id, name=name)))


def _statements(table: str) -> tuple[str, str]:
    found = _STATEMENTS.get(table)
    if found is None:
        raise ValidationError(f"no sealed values are kept in {table!r}", "table")
    return found


def sealed_page(table: str, after: SealedRow | None, limit: int) -> Plan[list[SealedRow]]:
    def row(r: Row, d: type[Decode]) -> SealedRow:
        return SealedRow(table, str(r["key"]), r["tenant_id"], r["raw"])

    found: list[SealedRow] = yield all_(
        _statements(table)[0],
        row,
        after_key=None if after is None else after.key,
        after_tenant=None if after is None else after.tenant_id,
        limit=limit,
    )
    return found


def sealed_replace(row: SealedRow, new: str) -> Plan[bool]:
    changed = yield count(
        _statements(row.table)[1],
        key=row.key,
        tenant_id=row.tenant_id,
        old=row.raw,
        new=new,
    )
    return bool(changed)


class CredentialMethods(Runs):
    """The credential and sealed-row methods of :class:`~duetime.store.protocols.Store`."""

    async def credential_put(
        self, tenant_id: str, name: str, kind: str, secret: str
    ) -> tuple[Credential, bool]:
        return await self._run(credential_put(tenant_id, name, kind, secret), write=True)

    async def credential_get(self, tenant_id: str, name: str) -> Credential | None:
        return await self._run(credential_get(tenant_id, name))

    async def credential_list(self, tenant_id: str) -> list[Credential]:
        return await self._run(credential_list(tenant_id))

    async def credential_delete(self, tenant_id: str, name: str) -> bool:
        return await self._run(credential_delete(tenant_id, name), write=True)

    async def sealed_page(self, table: str, after: SealedRow | None, limit: int) -> list[SealedRow]:
        return await self._run(sealed_page(table, after, limit))

    async def sealed_replace(self, row: SealedRow, new: str) -> bool:
        return await self._run(sealed_replace(row, new), write=True)
