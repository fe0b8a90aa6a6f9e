-- Leadership leases, one row per name in leaders, and the liveness probe (plans in
-- duetime/store/core/leadership.py).

-- Take the row when it is free, expired, or already ours; RETURNING is empty when someone else
-- holds a live lease (the DO UPDATE's WHERE is false).
-- name: leader_elect
INSERT INTO leaders (name, node_id, expires_at)
VALUES (:name, :node_id, :now + CAST(round(:ttl_seconds * 1000000) AS INTEGER))
ON CONFLICT (name) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at
WHERE leaders.node_id = excluded.node_id OR leaders.expires_at <= :now
RETURNING node_id;

-- name: leader_resign
DELETE FROM leaders WHERE name = :name AND node_id = :node_id;

-- name: ping
SELECT 1;
