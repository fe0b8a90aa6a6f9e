"""Notifications (SPEC §9): signed webhook events to a tenant when its work is harmed.

:mod:`duetime.notify.events` names the event types and builds their bodies; the engine's
:mod:`duetime.engine.notifier` gathers harm seen in a process and delivers it, rate-limited,
as tasks on the internal queue :data:`~duetime.notify.events.QUEUE`.
"""
