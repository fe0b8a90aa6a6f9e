"""Tasks named by a unique start of their id, schedules by their key, on each store ``--store``
selects: the API's ``id_prefix`` filter (a range of the primary key), ``GET
/v1/schedules/by-key/{key}``, and the CLI resolving what it is given through them, against the
real API on loopback."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from duetime import cli

WORKER = {"target": {"type": "worker"}}


def make_tasks(url: str, n: int) -> list[str]:
    """``n`` tasks made in one batch (ids alike up to their last digits), newest first."""
    made = httpx.post(f"{url}/v1/tasks/batch", json={"tasks": [WORKER] * n}, timeout=10)
    assert made.status_code == 201, made.text
    return sorted((t["id"] for t in made.json()["items"]), reverse=True)


def listed(url: str, **params: str) -> list[str]:
    found = httpx.get(f"{url}/v1/tasks", params=params, timeout=10)
    assert found.status_code == 200, found.text
    return [t["id"] for t in found.json()["items"]]


def common_start(ids: list[str]) -> str:
    """The longest start every id shares (never ending on a dash)."""
    length = 0
    while all(len(i) > length and i[length] == ids[0][length] for i in ids):
        length += 1
    return ids[0][:length].rstrip("-")


def unique_start(task_id: str, others: list[str]) -> str:
    """The shortest start of ``task_id`` no other id shares (4 hex digits at least)."""
    for length in range(4, len(task_id) + 1):
        start = task_id[:length]
        if not start.endswith("-") and not any(o.startswith(start) for o in others):
            return start
    raise AssertionError("ids are unique")


def test_the_id_prefix_filter_is_a_range_of_ids(live_api: str) -> None:
    ids = make_tasks(live_api, 3)
    common = common_start(ids)
    assert listed(live_api, id_prefix=common) == ids
    for task_id in ids:
        others = [i for i in ids if i != task_id]
        start = unique_start(task_id, others)
        assert listed(live_api, id_prefix=start) == [task_id]
        assert listed(live_api, id_prefix=task_id) == [task_id]  # a whole id is a prefix too
        no_dashes = task_id.replace("-", "")[:20].upper()  # any case, dashes or not
        assert task_id in listed(live_api, id_prefix=no_dashes)
    assert listed(live_api, id_prefix="ffff") == []
    page = httpx.get(f"{live_api}/v1/tasks", params={"id_prefix": common, "limit": 2}).json()
    assert [t["id"] for t in page["items"]] == ids[:2]
    rest = listed(live_api, id_prefix=common, cursor=page["next_cursor"])
    assert rest == ids[2:]
    assert listed(live_api, id_prefix=common, status="ready") == ids  # with other filters


@pytest.mark.parametrize(
    "bad", ["abc", "zzzz", "0190-f000", "0190f000-7c3a-7000-8000-0000000000001", "01 90", ""]
)
def test_a_malformed_id_prefix_is_a_422_naming_it(live_api: str, bad: str) -> None:
    answer = httpx.get(f"{live_api}/v1/tasks", params={"id_prefix": bad})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "id_prefix"


def run(*args: str, url: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli.app, [*args, "--url", url], env={"DUETIME_URL": None})
    assert result.exit_code == code, (args, result.output)
    assert "Traceback" not in result.output
    return result.stdout if code == 0 else result.stderr


def test_task_commands_take_a_unique_start_of_an_id(live_api: str) -> None:
    ids = make_tasks(live_api, 3)
    first, second, third = ids
    start = unique_start(first, ids[1:])
    assert json.loads(run("task", "get", start, url=live_api))["id"] == first
    assert json.loads(run("task", "get", start.upper(), url=live_api))["id"] == first
    assert json.loads(run("task", "attempts", unique_start(second, [first, third]), url=live_api))
    cancelled = run("task", "cancel", unique_start(third, [first, second]), url=live_api)
    assert json.loads(cancelled)["id"] == third and json.loads(cancelled)["status"] == "cancelled"
    retried = json.loads(run("task", "retry", unique_start(third, [first, second]), url=live_api))
    assert retried["id"] == third and retried["status"] == "ready"
    moved = run("task", "update", start, "--priority", "5", url=live_api)
    assert json.loads(moved)["priority"] == 5

    common = common_start(ids)
    several = run("task", "get", common, url=live_api, code=2)
    assert several.count("\n") == 1 and "matches several tasks" in several
    assert all(task_id in several for task_id in ids)
    none = run("task", "get", "ffffffff", url=live_api, code=3)
    assert none == "error: no task with id prefix 'ffffffff'\n"
    short = run("task", "get", "019", url=live_api, code=2)
    assert "at least 4" in short
    listed_by_prefix = json.loads(run("task", "list", "--id-prefix", start, url=live_api))
    assert [t["id"] for t in listed_by_prefix["items"]] == [first]


def test_task_create_takes_parents_by_a_unique_start_of_their_ids(live_api: str) -> None:
    ids = make_tasks(live_api, 3)
    first, second, third = ids
    parents = [unique_start(first, ids[1:]), second.upper()]
    args = ["task", "create", "--worker"]
    child = json.loads(
        run(*args, "--depends-on", parents[0], "--depends-on", parents[1], url=live_api)
    )
    assert child["depends_on"] == [first, second]
    several = run(*args, "--depends-on", common_start(ids), url=live_api, code=2)
    assert "matches several tasks" in several and third in several
    none = run(*args, "--depends-on", "ffffffff", url=live_api, code=3)
    assert none == "error: no task with id prefix 'ffffffff'\n"


def test_schedule_commands_take_a_key(live_api: str) -> None:
    declared = httpx.put(
        f"{live_api}/v1/schedules/by-key/nightly-report",
        json={"every": "PT1H", "task": {**WORKER, "name": "report"}},
    )
    assert declared.status_code == 201, declared.text
    schedule_id = declared.json()["id"]
    by_key = httpx.get(f"{live_api}/v1/schedules/by-key/nightly-report")
    assert by_key.status_code == 200 and by_key.json()["id"] == schedule_id
    missing = httpx.get(f"{live_api}/v1/schedules/by-key/nope")
    assert missing.status_code == 404 and missing.json()["status"] == 404

    got = json.loads(run("schedule", "get", "nightly-report", url=live_api))
    assert got["id"] == schedule_id and got["key"] == "nightly-report"
    paused = json.loads(run("schedule", "pause", "nightly-report", url=live_api))
    assert paused["id"] == schedule_id and paused["paused"] is True
    task = json.loads(run("schedule", "trigger", "nightly-report", url=live_api))
    assert task["schedule_id"] == schedule_id
    by_schedule = json.loads(run("task", "list", "--schedule-id", "nightly-report", url=live_api))
    assert [t["id"] for t in by_schedule["items"]] == [task["id"]]
    assert json.loads(run("schedule", "get", schedule_id, url=live_api))["id"] == schedule_id
    nothing = run("schedule", "get", "no-such-key", url=live_api, code=3)
    assert nothing == "error: no schedule with id or key 'no-such-key'\n"
