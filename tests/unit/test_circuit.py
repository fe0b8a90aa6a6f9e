"""The circuit breaker's state machine (duetime.delivery.circuit), on a fake clock."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from duetime.clock import FakeClock
from duetime.delivery import circuit as circuit_module
from duetime.delivery.circuit import Circuit, Circuits, CircuitState, origin_of

T, ORIGIN = "tenant", "https://hooks.example:443"


def _circuits(clock: FakeClock) -> Circuits:
    return Circuits(clock, threshold=3, cooldown=5.0, max_cooldown=20.0, rng=random.Random(1))


def test_opens_after_threshold_consecutive_unhealthy_attempts() -> None:
    clock = FakeClock()
    c = _circuits(clock)
    assert c.hold(T, ORIGIN) is None
    assert c.record(T, ORIGIN, healthy=False) is None
    assert c.record(T, ORIGIN, healthy=True) is None  # a healthy answer resets the count
    for _ in range(2):
        assert c.record(T, ORIGIN, healthy=False) is None
    changed = c.record(T, ORIGIN, healthy=False)
    assert changed is not None and changed.state is CircuitState.OPEN
    held = c.hold(T, ORIGIN)
    assert held is not None and 5.0 <= held <= 10.0  # the cool-down plus a spread
    assert c.hold("other-tenant", ORIGIN) is None  # per tenant
    assert c.hold(T, "https://other.example:443") is None  # per origin


def test_half_open_probe_closes_or_reopens_with_a_longer_cooldown() -> None:
    clock = FakeClock()
    c = _circuits(clock)
    for _ in range(3):
        c.record(T, ORIGIN, healthy=False)
    clock.advance(5)
    assert c.hold(T, ORIGIN) is None  # the probe
    assert c.get(T, ORIGIN).state is CircuitState.HALF_OPEN  # type: ignore[union-attr]
    held = c.hold(T, ORIGIN)
    assert held is not None and held >= 1.0  # one probe at a time
    reopened = c.record(T, ORIGIN, healthy=False)
    assert reopened is not None and reopened.state is CircuitState.OPEN
    assert reopened.cooldown == 10.0
    clock.advance(10)
    assert c.hold(T, ORIGIN) is None
    c.record(T, ORIGIN, healthy=False)
    assert c.get(T, ORIGIN).cooldown == 20.0  # type: ignore[union-attr]
    clock.advance(20)
    assert c.hold(T, ORIGIN) is None
    c.record(T, ORIGIN, healthy=False)
    assert c.get(T, ORIGIN).cooldown == 20.0  # capped  # type: ignore[union-attr]
    clock.advance(20)
    assert c.hold(T, ORIGIN) is None
    closed = c.record(T, ORIGIN, healthy=True)
    assert closed is not None and closed.state is CircuitState.CLOSED
    assert (closed.failures, closed.cooldown) == (0, 0.0)
    assert c.hold(T, ORIGIN) is None


def test_attempts_that_started_before_it_opened_change_nothing() -> None:
    clock = FakeClock()
    c = _circuits(clock)
    for _ in range(3):
        c.record(T, ORIGIN, healthy=False)
    assert c.record(T, ORIGIN, healthy=True) is None
    assert c.get(T, ORIGIN).state is CircuitState.OPEN  # type: ignore[union-attr]


def test_adopting_another_process_open_circuit() -> None:
    clock = FakeClock()
    c = _circuits(clock)
    until = clock.now() + timedelta(seconds=8)
    c.adopt(T, ORIGIN, until, cooldown=8.0, failures=3)
    held = c.hold(T, ORIGIN)
    assert held is not None and held >= 8.0
    c.adopt(T, "https://x:443", clock.now(), cooldown=1.0, failures=1)  # already over: ignored
    assert c.hold(T, "https://x:443") is None


def test_listeners_hear_every_change() -> None:
    clock = FakeClock()
    c = _circuits(clock)
    heard: list[CircuitState] = []

    def listener(circuit: Circuit) -> None:
        heard.append(circuit.state)

    circuit_module.add_listener(listener)
    try:
        for _ in range(3):
            c.record(T, ORIGIN, healthy=False)
        clock.advance(5)
        c.hold(T, ORIGIN)
        c.record(T, ORIGIN, healthy=True)
    finally:
        circuit_module.remove_listener(listener)
    assert heard == [CircuitState.OPEN, CircuitState.HALF_OPEN, CircuitState.CLOSED]


@pytest.mark.parametrize(
    ("target", "origin"),
    [
        ({"type": "http", "url": "https://Hooks.example/a?b"}, "https://hooks.example:443"),
        ({"type": "http", "url": "http://127.0.0.1:8080/x"}, "http://127.0.0.1:8080"),
        ({"type": "http", "url": "http://[::1]/x"}, "http://[::1]:80"),
        ({"type": "http", "url": "http://h:99999/"}, None),
        ({"type": "worker"}, None),
        ({"type": "amqp", "url": "amqp://h/"}, None),
    ],
)
def test_origin_of(target: dict[str, str], origin: str | None) -> None:
    assert origin_of(target) == origin


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Circuits(FakeClock(), threshold=0)
    with pytest.raises(ValueError):
        Circuits(FakeClock(), cooldown=10, max_cooldown=5)
