"""The task life cycle, once (SPEC §2): what a create, a lease, an ending and a release mean.

The API's routes, the dispatcher, the reaper and the worker acks all call this package; the
stores below it receive decided statuses and keep only what must be SQL (the lease fence, the
cancel-requested override, the database clock's arithmetic). Which moves exist is
:mod:`duetime.states`.

- :mod:`~duetime.lifecycle.create` — task specs → tasks under the server's bounds, quotas,
  idempotent repeats, storing (or handing to a waiting lease poll).
- :mod:`~duetime.lifecycle.quotas` — a tenant's quotas on creates and schedules.
- :mod:`~duetime.lifecycle.lease` — leasing worker tasks: long polls, handoffs, heart-beats;
  :mod:`~duetime.lifecycle.acks` — the ends workers report (acks), many at a time.
- :mod:`~duetime.lifecycle.finish` — how an attempt ends: outcome and policy → next status,
  retry delay and recorded reason; for pushed deliveries, worker acks and expired leases alike.
- :mod:`~duetime.lifecycle.release` — handing a lease back without spending its attempt.
"""
