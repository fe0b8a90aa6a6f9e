"""Circuit breakers per (tenant, target origin) (SPEC §7 "Target protection").

A circuit counts consecutive *unhealthy* attempts at one origin of one tenant's webhooks: a
retryable failure (a timeout, a refused connection, a 5xx, a 429). After ``threshold`` of them it
opens for a cool-down; while open, deliveries to that origin are not made and their tasks are
handed back without spending an attempt (:meth:`~duetime.store.protocols.Store.task_release`),
due again when the cool-down ends plus a spread (so a recovering target is not met by all of
them at once). When the cool-down has passed, the next delivery is the probe (half-open): its
success closes the circuit, its failure opens it again for twice the cool-down (at most
``max_cooldown``). A healthy answer — success, or a non-retryable failure such as a 404, which
shows the target is up — resets the count.

State lives in each process that delivers (the node and its dispatcher processes) and is
shared through the store: every change is written to ``target_circuits`` (``GET /v1/targets``
reads it), and each process adopts circuits another one opened (:meth:`Circuits.adopt`), so a
target failing for one process is held by all within a poll interval. Each process may send its
own probe.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from duetime.clock import Clock

log = logging.getLogger("duetime.circuit")

HALF_OPEN_WAIT_SECONDS = 1.0
"""How long a delivery waits while another one probes a half-open circuit (at least)."""
MAX_SPREAD_SECONDS = 30.0
"""Held tasks come back over at most this long after the cool-down ends."""
MAX_CIRCUITS = 100_000
"""Circuits kept in memory per process; closed ones are dropped first beyond it."""


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(slots=True)
class Circuit:
    """One (tenant, origin) circuit as a process sees it."""

    tenant_id: str
    origin: str
    state: CircuitState = CircuitState.CLOSED
    failures: int = 0
    """Consecutive unhealthy attempts (while closed), or the ones that opened it."""
    cooldown: float = 0.0
    """The current cool-down in seconds (0 while closed)."""
    open_until: datetime | None = None
    probing: bool = False
    """A probe is in flight (half-open)."""


Listener = Callable[[Circuit], None]
"""Told of every change of a circuit's state (in the process that made it); must not block."""

_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def origin_of(target: Mapping[str, Any]) -> str | None:
    """``scheme://host:port`` of an ``http`` target's URL; None for other targets."""
    if target.get("type") != "http":
        return None
    try:
        parts = urlsplit(str(target.get("url", "")))
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


class Circuits:
    """The circuits of one process (see the module). ``clock.now()`` is wall time."""

    def __init__(
        self,
        clock: Clock,
        *,
        threshold: int = 5,
        cooldown: float = 5.0,
        max_cooldown: float = 300.0,
        rng: random.Random | None = None,
    ) -> None:
        if threshold < 1 or cooldown <= 0 or max_cooldown < cooldown:
            raise ValueError("circuit threshold must be ≥ 1 and 0 < cooldown ≤ max_cooldown")
        self._clock = clock
        self.threshold = threshold
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self._rng = rng or random.Random()
        self._circuits: dict[tuple[str, str], Circuit] = {}
        self.on_change: Listener | None = None
        """Told of this instance's changes first (the dispatcher records them in the store)."""

    def get(self, tenant_id: str, origin: str) -> Circuit | None:
        return self._circuits.get((tenant_id, origin))

    def all(self) -> list[Circuit]:
        return list(self._circuits.values())

    def hold(self, tenant_id: str, origin: str) -> float | None:
        """None when a delivery to ``origin`` may go now (it is the probe if the circuit is
        half-open); else how many seconds its task should wait, spread."""
        circuit = self._circuits.get((tenant_id, origin))
        if circuit is None or circuit.state is CircuitState.CLOSED:
            return None
        now = self._clock.now()
        if circuit.state is CircuitState.OPEN:
            assert circuit.open_until is not None
            remaining = (circuit.open_until - now).total_seconds()
            if remaining > 0:
                return remaining + self._spread(circuit)
            self._change(circuit, CircuitState.HALF_OPEN)
        if not circuit.probing:
            circuit.probing = True
            return None
        return max(HALF_OPEN_WAIT_SECONDS, circuit.cooldown) + self._spread(circuit)

    def _spread(self, circuit: Circuit) -> float:
        return self._rng.uniform(0.0, min(MAX_SPREAD_SECONDS, max(1.0, circuit.cooldown)))

    def record(self, tenant_id: str, origin: str, *, healthy: bool) -> Circuit | None:
        """Count one ended attempt at ``origin``; returns the circuit when its state changed."""
        key = (tenant_id, origin)
        circuit = self._circuits.get(key)
        if circuit is None:
            if healthy:
                return None
            if len(self._circuits) >= MAX_CIRCUITS:
                self._forget_closed()
            circuit = self._circuits[key] = Circuit(tenant_id, origin)
        if circuit.state is CircuitState.OPEN:
            return None  # an attempt that started before it opened says nothing new
        if circuit.state is CircuitState.HALF_OPEN:
            circuit.probing = False
            if healthy:
                circuit.failures, circuit.cooldown, circuit.open_until = 0, 0.0, None
                return self._change(circuit, CircuitState.CLOSED)
            return self._open(circuit, min(self.max_cooldown, circuit.cooldown * 2))
        if healthy:
            circuit.failures = 0
            return None
        circuit.failures += 1
        if circuit.failures >= self.threshold:
            return self._open(circuit, self.cooldown)
        return None

    def adopt(
        self, tenant_id: str, origin: str, open_until: datetime, cooldown: float, failures: int
    ) -> None:
        """Another process opened this circuit until ``open_until``: hold it here too."""
        if open_until <= self._clock.now():
            return
        circuit = self._circuits.setdefault((tenant_id, origin), Circuit(tenant_id, origin))
        if circuit.state is CircuitState.CLOSED or (
            circuit.open_until is not None and circuit.open_until < open_until
        ):
            circuit.state, circuit.probing = CircuitState.OPEN, False
            circuit.open_until, circuit.cooldown = open_until, cooldown
            circuit.failures = max(circuit.failures, failures)

    def _open(self, circuit: Circuit, cooldown: float) -> Circuit:
        circuit.cooldown = cooldown
        circuit.open_until = self._clock.now() + timedelta(seconds=cooldown)
        circuit.probing = False
        return self._change(circuit, CircuitState.OPEN)

    def _change(self, circuit: Circuit, state: CircuitState) -> Circuit:
        before, circuit.state = circuit.state, state
        log.warning(
            "circuit %s for tenant %s at %s: %s → %s (%d consecutive failures, cool-down %gs)",
            "opened" if state is CircuitState.OPEN else state.value.replace("_", "-"),
            circuit.tenant_id,
            circuit.origin,
            before.value,
            state.value,
            circuit.failures,
            circuit.cooldown,
        )
        own = [self.on_change] if self.on_change is not None else []
        for listener in [*own, *_listeners]:
            try:
                listener(circuit)
            except Exception:  # a listener must not break delivery
                log.exception("circuit listener failed")
        return circuit

    def _forget_closed(self) -> None:
        for key in [k for k, c in self._circuits.items() if c.state is CircuitState.CLOSED]:
            del self._circuits[key]
