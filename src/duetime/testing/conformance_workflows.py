"""Store conformance for tasks that know each other: the graph create, what follows an end
(a parent's failure by each child's policy, callbacks), workflows (cancel, replay), the ends
a store tells its waits, and the notification outbox — run unchanged against every backend.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_workflows import *  # noqa: F403
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from duetime.clock import FakeClock
from duetime.errors import ValidationError
from duetime.ids import new_id, new_ids
from duetime.store.protocols import Store
from duetime.testing.conformance import (
    _claim_one,
    _complete,
    _completion,
    _create,
    _fail,
    _get,
    _succeed,
    _tenant,
    new_task,
)
from duetime.types import (
    Callback,
    CallbackKind,
    Follow,
    NewTask,
    NewWorkflow,
    NotificationEvent,
    NotificationSettings,
    ParentFailure,
    Task,
    TaskFilter,
    TaskStatus,
)

S = TaskStatus
WORKER = {"type": "worker"}


def _follow(policy: ParentFailure = ParentFailure.FAIL, **kw: object) -> Follow:
    return Follow(on_parent_failure=policy, **kw)  # type: ignore[arg-type]


async def _graph(store: Store, tasks: Sequence[NewTask]) -> tuple[list[str], list[Task]]:
    ids = new_ids(len(tasks))
    made = await store.task_create_graph(ids, tasks)
    return ids, [m.task for m in made]


def _in(tenant: str, parents: Sequence[str] = (), **kw: object) -> NewTask:
    return new_task(tenant, depends_on=tuple(parents), **kw)


async def _fail_task(store: Store, task: Task) -> None:
    await _fail(store, await _claim_one(store, task))


async def test_a_graph_create_links_tasks_of_the_same_call(store: Store) -> None:
    tenant = await _tenant(store)
    ids = new_ids(3)
    tasks = [
        new_task(tenant, name="a"),
        new_task(tenant, name="b", depends_on=(ids[0],)),
        new_task(tenant, name="c", depends_on=(ids[0], ids[1])),
    ]
    made = await store.task_create_graph(ids, tasks)
    assert [m.task.status for m in made] == [S.READY, S.BLOCKED, S.BLOCKED]
    assert [m.task.id for m in made] == ids and all(m.created for m in made)
    assert (await _get(store, made[2].task)).depends_on == (ids[0], ids[1])
    await _succeed(store, await _claim_one(store, made[0].task))
    assert (await _get(store, made[1].task)).status is S.READY
    assert (await _get(store, made[2].task)).status is S.BLOCKED
    await _succeed(store, await _claim_one(store, made[1].task))
    assert (await _get(store, made[2].task)).status is S.READY


async def test_a_graph_create_refuses_an_unknown_parent_and_makes_nothing(store: Store) -> None:
    tenant = await _tenant(store)
    other = await _tenant(store, "other")
    theirs = await _create(store, other)
    for parent in (new_id(), theirs.id, "not-an-id"):
        try:
            await _graph(store, [_in(tenant), _in(tenant, [parent])])
        except ValidationError as exc:
            assert exc.field == "depends_on"
        else:
            raise AssertionError(f"{parent}: a parent of another tenant was accepted")
    assert await store.task_statuses([theirs.id]) == {theirs.id: S.READY}
    assert await store.task_list(TaskFilter(tenant_id=tenant)) == []


async def test_a_parents_failure_does_what_each_child_asks(store: Store) -> None:
    tenant = await _tenant(store)
    ids = new_ids(5)
    tasks = [
        _in(tenant),
        _in(tenant, [ids[0]]),  # fail
        _in(tenant, [ids[0]], follow=_follow(ParentFailure.RUN)),
        _in(tenant, [ids[0]], follow=_follow(ParentFailure.CANCEL)),
        _in(tenant, [ids[1]], follow=_follow(ParentFailure.RUN)),  # grandchild of a failed one
    ]
    made = await store.task_create_graph(ids, tasks)
    await _fail_task(store, made[0].task)
    after = await store.task_statuses(ids)
    assert [after[i] for i in ids] == [S.FAILED, S.FAILED, S.READY, S.CANCELLED, S.READY]
    failed = await _get(store, made[1].task)
    assert failed.last_error == "a task it depends on failed or was cancelled"
    assert failed.finished_at is not None


async def test_a_child_of_a_parent_already_failed_starts_by_its_policy(store: Store) -> None:
    tenant = await _tenant(store)
    parent = await _create(store, tenant)
    await _fail_task(store, parent)
    _, made = await _graph(
        store,
        [
            _in(tenant, [parent.id]),
            _in(tenant, [parent.id], follow=_follow(ParentFailure.RUN)),
            _in(tenant, [parent.id], follow=_follow(ParentFailure.CANCEL)),
        ],
    )
    assert [t.status for t in made] == [S.FAILED, S.READY, S.CANCELLED]
    assert [(await _get(store, t)).status for t in made] == [S.FAILED, S.READY, S.CANCELLED]


async def test_an_end_makes_its_callbacks_once_in_the_same_transaction(store: Store) -> None:
    tenant = await _tenant(store)
    target = {"type": "http", "url": "http://127.0.0.1:9/cb", "method": "POST", "headers": {}}
    callbacks = {
        CallbackKind.ON_SUCCESS: Callback(target, queue="cb"),
        CallbackKind.ON_FAILURE: Callback(target, queue="cb"),
        CallbackKind.ON_END: Callback(WORKER, queue="cb", name="ended"),
    }
    _, (task,) = await _graph(store, [_in(tenant, follow=_follow(callbacks=callbacks))])
    lease = await _claim_one(store, task)
    done = _completion(lease, result_json='{"n": 1}')
    assert (await _complete(store, done)).accepted
    assert not (await _complete(store, done)).accepted  # a repeat under the old lease: nothing
    made = await store.task_list(TaskFilter(tenant_id=tenant, queue="cb"))
    assert sorted(t.name or "" for t in made) == ["ended", "on_success"]
    body = orjson.loads(next(t for t in made if t.name == "on_success").payload_json)
    assert body["callback"] == "on_success" and body["result"] == {"n": 1}
    assert body["task_id"] == task.id and body["status"] == "succeeded"
    assert all(t.status is S.READY and t.labels["duetime.callback_of"] == task.id for t in made)


async def test_a_store_tells_its_feed_the_ends_while_someone_waits(store: Store) -> None:
    tenant = await _tenant(store)
    heard: list[str] = []
    store.ended.listen(lambda ids: heard.extend(ids or []))
    a = await _create(store, tenant)
    await _succeed(store, await _claim_one(store, a))
    assert heard == []  # nobody waits: nothing is even gathered
    store.ended.waits += 1
    try:
        b = await _create(store, tenant)
        c = await _create(store, tenant, run_at=None)
        await _succeed(store, await _claim_one(store, b))
        await store.task_cancel(tenant, c.id)
        assert heard == [b.id, c.id]
    finally:
        store.ended.waits -= 1
        store.ended.listen(lambda ids: None)


async def test_a_workflow_is_cancelled_and_replayed_as_a_whole(store: Store) -> None:
    tenant = await _tenant(store)
    workflow = NewWorkflow(id=new_id(), tenant_id=tenant, name="w", idempotency_key="k")
    ids = new_ids(3)
    tasks = [
        _in(tenant, follow=_follow(workflow_id=workflow.id, ref="a")),
        _in(tenant, [ids[0]], follow=_follow(workflow_id=workflow.id, ref="b")),
        _in(tenant, [ids[1]], follow=_follow(workflow_id=workflow.id, ref="c")),
    ]
    made, created = await store.workflow_create(workflow, ids, tasks)
    assert created and [n.ref for n in made.nodes] == ["a", "b", "c"]
    assert made.nodes[2].parents == ("b",)
    again, created = await store.workflow_create(
        NewWorkflow(id=new_id(), tenant_id=tenant, idempotency_key="k"), new_ids(3), tasks
    )
    assert not created and again.workflow.id == workflow.id
    await _fail_task(store, made.nodes[0].task)
    failed = await store.workflow_get(tenant, workflow.id)
    assert failed is not None and {n.task.status for n in failed.nodes} == {S.FAILED}
    replayed = await store.workflow_replay(tenant, workflow.id)
    assert [n.task.status for n in replayed.nodes] == [S.READY, S.BLOCKED, S.BLOCKED]
    await _succeed(store, await _claim_one(store, replayed.nodes[0].task))
    lease = await _claim_one(store, replayed.nodes[1].task)
    cancelled = await store.workflow_cancel(tenant, workflow.id)
    statuses = [n.task.status for n in cancelled.nodes]
    assert statuses == [S.SUCCEEDED, S.RUNNING, S.CANCELLED]
    assert cancelled.nodes[1].task.cancel_requested
    await _succeed(store, lease)  # its attempt succeeded: the work was done
    assert await store.workflow_get("someone-else", workflow.id) is None
    listed = await store.workflow_list(tenant)
    assert [(w.id, counts) for w, counts in listed] == [
        (workflow.id, {"succeeded": 2, "cancelled": 1})
    ]


async def test_notification_events_are_sent_once_by_key_and_window(
    store: Store, clock: FakeClock
) -> None:
    tenant = await _tenant(store)
    hook = {"type": "http", "url": "http://127.0.0.1:9/n", "method": "POST", "headers": {}}
    await store.notification_put(tenant, ["task.dead_lettered"], hook)
    await store.notification_record(tenant, "target.circuit_opened", {"x": 1})  # not asked
    for name in ("a", "b"):
        await _fail_task(store, await _create(store, tenant, name=name, queue="jobs"))
        clock.advance(1)  # events go in the order they happened
    assert await store.notification_events_count() == 2
    seen: list[tuple[str, list[NotificationEvent]]] = []

    def compose(
        tenant_id: str,
        event_type: str,
        settings: NotificationSettings | None,
        found: Sequence[NotificationEvent],
    ) -> NewTask:
        seen.append((event_type, list(found)))
        return new_task(tenant_id, idempotency_key="evt_" + found[0].id.replace("-", ""))

    assert await store.notifications_send(60, 100, compose) == [("task.dead_lettered", 2)]
    ((kind, events),) = seen
    assert kind == "task.dead_lettered"
    assert [e.item["name"] for e in events] == ["a", "b"]
    assert events[0].item["queue"] == "jobs" and events[0].item["error"] == "boom"
    assert await store.notification_events_count() == 0
    await _fail_task(store, await _create(store, tenant, name="c"))
    assert await store.notifications_send(60, 100, compose) == []  # within the window
    clock.advance(60)
    assert await store.notifications_send(60, 100, compose) == [("task.dead_lettered", 1)]
