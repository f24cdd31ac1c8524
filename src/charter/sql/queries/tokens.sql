-- insert_token --
-- Store a new bearer token by its SHA-256; the token itself is never stored.
INSERT INTO charter.api_tokens (name, principal, token_hash, scopes)
VALUES (%(name)s, %(principal)s, %(token_hash)s, %(scopes)s)


-- token_by_hash --
-- The token with this SHA-256, revoked or not (the caller refuses revoked ones).
SELECT id, name, principal, scopes, created_at, revoked_at
FROM charter.api_tokens
WHERE token_hash = %(token_hash)s

-- list_tokens --
-- Every token without its hash, oldest first.
SELECT id, name, principal, scopes, created_at, revoked_at
FROM charter.api_tokens
ORDER BY created_at, id

-- revoke_token --
-- Revoke a token; revoking twice keeps the first time. Nothing back if there is no such id.
UPDATE charter.api_tokens
SET revoked_at = coalesce(revoked_at, now())
WHERE id = %(id)s
RETURNING id
