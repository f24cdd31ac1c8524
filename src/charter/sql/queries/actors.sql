-- insert_actor --
-- Register an actor; nothing back if the id is taken.
INSERT INTO charter.actors (id, roles)
VALUES (%(id)s, %(roles)s)
ON CONFLICT (id) DO NOTHING
RETURNING id

-- insert_actor_key --
-- Give an actor a new active key; nothing back if the key is already registered.
INSERT INTO charter.actor_keys (public_key, actor_id)
VALUES (%(public_key)s, %(actor_id)s)
ON CONFLICT (public_key) DO NOTHING
RETURNING public_key

-- retire_active_key --
-- Retire an actor's active key (kept forever: it still verifies what it signed).
UPDATE charter.actor_keys
SET retired_at = now()
WHERE actor_id = %(actor_id)s AND retired_at IS NULL
RETURNING public_key

-- set_actor_disabled --
-- Disable or re-enable an actor.
UPDATE charter.actors
SET disabled_at = CASE WHEN %(disabled)s THEN coalesce(disabled_at, now()) END,
    updated_at = now()
WHERE id = %(id)s
RETURNING id

-- set_actor_roles --
-- Replace an actor's roles.
UPDATE charter.actors
SET roles = %(roles)s, updated_at = now()
WHERE id = %(id)s
RETURNING id

-- list_actors --
-- Every actor with its active key (if any) and how many keys it ever had.
SELECT a.id, a.roles, a.disabled_at, a.created_at,
       (SELECT k.public_key FROM charter.actor_keys k
        WHERE k.actor_id = a.id AND k.retired_at IS NULL) AS active_key,
       (SELECT count(*) FROM charter.actor_keys k WHERE k.actor_id = a.id) AS keys
FROM charter.actors a
ORDER BY a.id

-- get_actor --
-- One actor with its active key.
SELECT a.id, a.roles, a.disabled_at, a.created_at,
       (SELECT k.public_key FROM charter.actor_keys k
        WHERE k.actor_id = a.id AND k.retired_at IS NULL) AS active_key,
       (SELECT count(*) FROM charter.actor_keys k WHERE k.actor_id = a.id) AS keys
FROM charter.actors a
WHERE a.id = %(id)s

-- log_actor_change --
-- Say in the system log that an actor was registered or changed, and by whom.
INSERT INTO charter.system_log (level, kind, actor, message, detail)
VALUES (%(level)s, %(kind)s, %(actor)s, %(message)s, %(detail)s)
