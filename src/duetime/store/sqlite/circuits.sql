-- Circuit breakers (plans in duetime/store/core/circuits.py).

-- name: circuit_put
INSERT INTO target_circuits
    (tenant_id, origin, state, failures, cooldown_seconds, open_until, opened, changed_at)
VALUES (:tenant_id, :origin, :state, :failures, :cooldown_seconds, :open_until,
        CASE WHEN :state = 'open' THEN 1 ELSE 0 END, :now)
ON CONFLICT (tenant_id, origin) DO UPDATE SET
    state = excluded.state,
    failures = excluded.failures,
    cooldown_seconds = excluded.cooldown_seconds,
    open_until = excluded.open_until,
    opened = target_circuits.opened + excluded.opened,
    changed_at = excluded.changed_at;

-- name: circuit_list
SELECT * FROM target_circuits WHERE tenant_id = :tenant_id ORDER BY origin;

-- name: circuit_active
SELECT * FROM target_circuits
WHERE state <> 'closed' AND open_until > :now
ORDER BY open_until
LIMIT :limit;
