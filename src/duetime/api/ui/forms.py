"""Settings forms validated by the API's own request models: the fields a form posts become
the JSON body the API would receive (an empty field is ``null``; a number is a number; any
other text stays text, for the model to refuse), so a value the API refuses the dashboard
refuses with the same words, shown next to its field."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import orjson
import pydantic

from duetime.errors import ValidationError

M = TypeVar("M", bound=pydantic.BaseModel)

FieldErrors = dict[str, str]
"""Field name → what is wrong with it (``""`` names the form as a whole)."""


def _value(raw: str) -> Any:
    text = raw.strip()
    if not text:
        return None
    try:
        found = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return found if isinstance(found, int | float) and not isinstance(found, bool) else text


def body_of(
    form: dict[str, list[str]], numbers: Iterable[str], flags: Iterable[str] = ()
) -> dict[str, Any]:
    """The JSON body a settings form stands for: each of ``numbers`` as a number (``null``
    when empty), each of ``flags`` a checkbox (present: true)."""
    body: dict[str, Any] = {name: _value((form.get(name) or [""])[0]) for name in numbers}
    body.update({name: name in form for name in flags})
    return body


def validate(model: type[M], body: dict[str, Any]) -> tuple[M | None, FieldErrors]:
    """``body`` validated as the API validates a request (JSON mode, strict); on failure, the
    first message of each field, in pydantic's words, as the API's problem would give them."""
    try:
        return model.model_validate_json(orjson.dumps(body)), {}
    except pydantic.ValidationError as exc:
        errors: FieldErrors = {}
        for error in exc.errors(include_url=False):
            name = str(error["loc"][0]) if error["loc"] else ""
            errors.setdefault(name, error["msg"])
        return None, errors


def error_of(exc: ValidationError) -> FieldErrors:
    """A rule checked after the model (``ValidationError`` naming its field) as field errors."""
    return {exc.field or "": exc.detail}


def shown(value: Any) -> str:
    """A setting as its form field shows it: empty for none, numbers without a needless
    ``.0``."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
