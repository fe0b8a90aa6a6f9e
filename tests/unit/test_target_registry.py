"""Every registered target type is handled everywhere a type must be: a request model, a
deliverer and checker when pushed, redaction when its URL carries a secret, a failure class, a
problem tag, its extra in pyproject. A type added to :mod:`duetime.target_types` and missed in
one of these places fails here, by name (CONTRIBUTING.md "Adding a delivery target")."""

from __future__ import annotations

import importlib.util
import tomllib
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from duetime import metrics
from duetime.api import schemas
from duetime.api.problems import field_path
from duetime.config import Settings
from duetime.delivery import registry
from duetime.delivery.redact import REDACTED, public_target
from duetime.errors import ValidationError
from duetime.observe import endings
from duetime.sdk import http_target, worker_target
from duetime.target_types import (
    BROKER_TYPES,
    PULL_TYPES,
    PUSH_TYPES,
    SECRET_URL_TYPES,
    TARGETS,
    TargetType,
)
from duetime.types import AttemptOutcome, Completion, TaskStatus

ROOT = Path(__file__).resolve().parents[2]
TYPES = list(TargetType)
ids = str


def _request_models() -> dict[str, type[pydantic.BaseModel]]:
    """The ``Target`` union's models by the ``type`` literal each accepts."""
    union, *_ = typing.get_args(schemas.Target)
    out: dict[str, type[pydantic.BaseModel]] = {}
    for model in typing.get_args(union):
        for literal in typing.get_args(model.model_fields["type"].annotation):
            assert literal not in out, f"{literal!r} has two request models"
            out[literal] = model
    return out


def test_every_type_has_exactly_one_spec() -> None:
    assert set(TARGETS) == set(TargetType)
    for kind, spec in TARGETS.items():
        assert spec.type is kind and kind.spec is spec
        assert spec.title
        assert spec.pushed or not (spec.broker or spec.schemes), "a pulled type has no address"
        assert spec.secret_url or not spec.broker, "a broker URL carries the broker's credentials"
        assert (spec.extra is None) == (spec.requires is None)
    assert set(TargetType) == PUSH_TYPES | PULL_TYPES and not PUSH_TYPES & PULL_TYPES


def test_the_request_models_are_the_registered_types_exactly() -> None:
    assert sorted(_request_models()) == sorted(t.value for t in TargetType)


@pytest.mark.parametrize("kind", TYPES, ids=ids)
def test_a_types_url_takes_the_schemes_its_spec_names(kind: TargetType) -> None:
    model = _request_models()[kind.value]
    spec = kind.spec
    assert ("url" in model.model_fields) == bool(spec.schemes), "schemes iff a url field"
    if not spec.schemes:
        return
    with pytest.raises(pydantic.ValidationError) as caught:
        pydantic.TypeAdapter(schemas.Target).validate_python({"type": kind.value, "url": "zz://h"})
    [error] = [e for e in caught.value.errors() if e["loc"] == (kind.value, "url")]
    assert error["type"] == "url_scheme"
    assert error["ctx"] == {"schemes": " or ".join(spec.schemes)}


@pytest.mark.parametrize("kind", TYPES, ids=ids)
def test_a_problem_names_the_field_without_the_union_tag(kind: TargetType) -> None:
    assert field_path(("body", "tasks", 3, "target", kind.value, "url")) == "tasks.3.target.url"


def test_pushed_types_are_exactly_the_delivery_kinds() -> None:
    kinds = [kind.type for kind in registry.KINDS]
    assert len(kinds) == len(set(kinds)), "one Kind per type"
    assert set(kinds) == PUSH_TYPES


@pytest.mark.parametrize("kind", sorted(PUSH_TYPES), ids=ids)
def test_a_pushed_types_deliverer_and_checker_load(kind: TargetType) -> None:
    [entry] = [k for k in registry.KINDS if k.type is kind]
    assert entry.installed, f"the dev install lacks {kind.spec.requires}"
    deliverer = entry.load(entry.deliverer)
    assert callable(deliverer.deliver) and callable(deliverer.close)
    check = entry.load(entry.checker)
    if kind.spec.schemes:  # the create-time check refuses what the request model refuses
        with pytest.raises(ValidationError) as caught:
            check({"type": kind.value, "url": "zz://127.0.0.1/"}, allow_private=True)
        assert caught.value.field == "target.url"


@pytest.mark.parametrize("kind", sorted(PULL_TYPES), ids=ids)
def test_a_pulled_type_passes_the_create_time_check(kind: TargetType) -> None:
    validate = registry.target_validator(Settings(admin_token="t"))
    assert validate({"type": kind.value}) is None


def test_the_one_pulled_type_is_the_one_the_store_claims_for_workers() -> None:
    # store/core/hot.py claim_targets and the partial claim indexes know `worker` by name.
    assert {TargetType.WORKER} == PULL_TYPES


@pytest.mark.parametrize("kind", sorted(SECRET_URL_TYPES), ids=ids)
def test_a_secret_in_a_types_url_is_never_shown(kind: TargetType) -> None:
    assert kind.spec.schemes and kind.spec.pushed
    for scheme in kind.spec.schemes:
        for url in (
            f"{scheme}://user:hunter2@127.0.0.1:1/",
            f"{scheme}://127.0.0.1:1/?password=hunter2",
        ):
            shown = public_target({"type": kind.value, "url": url})["url"]
            assert "hunter2" not in shown and REDACTED in shown


@pytest.mark.parametrize("kind", TYPES, ids=ids)
def test_every_type_has_a_documented_failure_class(kind: TargetType) -> None:
    failed = Completion(
        task_id="t",
        lease_id="l",
        outcome=AttemptOutcome.FAILED,
        started_at=datetime(2030, 1, 1, tzinfo=UTC),
        duration_ms=1.0,
        error="refused",
        status=TaskStatus.FAILED,
    )
    found = endings.failure_class(kind.value, failed)
    expected = (
        "worker_error"
        if kind in PULL_TYPES
        else "broker_nack"
        if kind in BROKER_TYPES
        else "connect"
    )
    assert found == expected
    assert f"``{found}``" in (endings.__doc__ or "")
    [family] = [m for m in metrics.REGISTRY.collect() if m.name == "duetime_attempt_failures"]
    assert found in family.documentation


@pytest.mark.parametrize("kind", [t for t in TYPES if t.spec.extra], ids=ids)
def test_a_types_extra_is_in_pyproject_and_dev(kind: TargetType) -> None:
    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    spec = kind.spec
    assert spec.extra in extras, f"no duetime[{spec.extra}] extra"
    assert set(extras[spec.extra]) <= set(extras["dev"]), "the tests need it in dev too"
    assert spec.requires and importlib.util.find_spec(spec.requires) is not None


def test_the_sdks_target_helpers_make_registered_types() -> None:
    made: list[dict[str, Any]] = [http_target("https://example.com/"), worker_target()]
    assert {t["type"] for t in made} <= {t.value for t in TargetType}
