-- Bearer tokens for reads and administration (docs/api.md), stored as SHA-256 hashes.

CREATE TABLE charter.api_tokens (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    -- Who the token acts for: automations and runs belong to a principal.
    principal text NOT NULL CHECK (principal ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    scopes text[] NOT NULL CHECK (
        cardinality(scopes) >= 1
        AND scopes <@ ARRAY[
            'automations:read', 'automations:write', 'runs:read', 'runs:execute',
            'processes:read', 'workflows:write', 'actors:write', '*'
        ]::text[]
    ),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

REVOKE ALL ON charter.api_tokens FROM PUBLIC;
-- Only the API (engine role) reads token hashes; the reader and worker never see them.
GRANT SELECT, INSERT ON charter.api_tokens TO charter_engine;
GRANT UPDATE (revoked_at) ON charter.api_tokens TO charter_engine;
