-- The automation actor holds the AUTOMATION role alone, always.
--
-- AUTOMATION was already reserved to the actor `automation` (automation_role_reserved);
-- this adds the converse: `automation` holds nothing else, so its key can never sign an
-- action granted to a human role, whichever code path or connection writes the row. A
-- CHECK constraint holds for a superuser too (triggers can be switched off, it cannot).
--
-- A database where the automation actor was given other roles gets its one role back,
-- and system_log says so, with the roles it had.
INSERT INTO charter.system_log (level, kind, message, detail)
SELECT 'warning', 'actor.roles_repaired',
       'the automation actor held roles other than AUTOMATION; it holds AUTOMATION alone now',
       jsonb_build_object('actor_id', id, 'previous_roles', to_jsonb(roles),
                          'roles', jsonb_build_array('AUTOMATION'))
FROM charter.actors
WHERE id = 'automation' AND roles IS DISTINCT FROM ARRAY['AUTOMATION']::text[];

UPDATE charter.actors
SET roles = ARRAY['AUTOMATION']::text[], updated_at = now()
WHERE id = 'automation' AND roles IS DISTINCT FROM ARRAY['AUTOMATION']::text[];

ALTER TABLE charter.actors ADD CONSTRAINT automation_actor_roles
    CHECK (id <> 'automation' OR roles = ARRAY['AUTOMATION']::text[]);
