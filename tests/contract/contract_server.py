"""The contract tests' server handle (imported as ``contract_server``)."""

from __future__ import annotations

from dataclasses import dataclass

ADMIN_TOKEN = "contract-admin-token-0123456789abcdef"


@dataclass(frozen=True)
class Server:
    base_url: str
    api_key: str

    def headers_for(self, path: str) -> dict[str, str]:
        token = ADMIN_TOKEN if path.startswith("/v1/admin/") else self.api_key
        return {"Authorization": f"Bearer {token}"}
