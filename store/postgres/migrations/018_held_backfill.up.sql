-- Version 18: the open entries held before version 15 indexed too. Such
-- an entry has a key and its payload but no held value, and a delivery of
-- its message after the upgrade was held under a second entry. Its value
-- is computed here as a member's commit computes it: the key (the 64 hex
-- digits of the entry's "key"), then engine.HeldContent, SHA-256 over the
-- topic and the payload, each after its length in bytes (8, big-endian).
-- An entry whose key and content another open entry holds already keeps
-- none, and of such entries without one, the lowest id is given it. An
-- entry whose JSON escapes a NUL (which json's ->> cannot return as text)
-- is left without one, and so is every entry in a database whose
-- encoding is not UTF8 (its text could not hold every topic). The CASE
-- and MATERIALIZED keep those checks ahead of the conversions they guard.
-- A build from before writes entries this leaves alone; the version keeps
-- it from opening the schema after it ran.
WITH entries AS MATERIALIZED (
	SELECT id, payload, convert_from(entry, 'UTF8')::json AS e
	FROM /* TEMPLATE: schema */quarantine
	WHERE held IS NULL AND CASE WHEN current_setting('server_encoding') = 'UTF8'
		THEN strpos(convert_from(entry, 'UTF8'), chr(92) || 'u0000') = 0 ELSE false END
), keyed AS (
	SELECT id, decode(e->>'key', 'hex') AS k, convert_to(e->>'topic', 'UTF8') AS t, payload
	FROM entries WHERE e->>'key' ~ '^[0-9a-f]{64}$' AND e->>'topic' IS NOT NULL
), computed AS (
	SELECT id, k || sha256(int8send(octet_length(t)::bigint) || t || int8send(octet_length(payload)::bigint) || payload) AS held
	FROM keyed
), chosen AS (
	SELECT DISTINCT ON (held) id, held FROM computed c
	WHERE NOT EXISTS (SELECT 1 FROM /* TEMPLATE: schema */quarantine o WHERE o.held = c.held)
	ORDER BY held, id
)
UPDATE /* TEMPLATE: schema */quarantine q SET held = chosen.held FROM chosen WHERE q.id = chosen.id;
