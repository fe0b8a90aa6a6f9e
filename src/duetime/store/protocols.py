"""What a store must do. Both backends implement :class:`Store`; ``duetime.testing.conformance``
is the one suite that checks every contract below against each of them.

Roles: :class:`Store` is the union of small protocols, one per role (tenants, named
credentials and the rows holding sealed values, target circuits,
tasks, counters, promotion, claims, completions, leases, queues, leadership, schedules,
occurrences, notifications, retention, history, the history archive, the store's life and clock).
Each service depends on the role it uses — the leader on :class:`Leadership`, the promoter on
:class:`PromoterStore` — so a unit test can hand it a small fake (:mod:`duetime.testing.fakes`) or
an in-memory SQLite store, and a reader sees what a service can touch. Where a service needs more
than one role, an intersection protocol below names what it uses; :class:`ApiStore` is the HTTP
API's (and dashboard's) view.

Method names are noun-first so related calls sort together. Every state change is one conditional
write on the current state (and lease, for running tasks): a call that lost a race changes nothing
and says so (``Conflict``, ``StaleLease``, or ``accepted=False``).

Time: every "is it due?" and "has the lease expired?" decision uses the store's clock —
``now()`` in PostgreSQL — unless the store was built with a clock whose ``pinned()`` returns a time
(tests), in which case that time is used instead. All datetimes returned are timezone-aware UTC.

Errors: ``StoreUnavailable`` whenever the backend cannot be reached; ``NotFound`` for a missing
resource or one of another tenant; ``Conflict`` for a state that forbids the change;
``ValidationError`` for input that only the store can judge (an unknown ``depends_on`` id).

Audit (SPEC §8; docs/history.md): audit records are written by the store in the transaction of
every change of a task's status (and of run_at, priority, labels, payload, cancel_requested), every
attempt and every schedule revision, attributed to :data:`duetime.history.actor.current_actor` when
set, else the lease holder (``worker:<id>``), the schedule, ``api`` (creates) or ``node``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Protocol, runtime_checkable

from duetime.history.events import HistoryEvent, HistoryFilter
from duetime.history.retention import RetentionPolicy, TaskArchiver
from duetime.store.counters import CountKey, Reconciled
from duetime.store.ended import EndedFeed
from duetime.types import (
    ApiKey,
    Attempt,
    ClaimRequest,
    ClientCertificate,
    Completion,
    CompletionResult,
    Credential,
    HeldPayload,
    KeyFigure,
    Lease,
    LeasedEnd,
    NewSchedule,
    NewTask,
    NewWorkflow,
    NotificationEvent,
    NotificationSettings,
    ParentsOf,
    Queue,
    QueueSettings,
    QueueStats,
    Release,
    Released,
    Schedule,
    ScheduleAdvance,
    ScheduleChange,
    ScheduleDue,
    ScheduleFilter,
    ScheduleRevision,
    SealedRow,
    SigningKey,
    SigningSecret,
    SqlWorkflowRequest,
    StatusCount,
    TargetCircuit,
    Task,
    TaskCreated,
    TaskFilter,
    TaskPatch,
    TaskStatus,
    Tenant,
    TenantQuotas,
    TenantUsage,
    Tick,
    TickFilter,
    TickOutcome,
    UiSession,
    WorkerInfo,
    Workflow,
    WorkflowView,
)


class Signal(Protocol):
    """A wake-up call between components, across every node that shares the store.

    ``notify()`` is cheap and may coalesce; ``wait(timeout)`` returns True when notified since the
    last wait (or during it), False on timeout. A missed signal only costs latency, never work:
    every waiter also polls.
    """

    generation: int
    """Counts the times the signal fired on this node (notified here or by another node)."""

    horizon: datetime | None
    """``due_signal``: tasks due at or after this time need no wake-up, because the leader's
    promoter wakes by then anyway (it sets this before sleeping and clears it on waking; None:
    unknown). See :mod:`duetime.store.horizon`."""

    def notify(self, pulls_only: bool = False) -> None:
        """Fire the signal. ``pulls_only``: only what :meth:`wait_after` watches (the lease API's
        long polls) needs waking: the change concerns ``worker`` tasks, which the dispatchers
        waiting in :meth:`wait` never claim, so they are left asleep (on every node)."""

    def notify_due(self, at: datetime) -> None:
        """:meth:`notify` for a task due at ``at``, unless that is at or after :attr:`horizon`."""

    async def wait(self, timeout: float) -> bool: ...

    async def wait_after(self, generation: int, timeout: float) -> bool:
        """True once :attr:`generation` differs from ``generation`` (read before checking for
        work), False after ``timeout``. For any number of waiters: unlike :meth:`wait` it
        consumes nothing, so it never takes a wake-up from another component."""


@runtime_checkable
class LeaseCompleter(Protocol):
    """A store that can end succeeded attempts by lease id alone, without the caller reading the
    tasks first (the lease API's hot path; PostgreSQL, where each read is a round trip)."""

    async def task_complete_leased(
        self,
        tenant_id: str,
        lease_ids: Sequence[str],
        results: Sequence[str | None],
        logs: Sequence[str | None] | None = None,
    ) -> dict[str, LeasedEnd]:
        """End as ``succeeded`` (with ``results[i]``, JSON text) each task of ``tenant_id``
        running under ``lease_ids[i]`` that has no dependents, writing its attempt (started at
        the lease's start, worker = the lease's holder, ``logs[i]`` recorded as
        :func:`~duetime.store.recorded.recordable` would) as :meth:`Store.task_complete_many`
        does, fenced alike (``logs`` None: no completion has logs). Returns lease_id →
        :class:`~duetime.types.LeasedEnd` for the ones it ended; the rest (stale, another
        tenant's, a task with dependents, a repeated lease id) are left unchanged for the
        caller's general path (:meth:`Store.task_leases_get` then
        :meth:`Store.task_complete_many`), which tells stale from the rest."""


@runtime_checkable
class CreateHandoff(Protocol):
    """A store that can create tasks and claim for a waiting lease poll in one transaction (a
    direct handoff): one commit for both, and no wake-up between the create and the poll's
    claim (docs/architecture.md, "One task's path")."""

    async def task_create_claimed(
        self, tasks: Sequence[NewTask], claim: ClaimRequest
    ) -> tuple[list[TaskCreated], list[Lease]]:
        """:meth:`Store.task_create_many` of ``tasks`` and, before it commits,
        :meth:`Store.task_claim` of ``claim`` (which sees them): the created tasks (one the
        claim took is answered running, under its lease) and the leases. A store may answer
        with a plain create and no leases when the claim cannot be made there (a limited queue,
        a tenant with a quota, tasks with parents); the caller then claims as usual."""


# -- life of the store -----------------------------------------------------------------------------


class StoreClock(Protocol):
    """The store's clock: what every "is it due?" decision is measured against."""

    async def now(self) -> datetime:
        """The store's clock (or the pinned test time)."""


class Lifecycle(StoreClock, Protocol):
    """Life of the store: connect, migrate, check, close (the node, the CLI, ``/readyz``)."""

    async def open(self) -> None:
        """Connect. Does not migrate (see :meth:`migrate`). Raises ``StoreUnavailable``."""

    async def close(self) -> None:
        """Release every connection; idempotent."""

    async def migrate(self) -> list[str]:
        """Apply pending schema migrations in order, under a lock so concurrent nodes are safe.
        Returns the versions applied (empty when current)."""

    async def migrations_pending(self) -> list[str]:
        """Versions not yet applied (empty when current)."""

    async def ping(self) -> None:
        """Round-trip to the backend; raises ``StoreUnavailable`` when it cannot."""


# -- tenancy ---------------------------------------------------------------------------------------


class TenantLookup(Protocol):
    """Read tenants (the dispatcher reads their weights for its fair shares of slots)."""

    async def tenant_get(self, tenant_id: str) -> Tenant | None:
        """The tenant, or None."""

    async def tenant_list(self) -> list[Tenant]:
        """Every tenant, oldest first."""


class TenantStore(TenantLookup, Protocol):
    """Tenants, their API keys and quotas (auth, admin calls, quota checks)."""

    async def tenant_create(self, name: str, *, tenant_id: str | None = None) -> Tenant:
        """Create a tenant (and its first signing secret). ``Conflict`` if the id exists."""

    async def api_key_create(self, tenant_id: str, key_id: str, key_hash: str) -> ApiKey:
        """Store a key's hash for a tenant. ``NotFound`` if the tenant does not exist."""

    async def api_key_get_by_hash(self, key_hash: str) -> ApiKey | None:
        """The live key with this hash, or None (deleted keys are gone)."""

    async def api_key_delete(self, key_id: str) -> bool:
        """Delete a key; False when it did not exist."""

    async def tenant_quotas_put(self, tenant_id: str, quotas: TenantQuotas) -> Tenant:
        """Replace the tenant's quotas; its create-rate bucket starts full. ``NotFound``."""

    async def tenant_usage(self, tenant_id: str) -> TenantUsage:
        """What counts against the quotas now: tasks not ended (read from the maintained
        counters, never by counting tasks) and live schedules. Zeros for an unknown tenant."""

    async def tenant_usage_many(self, tenant_ids: Sequence[str]) -> dict[str, TenantUsage]:
        """:meth:`tenant_usage` of each of ``tenant_ids`` (by id), in one read."""

    async def tenant_delete(self, tenant_id: str) -> bool:
        """Delete a tenant that has no task left to end and no live schedule, with its keys,
        secrets, notification settings and queues (its ended tasks and history stay). False when
        it does not exist; ``Conflict`` naming what is left otherwise."""

    async def tenant_creates_take(self, tenant_id: str, n: int) -> float | None:
        """Take ``n`` task creates from the tenant's ``max_creates_per_second`` token bucket
        (capacity: one second's worth, at least 1; a larger batch passes when the bucket is full
        and leaves it in debt). None when they may go ahead — always without that quota — else
        the seconds to wait. Holds across nodes."""


class SecretStore(Protocol):
    """A tenant's webhook signing secrets (the dispatcher's secret cache, their rotation)."""

    async def signing_secret_list(self, tenant_id: str) -> list[SigningSecret]:
        """The tenant's secrets that have not expired by the store's now, oldest first."""

    async def signing_secret_rotate(
        self, tenant_id: str, secret: str, overlap_seconds: float
    ) -> list[SigningSecret]:
        """Add ``secret`` and make every older live secret expire ``overlap_seconds`` from now
        (an earlier expiry is kept). Returns the live secrets afterwards."""


class CredentialStore(Protocol):
    """A tenant's named credentials (``/v1/credentials``; the dispatcher reads them to deliver).
    Secrets arrive sealed (:mod:`duetime.delivery.credentials`): the store keeps what it is
    given."""

    async def credential_put(
        self, tenant_id: str, name: str, kind: str, secret: str
    ) -> tuple[Credential, bool]:
        """Create or replace the credential ``name`` (``created_at`` kept on a replace,
        ``updated_at`` the store's now); the credential, and True when it was made now.
        ``Conflict`` when the tenant holds
        :data:`duetime.store.core.credentials.MAX_CREDENTIALS` others already."""

    async def credential_get(self, tenant_id: str, name: str) -> Credential | None:
        """The tenant's credential ``name`` (None: none, or another tenant's)."""

    async def credential_list(self, tenant_id: str) -> list[Credential]:
        """Every credential of the tenant, by name (byte order)."""

    async def credential_delete(self, tenant_id: str, name: str) -> bool:
        """Remove it; False when the tenant has none of that name."""


class SealedStore(Protocol):
    """The rows that hold sealed values, as ``duetime secrets rotate`` walks them (every
    tenant's)."""

    async def sealed_page(self, table: str, after: SealedRow | None, limit: int) -> list[SealedRow]:
        """Up to ``limit`` rows of ``table`` (one of
        :data:`duetime.store.core.credentials.SEALED_TABLES`) that may hold a credential, in key
        order after ``after`` (None: from the first); ``ValidationError`` for another table."""

    async def sealed_replace(self, row: SealedRow, new: str) -> bool:
        """Write ``new`` in place of ``row.raw`` if the row still holds exactly that (and
        change nothing else: no version, time or audit record moves); False when the row changed
        or went since it was read."""


# -- target circuits -----------------------------------------------------------------------------


class CircuitStore(Protocol):
    """Circuit breakers' shared state per (tenant, origin) (the dispatcher, ``GET /v1/targets``)."""

    async def circuit_put(self, circuit: TargetCircuit) -> None:
        """Record a circuit's new state (``changed_at`` is the store's now; ``opened`` counts up
        by one when ``state`` is ``open``)."""

    async def circuit_list(self, tenant_id: str) -> list[TargetCircuit]:
        """Every circuit the tenant's deliveries ever opened, by origin."""

    async def circuit_active(self, limit: int = 10_000) -> list[TargetCircuit]:
        """Up to ``limit`` circuits, of every tenant, open (or half-open) until after now."""


# -- outbound identity, held payloads, dashboard sessions -----------------------------------------


class SigningKeyStore(Protocol):
    """The keys that sign OIDC ID tokens (:mod:`duetime.delivery.identity`)."""

    async def signing_key_list(self) -> list[SigningKey]:
        """Every stored key, oldest generation first."""

    async def signing_key_add(
        self,
        kid: str,
        generation: int,
        algorithm: str,
        public_jwk: dict[str, Any],
        private_key: str,
        signs_in_seconds: float,
    ) -> bool:
        """Add the key of ``generation`` (published at once, signing ``signs_in_seconds`` from
        the store's now). False, adding nothing, when that generation exists: of nodes
        rotating at once, one key is made."""

    async def signing_key_delete(self, kids: Sequence[str]) -> int:
        """Remove the keys ``kids``; how many were there."""


class ClientCertificateStore(Protocol):
    """Tenants' TLS client certificates (``/v1/client-certificates``), the key sealed."""

    async def client_certificate_put(
        self,
        tenant_id: str,
        name: str,
        certificate: str,
        private_key: str,
        fingerprint: str,
        subject: str,
        not_after: datetime,
    ) -> tuple[ClientCertificate, bool]:
        """Create or replace the tenant's certificate ``name``; True when it was created."""

    async def client_certificate_get(self, tenant_id: str, name: str) -> ClientCertificate | None:
        """The tenant's certificate ``name``, or None."""

    async def client_certificate_list(self, tenant_id: str) -> list[ClientCertificate]:
        """The tenant's certificates, by name."""

    async def client_certificate_delete(self, tenant_id: str, name: str) -> bool:
        """Remove it; False when there was none."""


class HeldPayloadStore(Protocol):
    """Payloads duetime holds for tasks (``payload_held``)."""

    async def held_payload_put(self, hold_id: str, tenant_id: str, payload_json: str) -> None:
        """Hold ``payload_json`` under ``hold_id`` (no task yet: :meth:`held_payload_link`)."""

    async def held_payload_link(self, hold_id: str, tenant_id: str, task_id: str) -> None:
        """Record the task that refers to the hold (the sweep keeps it while the task is)."""

    async def held_payload_get(self, tenant_id: str, hold_id: str) -> HeldPayload | None:
        """The tenant's held payload ``hold_id``, or None."""

    async def held_payload_delete(self, hold_id: str) -> bool:
        """Remove it; False when there was none."""

    async def held_payload_sweep(self, unlinked_seconds: float, limit: int) -> int:
        """Remove up to ``limit`` holds no task refers to: unlinked for ``unlinked_seconds``,
        or whose task is gone. Returns how many."""


class SessionStore(Protocol):
    """Dashboard sessions, by the SHA-256 of the cookie's random id."""

    async def ui_session_create(
        self,
        token_hash: str,
        tenant_id: str | None,
        key_id: str | None,
        lifetime_seconds: float,
        idle_seconds: float,
    ) -> UiSession:
        """A new session (``tenant_id`` None: the admin's) ending ``lifetime_seconds`` from
        the store's now at the latest; sessions past either limit are removed."""

    async def ui_session_use(self, token_hash: str, idle_seconds: float) -> UiSession | None:
        """The live session of ``token_hash``, its ``last_seen`` moved to now; None when it is
        unknown, revoked, past its absolute limit, unused for ``idle_seconds``, or its API key
        was deleted."""

    async def ui_session_delete(self, token_hash: str) -> bool:
        """End one session (logout); False when there was none."""

    async def ui_session_revoke(self, tenant_id: str | None) -> int:
        """End every session of ``tenant_id`` (None: every session, the admin's too); how
        many."""


# -- tasks: the API's side -------------------------------------------------------------------------


class TaskStore(Protocol):
    """Tasks as the API (and the notifier) make, read and change them."""

    async def task_create_many(self, tasks: Sequence[NewTask]) -> list[TaskCreated]:
        """Create tasks all or nothing, in input order.

        A task whose (tenant, idempotency_key) exists already is not created; the existing task is
        returned with ``created=False`` (also for a repeat inside the same batch). Initial status:
        ``blocked`` if a parent has not succeeded, ``failed`` if a parent failed or was cancelled,
        else ``ready`` when ``run_at`` is None or not after now, else ``scheduled``. ``run_at``
        None means now. An unknown parent (or another tenant's) raises ``ValidationError`` with
        field ``depends_on`` and nothing is created. Fires ``ready_signal``/``due_signal``.
        """

    async def task_get(self, tenant_id: str, task_id: str) -> Task | None:
        """One task of the tenant, or None."""

    async def task_list(self, query: TaskFilter) -> list[Task]:
        """Up to ``query.limit`` tasks matching every filter, newest first (by id, descending),
        starting after ``query.cursor``. ``run_after``/``run_before`` bound ``run_at``
        (inclusive/exclusive); ``labels`` must all match."""

    async def task_update(self, tenant_id: str, task_id: str, patch: TaskPatch) -> Task:
        """Apply ``patch`` to a ``scheduled``, ``blocked``, ``ready`` or ``retrying`` task.
        A new ``run_at`` also moves ``due_at``; a due ``scheduled``/``retrying`` task becomes
        ``ready`` and a ``ready`` one whose ``run_at`` moves into the future becomes ``scheduled``.
        ``NotFound``; ``Conflict`` in any other status."""

    async def task_cancel(self, tenant_id: str, task_id: str) -> Task:
        """Cancel a waiting task at once; for a ``running`` one, record the request (it ends
        ``cancelled`` with its attempt, or ``succeeded`` if that attempt succeeded). Dependents of a
        task cancelled here fail. ``NotFound``; ``Conflict`` on a terminal task."""

    async def task_retry(self, tenant_id: str, task_id: str) -> Task:
        """Replay a ``failed`` or ``cancelled`` task: ``ready`` now, a new attempt series
        (``series_start = attempts``), errors cleared. ``NotFound``; ``Conflict`` otherwise."""

    async def attempt_list(self, tenant_id: str, task_id: str) -> list[Attempt]:
        """Every attempt of the task, by number. ``NotFound`` if the task is not the tenant's."""


class CounterStore(Protocol):
    """The maintained task counts (:mod:`duetime.store.counters`): read for metrics, kept by the
    leader's counter keeper."""

    async def task_count_by_status(self) -> list[StatusCount]:
        """Task counts per (tenant, queue, status) above zero, every tenant; for metrics. Read
        from the maintained counters (:mod:`duetime.store.counters`), never by counting tasks."""

    async def task_counts_fold(self, limit: int) -> int:
        """Leader maintenance: move up to ``limit`` pending count deltas into the totals and drop
        totals at zero. Returns how many deltas were folded (0 where the counters are written
        directly). Figures read before and after are the same."""

    async def task_counts_reconcile(
        self, after: CountKey | None, max_rows: int
    ) -> Reconciled | None:
        """Leader maintenance: recount the first (tenant, queue) after ``after`` in key order
        (the first of all when ``after`` is None) — among queues with counts or settings —
        against the task table, and correct its counters by the difference. A queue with more
        than ``max_rows`` tasks is not recounted (``skipped``). None when no key is after
        ``after``."""


# -- tasks: the engine's side ----------------------------------------------------------------------


class PromotionStore(Protocol):
    """Due ``scheduled``/``retrying`` tasks becoming ``ready`` (the promoter's side)."""

    @property
    def due_signal(self) -> Signal:
        """Fired when a task gets a ``due_at`` earlier than the promoter may be sleeping until."""

    async def task_promote_due(self, limit: int) -> int:
        """Move up to ``limit`` ``scheduled``/``retrying`` tasks whose ``due_at`` has come to
        ``ready``, earliest first. Returns how many moved; fires ``ready_signal`` when any did."""

    async def task_due_ids(self, limit: int) -> list[str]:
        """The ids of up to ``limit`` tasks :meth:`task_promote_due` would move, earliest
        ``due_at`` first (read only). With :meth:`task_promote`, the promoter's way around a
        task the store refuses to promote (see :mod:`duetime.store.isolation`)."""

    async def task_promote(self, task_ids: Sequence[str]) -> int:
        """Move the tasks among ``task_ids`` that are still ``scheduled``/``retrying`` with a
        ``due_at`` that has come to ``ready`` (others, and unknown ids, are left alone).
        Returns how many moved; fires ``ready_signal`` when any did."""

    async def task_next_due_at(self) -> datetime | None:
        """The earliest ``due_at`` among ``scheduled``/``retrying`` tasks, or None."""


class ClaimStore(Protocol):
    """Ready tasks handed out under a lease (the dispatcher; pull workers through the API)."""

    @property
    def ready_signal(self) -> Signal:
        """Fired when tasks become ``ready`` (create, promote, retry, unblock), on every node."""

    async def task_claim(self, request: ClaimRequest) -> list[Lease]:
        """Claim up to ``request.limit`` ``ready`` tasks — highest priority first, then earliest
        ``due_at`` — never a task another claimer holds (``FOR UPDATE SKIP LOCKED``). Each becomes
        ``running`` with a fresh ``lease_id``, ``attempts + 1``, ``started_at`` = now and
        ``worker_id`` = ``request.worker_id``.

        ``tenant_id``/``queue``/``names`` narrow the claim when not None. Queue settings (see
        :meth:`queue_put`) are honoured: no task of a ``paused`` queue is claimed, and a claim
        never makes a queue's running tasks (its tenant's, of any target type) exceed its
        ``max_concurrency``, also under concurrent claimers. Priority order holds within a queue.
        """


class CompletionStore(Protocol):
    """Leases ended: the attempt recorded (the completer, the reaper, worker acks), or the task
    handed back without spending it (held deliveries, worker releases)."""

    async def task_complete_many(self, completions: Sequence[Completion]) -> list[CompletionResult]:
        """End attempts, fenced: only a ``running`` task whose ``lease_id`` matches is changed.

        For each accepted completion one :class:`Attempt` row is written, and the task takes
        the completion's decided ``status`` (:mod:`duetime.lifecycle.finish`) — ``cancelled``
        instead when its cancel was requested and the status is not ``succeeded``
        (:func:`duetime.states.after_cancel_request`); a ``retrying`` task is due at ``now +
        retry_delay_seconds``. Dependents are released (every parent succeeded →
        ready/scheduled) or failed (a parent failed or was cancelled), transitively. Results
        are in input order; a stale lease gives ``accepted=False`` and changes nothing. A
        ``lease_expired`` completion (the reaper's) is accepted only while the lease is
        actually expired by the store's now, so a heartbeat that extended the lease after the
        reaper read it wins.

        What is recorded is first made storable alike by every store
        (:func:`duetime.store.recorded.recordable`): outside text is cleaned and bounded, odd
        numbers bounded, so content is never why a completion cannot be recorded.
        """

    async def task_cancel_requested(self, task_ids: Sequence[str]) -> set[str]:
        """The ones of ``task_ids`` that are ``running`` with a cancel requested: their holder
        (a dispatcher delivering them) should stop and end the attempt."""

    async def task_release(
        self, releases: Sequence[Release], tenant_id: str | None = None
    ) -> dict[str, Released]:
        """Hand back the tasks running under the releases' leases (of ``tenant_id``, when given)
        without spending their attempt: each waits again in the release's ``status`` (``ready``
        or ``scheduled``, decided by :mod:`duetime.lifecycle.release`), due ``delay_seconds``
        from now, its lease gone. Returns lease id → what became of the task; stale leases and
        tasks whose cancel was requested are left out and unchanged. Fires
        ``ready_signal``/``due_signal``."""


class LeaseStore(CompletionStore, Protocol):
    """Leases held by running tasks: extended, read, found expired — and ended."""

    async def task_heartbeat(
        self, lease_ids: Sequence[str], extend_seconds: float
    ) -> dict[str, datetime]:
        """Set ``lease_expires_at = now + extend_seconds`` for each lease still current;
        returns lease_id → new expiry for those (stale ones are absent)."""

    async def task_leases_get(
        self, lease_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Lease]:
        """The current leases among ``lease_ids`` (lease_id → :class:`Lease`): tasks still
        ``running`` under that lease, expired or not (until the reaper or the holder ends it, a
        completion under it is still accepted). With ``tenant_id``, only that tenant's. Unknown,
        ended and malformed ids are absent."""

    async def task_expired_leases(self, limit: int) -> list[Lease]:
        """Up to ``limit`` ``running`` tasks whose lease expired by now, oldest expiry first.
        The reaper ends each with a ``lease_expired`` :class:`Completion`. A row that cannot be
        read (a value no release writes) is logged and left out."""


# -- queues and pull workers -----------------------------------------------------------------------


class QueueStore(Protocol):
    """Queue settings, live queue figures and the pull workers seen."""

    async def queue_put(self, tenant_id: str, name: str, settings: QueueSettings) -> Queue:
        """Create or replace the settings of the tenant's queue ``name`` (every field, as given);
        ``updated_at`` = now. Claims made after this returns honour the new settings."""

    async def queue_get(self, tenant_id: str, name: str) -> Queue | None:
        """The tenant's configured queue ``name``, or None when it was never configured (it
        then behaves as ``QueueSettings()``)."""

    async def queue_list(self, tenant_id: str) -> list[Queue]:
        """Every configured queue of the tenant, by name."""

    async def queue_stats(self, tenant_id: str, name: str | None = None) -> list[QueueStats]:
        """Live figures of the tenant's queues that hold tasks (of any status), by name; only
        ``name`` when given. Counts come from the maintained counters; ``oldest_due_lag_seconds``
        = now - the earliest ``due_at`` of its ``ready`` tasks, at least 0."""

    async def queue_keys(
        self, queue: Queue, limit: int = 10, keys: Sequence[str] = ()
    ) -> list[KeyFigure]:
        """The busiest keys of ``queue``'s limits per key (``queue`` as :meth:`queue_get` read
        it): flow keys when it has a keyed rate limit, else concurrency keys when it has
        ``max_concurrency_per_key``, else none. Most ready tasks first (counted among the first
        10,000 ready tasks read), then most running; at most ``limit``, plus ``keys`` whatever
        they hold, first. With a keyed rate limit each has its bucket's level and when its next
        start is allowed, by the claim's own rule."""

    async def worker_seen(self, tenant_id: str, worker_id: str, queues: Sequence[str]) -> None:
        """Record that a pull worker called now (a lease poll or a heartbeat): the first call
        sets ``first_seen_at``, every call sets ``last_seen_at``; ``queues`` are added to the
        queues it is known to poll."""

    async def worker_list(self, tenant_id: str, live_within_seconds: float) -> list[WorkerInfo]:
        """The tenant's workers seen within the last ``live_within_seconds``, by worker id, each
        with ``leases`` = how many of the tenant's tasks run under its worker id now."""


# -- leadership ------------------------------------------------------------------------------------


class FlowSweepStore(Protocol):
    """What keyed flow control leaves behind, swept by the leader
    (:class:`duetime.engine.flow.FlowSweeper`)."""

    async def flow_sweep(self, limit: int = 1000) -> int:
        """Remove up to ``limit`` ledger rows past their ``until`` (uniqueness windows,
        debounces, throttles), up to ``limit`` per-key buckets full by now, and give up to
        ``limit`` ready tasks of queues with a keyed rate limit that have no flow key the key
        ``""`` (they follow the queue's own limits). Returns the rows changed."""


class Leadership(Protocol):
    """Leadership leases: at most one holder of a name at any store time (the leader)."""

    async def leader_attempt_elect(self, name: str, node_id: str, ttl_seconds: float) -> bool:
        """Become or stay the holder of leadership ``name`` for ``ttl_seconds`` from now.
        True when ``node_id`` holds it afterwards; at most one holder at any store time."""

    async def leader_resign(self, name: str, node_id: str) -> None:
        """Give up ``name`` if ``node_id`` holds it."""


# -- recurring schedules (SPEC §3 "Schedules") -----------------------------------------------------


class ScheduleStore(Protocol):
    """Schedules as the API makes, reads and changes them, with their ledgers."""

    async def schedule_create(self, new: NewSchedule) -> Schedule:
        """Create a schedule (version 1, not paused) whose cursor ``materialized_until`` is
        ``new.materialized_until`` and whose ``next_run_at`` is ``new.next_run_at`` (or the
        cursor when None: the next materializer round computes the real one), and its first
        revision (action ``create``, ``before`` empty, ``after`` = ``new.revision``, ``actor`` =
        ``new.actor``), in one transaction. With ``new.key``, ``Conflict`` (and nothing made)
        when a live schedule of the tenant holds that key already."""

    async def schedule_get(self, tenant_id: str, schedule_id: str) -> Schedule | None:
        """The tenant's schedule, or None (also when deleted or another tenant's)."""

    async def schedule_get_by_key(self, tenant_id: str, key: str) -> Schedule | None:
        """The tenant's live schedule declared with ``key``, or None."""

    async def schedule_list(self, query: ScheduleFilter) -> list[Schedule]:
        """Up to ``query.limit`` of the tenant's schedules that are not deleted, newest first
        (id descending), after ``query.cursor``; ``paused``, ``queue`` and ``name`` (the last
        two of the task template) filter when not None."""

    async def schedule_update(
        self, tenant_id: str, schedule_id: str, change: ScheduleChange
    ) -> Schedule:
        """Apply a user change (:class:`ScheduleChange`, semantics in
        :func:`duetime.store.core.schedules.apply_change`) in one transaction, only while the
        schedule's version is ``change.expected_version``; bumps ``version``, sets ``updated_at``
        and writes a revision (``change.action``, ``actor``, ``before``, ``after``).

        ``rewind_to``: deletes the schedule's tasks with ``scheduled_for`` after it that have not
        started (``scheduled``, no attempt, no dependents) and their tick rows, so the occurrences
        can be made again. A pause that drops a buffered occurrence records it
        ``skipped_paused``. ``NotFound`` (missing, deleted, another tenant's); ``Conflict`` when
        the version moved on (nothing changed)."""

    async def schedule_delete(
        self, tenant_id: str, schedule_id: str, actor: str | None, before: Mapping[str, Any]
    ) -> int:
        """Delete a schedule (it is gone for every reader but its ledger stays) and cancel its
        pending occurrences: tasks in ``scheduled``, ``ready`` or ``blocked`` that never started
        (their dependents fail). Writes a ``delete`` revision. Returns how many tasks were
        cancelled. ``NotFound``."""

    async def schedule_occurrences_create(
        self,
        tenant_id: str,
        schedule_id: str,
        tasks: Sequence[NewTask],
        outcome: TickOutcome,
        detail: str | None = None,
    ) -> list[TaskCreated]:
        """Make tasks for explicit occurrences of the schedule (trigger, backfill), in input order,
        all or nothing. Each task has ``schedule_id`` and ``scheduled_for``; an occurrence that
        has its task already (unique ``(schedule_id, scheduled_for)``) is returned as it is with
        ``created=False``. Each created task gets a tick row (``outcome``, ``detail``, its id).
        Works on paused schedules. ``NotFound`` (missing, deleted, another tenant's)."""

    async def schedule_tick_list(self, query: TickFilter) -> list[Tick]:
        """The schedule's tick ledger, newest nominal instant first (then outcome, descending),
        after ``query.cursor``; only ``query.outcomes`` when given. ``NotFound`` (missing,
        deleted, another tenant's)."""

    async def schedule_revision_list(
        self, tenant_id: str, schedule_id: str, *, limit: int = 100, cursor: int | None = None
    ) -> list[ScheduleRevision]:
        """The schedule's revisions, newest first (id descending), with ids below ``cursor``.
        ``NotFound`` (missing, deleted, another tenant's)."""


class OccurrenceStore(Protocol):
    """Schedules with occurrences due, and the plans that make them tasks (the materializer)."""

    async def schedule_due(self, now: datetime, horizon: datetime, limit: int) -> list[ScheduleDue]:
        """Up to ``limit`` schedules a materializer round must look at, each with the status of
        its ``last_task_id`` task: those neither paused nor deleted with ``overlap = allow`` and
        ``next_run_at <= horizon`` or with another overlap and ``next_run_at <= now`` (earliest
        ``next_run_at`` first), then those with a ``buffered_at`` and nothing due
        (``waiting=True``, smallest ``materialized_until`` first). Reads only such schedules
        (partial indexes): the cost grows with the occurrences due, not with schedules stored.
        A row that cannot be read (a value no release writes) is logged and left out."""

    async def schedule_advance(self, advances: Sequence[ScheduleAdvance]) -> list[bool]:
        """Apply materializer plans in one transaction; per item True when applied.

        An advance applies only while its schedule still has ``expected_version``,
        ``expected_cursor`` (``materialized_until``) and ``expected_buffered_at`` and is neither
        paused nor deleted; otherwise nothing of it is written (False). Applying it creates its
        tasks — never a second task for an occurrence (unique ``(schedule_id, scheduled_for)``,
        also against a concurrent node: the existing task is kept) — writes its ticks (a repeat
        of ``(schedule_id, nominal, outcome)`` is ignored; ``with_task`` links the occurrence's
        task), and sets ``materialized_until``, ``next_run_at``, ``buffered_at``,
        ``last_task_id`` (the task at ``last_task_for``, when given) and clears ``resumed_at``
        when ``clear_resume``. ``version`` and ``updated_at`` are not changed. Fires
        ``ready_signal``/``due_signal`` like :meth:`task_create_many`."""


# -- notifications (SPEC §9) -----------------------------------------------------------------------


class NotificationStore(Protocol):
    """A tenant's notification settings."""

    async def notification_put(
        self, tenant_id: str, events: Sequence[str], target: Mapping[str, Any]
    ) -> NotificationSettings:
        """Set (create or replace) the tenant's notification settings."""

    async def notification_get(self, tenant_id: str) -> NotificationSettings | None:
        """The tenant's notification settings, if it has any."""

    async def notification_delete(self, tenant_id: str) -> bool:
        """Remove the tenant's notification settings; False when it had none."""


# -- history, retention and audit (SPEC §8; docs/history.md) ---------------------------------------


class RetentionStore(Protocol):
    """How long queues keep finished tasks, and retiring the tasks past it."""

    async def queue_retention_put(
        self, tenant_id: str, queue: str, policy: RetentionPolicy | None
    ) -> None:
        """Set how long the queue keeps finished tasks, per final status (a status left None
        uses the defaults given to :meth:`task_retention_sweep`); None clears it."""

    async def queue_retention_get(self, tenant_id: str, queue: str) -> RetentionPolicy:
        """The queue's own retention (an empty policy when it never set one)."""

    async def queue_retention_list(self, tenant_id: str) -> dict[str, RetentionPolicy]:
        """Every queue of the tenant that has its own retention, by name."""

    async def task_retention_sweep(
        self, defaults: RetentionPolicy, limit: int, *, archive: TaskArchiver | None = None
    ) -> int:
        """Delete up to ``limit`` finished tasks whose ``finished_at`` is older than their
        queue's period for their status (else ``defaults``, which sets every status) by the
        store's now, oldest first, with their attempts; a task that is some schedule's last
        occurrence stays. Their history records stay. With ``archive``, the tasks are handed to
        it inside the deleting transaction, before it commits: if it raises, nothing is deleted.
        Returns how many were deleted."""


class HistoryStore(Protocol):
    """The hot history, as the API reads it."""

    async def history_query(self, query: HistoryFilter) -> list[HistoryEvent]:
        """Up to ``query.limit`` of the tenant's hot history records matching every filter,
        newest first by ``(at, id)``, after ``query.cursor``. ``ValidationError`` for a filter
        :func:`duetime.history.events.check_history_filter` refuses."""

    async def history_attempts(self, tenant_id: str, task_id: str) -> list[Attempt]:
        """The task's attempts as its hot history records them, by number — also after the task
        left the hot store. ``NotFound`` when the tenant has no record of the task."""


class PendingHistoryStore(Protocol):
    """The audit records written behind, as the leader's history mover moves them."""

    async def history_pending_move(self, limit: int) -> int:
        """Move the audit records of up to ``limit`` statements from where the hot path wrote
        them into the indexed history (PostgreSQL, docs/adr/0008-history-written-behind.md;
        SQLite writes history directly: 0). Returns how many records moved; reads of history
        see every record before and after, once."""

    async def history_pending_rows(self) -> int:
        """How many statements' audit records wait to be moved (``duetime doctor``); near zero
        while a leader runs. SQLite: 0."""


class HistoryArchiveStore(PendingHistoryStore, Protocol):
    """The hot history by month, as archiving moves it out (history maintenance)."""

    async def history_partitions_ensure(self, months: Sequence[date]) -> int:
        """Make the time partitions of ``months`` (first days, UTC) and of any month whose
        records wait in a catch-all partition, moving them in; returns how many were made.
        Idempotent. (SQLite has no partitions: 0.)"""

    async def history_months(self) -> list[date]:
        """The months (first days, UTC) that have a partition or hold hot records, oldest
        first."""

    async def history_month_counts(self, month: date) -> dict[str, int]:
        """Hot records of ``month`` per tenant id (tenants with none are absent)."""

    def history_month_rows(self, month: date, batch: int) -> AsyncIterator[list[dict[str, Any]]]:
        """Every hot record of ``month`` as column → value (the columns of
        :data:`duetime.history.archive.SCHEMA`; JSON columns as text), grouped by tenant id,
        then by name, each name's records by time, in lists of up to ``batch``."""

    async def history_month_drop(self, month: date) -> bool:
        """Remove ``month`` from the hot tier (PostgreSQL: detach and drop its partition, never a
        mass DELETE; SQLite: delete in bounded batches). False when there was nothing."""


# -- what follows a task's end: waits, parents, children, workflows, notifications --------------


class FollowStore(Protocol):
    """Tasks that know each other (SPEC §3 "Workflows"): their creates, their parents and
    children, and the end of tasks, which every wait shares (:mod:`duetime.lifecycle.waits`)."""

    @property
    def ended(self) -> EndedFeed:
        """Ids of tasks that ended, published after each commit that ended them while someone
        waits (:mod:`duetime.store.ended`)."""

    async def task_create_graph(
        self, ids: Sequence[str], tasks: Sequence[NewTask]
    ) -> list[TaskCreated]:
        """Create ``tasks`` under ``ids`` all or nothing, results in input order: a task may
        depend on another of the call (``depends_on`` holds ids of the call or of existing
        tasks), follows its ``on_parent_failure`` from the start (a parent already failed:
        ``failed``, ``cancelled``, or counted as ended), and has its ``Follow`` row. An
        idempotency key that exists is the existing task (``created=False``). Raises
        ``ValidationError`` (``depends_on``: no such task of the tenant) and ``Conflict`` (a
        key taken meanwhile by another create; a repeat finds it)."""

    async def task_parents_of(
        self, tenant_id: str, tasks: Sequence[Task], inline: int = ...
    ) -> dict[str, ParentsOf]:
        """The parents of each task of ``tasks`` with ``depends_on`` (``tenant_id``'s only), in
        ``depends_on`` order; a result longer than ``inline`` bytes is left out and only its size
        given (read it by the parent's id)."""

    async def task_statuses(self, task_ids: Sequence[str]) -> dict[str, TaskStatus]:
        """The status of each task of ``task_ids`` that exists (of any tenant: for waits the
        caller already checked)."""

    async def task_children(self, tenant_id: str, parent_id: str) -> list[Task]:
        """The tasks ``parent_id``'s handler spawned (``Follow.spawned_by``), oldest first."""

    async def tasks_get(self, task_ids: Sequence[str]) -> dict[str, Task]:
        """The tasks of ``task_ids`` that exist, by id (of any tenant: for waits, whose caller
        already checked), in one read."""


class WorkflowStore(Protocol):
    """Workflows: a DAG of tasks made in one call (:mod:`duetime.lifecycle.workflow`)."""

    async def workflow_create(
        self, new: NewWorkflow, ids: Sequence[str], tasks: Sequence[NewTask]
    ) -> tuple[WorkflowView, bool]:
        """Create the workflow and its nodes (``tasks`` under ``ids``, each with a ``Follow``
        naming the workflow and its ref) in one transaction, as :meth:`FollowStore.
        task_create_graph` does; returns the workflow and True, or the existing one and False
        when ``new.idempotency_key`` was used (nothing is made then)."""

    async def workflow_get(self, tenant_id: str, workflow_id: str) -> WorkflowView | None:
        """The workflow and its nodes in creation order (None: not the tenant's)."""

    async def workflow_list(
        self, tenant_id: str, limit: int = 100, cursor: str | None = None
    ) -> list[tuple[Workflow, dict[str, int]]]:
        """Newest first, after ``cursor`` (the last id of the previous page), each with its
        nodes' counts by status."""

    async def workflow_cancel(self, tenant_id: str, workflow_id: str) -> WorkflowView:
        """Cancel every node not ended (waiting ones at once, running ones with their attempt);
        ``NotFound``."""

    async def workflow_replay(self, tenant_id: str, workflow_id: str) -> WorkflowView:
        """Replay the failed and cancelled nodes (a new attempt series each: ``ready`` when its
        parents succeeded, else ``blocked``); ``NotFound``."""


# -- what each consumer uses -----------------------------------------------------------------------


class PromoterStore(PromotionStore, StoreClock, Protocol):
    """The promoter's store (:class:`duetime.engine.promoter.Promoter`)."""


class ParentsReader(Protocol):
    """The read a delivery of a task with parents makes (its body may carry their outcomes)."""

    async def task_parents_of(
        self, tenant_id: str, tasks: Sequence[Task], inline: int = ...
    ) -> dict[str, ParentsOf]:
        """See :meth:`FollowStore.task_parents_of`."""


class DispatchStore(
    ClaimStore,
    CompletionStore,
    SecretStore,
    CredentialStore,
    CircuitStore,
    TenantLookup,
    ParentsReader,
    Protocol,
):
    """The dispatcher's store: claims, completions and releases, signing secrets, named
    credentials, circuits, tenants' weights, the parents of the tasks it delivers
    (:class:`duetime.engine.dispatcher.Dispatcher`)."""


class ReaperStore(LeaseStore, StoreClock, Protocol):
    """The reaper's store (:class:`duetime.engine.reaper.Reaper`)."""


class MaterializerStore(OccurrenceStore, QueueStore, StoreClock, Protocol):
    """The materializer's store (:class:`duetime.engine.materializer.Materializer`)."""


class HistoryMaintenanceStore(RetentionStore, HistoryArchiveStore, StoreClock, Protocol):
    """History maintenance's store (:class:`duetime.engine.history.HistoryMaintenance`)."""


Compose = Callable[
    [str, str, NotificationSettings | None, Sequence[NotificationEvent]], NewTask | None
]
"""``(tenant id, event type, the tenant's settings, its events) -> the notification task`` (None:
nothing to send, the events are dropped: the tenant no longer asks for them)."""


class OutboxStore(Protocol):
    """Durable notifications (:mod:`duetime.store.core.outbox`): harm events recorded in the
    transactions of their causes, sent by the leader's notifier
    (:class:`duetime.engine.notifier.Notifier`)."""

    async def notification_record(
        self, tenant_id: str, event_type: str, item: Mapping[str, Any]
    ) -> None:
        """Record one event of ``event_type`` for ``tenant_id`` (nothing when it did not ask
        for that type), in a transaction of its own: for an event whose cause writes nothing
        else (a create refused over a quota)."""

    async def notifications_send(
        self, window_seconds: float, max_events: int, compose: Compose
    ) -> list[tuple[str, int]]:
        """Per (tenant, type) whose last notification is at least ``window_seconds`` old: take
        up to ``max_events`` of its events, make ``compose``'s notification task of them,
        delete them and record the send — one transaction. Returns (type, events) per
        notification made."""

    async def notification_events_count(self) -> int:
        """Events waiting to be sent (all tenants)."""


RequestEnd = tuple[str, str | None, Mapping[str, Any] | None]
"""A workflow request's outcome: (request id, workflow id when made, problem when refused)."""


class SqlRequestStore(Protocol):
    """Workflows requested through the SQL API (PostgreSQL's alone: migration
    ``0031_sql_api_workflows``), made by a node (:class:`duetime.api.sql_intake.WorkflowIntake`)."""

    @property
    def requests_signal(self) -> Signal:
        """Fires when a caller's transaction holding a request commits (on every node)."""

    async def sql_workflow_requests_take(
        self, limit: int, hold_seconds: float
    ) -> list[SqlWorkflowRequest]:
        """Up to ``limit`` pending requests, oldest first, held for this node for
        ``hold_seconds`` (skipped by every other node until then; past it, taken again)."""

    async def sql_workflow_requests_end(self, ended: Sequence[RequestEnd]) -> int:
        """Record pending requests as made (a workflow id) or refused (a problem), one
        statement; returns how many were still pending."""

    async def sql_workflow_requests_sweep(self, older_than_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` requests ended more than ``older_than_seconds`` ago."""


class CreateStore(TaskStore, QueueStore, FollowStore, Protocol):
    """What a create uses: tasks made (the hot path's create, and the graph create of tasks
    with something to follow their end), and the queue's flow rules read
    (:class:`duetime.lifecycle.create.Creator`)."""


class PullStore(ClaimStore, LeaseStore, QueueStore, Protocol):
    """The lease API's store: claims, leases, queue settings and workers seen
    (:class:`duetime.lifecycle.lease.LeaseHub`)."""


class OutboundStore(SigningKeyStore, ClientCertificateStore, Protocol):
    """What webhooks need to present an identity: signing keys and client certificates
    (:class:`duetime.delivery.identity.OutboundIdentity`)."""


class ApiStore(
    Lifecycle,
    TenantStore,
    SecretStore,
    CredentialStore,
    CircuitStore,
    TaskStore,
    CounterStore,
    ClaimStore,
    LeaseStore,
    QueueStore,
    ScheduleStore,
    NotificationStore,
    RetentionStore,
    HistoryStore,
    SigningKeyStore,
    ClientCertificateStore,
    HeldPayloadStore,
    SessionStore,
    FollowStore,
    WorkflowStore,
    OutboxStore,
    Protocol,
):
    """What the HTTP API and the dashboard use: every role but those only the engine's leader
    plays (leadership, promotion, occurrences, the history archive)."""


class Store(
    ApiStore,
    Leadership,
    PromotionStore,
    OccurrenceStore,
    HistoryArchiveStore,
    SealedStore,
    FlowSweepStore,
    Protocol,
):
    """The durable state of duetime: every role."""
