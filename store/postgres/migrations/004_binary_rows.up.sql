-- Version 4: sources and entities hold engine's binary rows (format 1, see
-- engine/rowcodec.go) instead of JSON: decoding JSON was a third of a
-- member's CPU. Rows written before stay JSON until their next write and are
-- read either way; the version keeps a build that reads only JSON from
-- opening the schema.
COMMENT ON COLUMN /* TEMPLATE: schema */sources.state IS 'replayguard row of the source''s window: binary format 1, or JSON written before schema version 4';
COMMENT ON COLUMN /* TEMPLATE: schema */entities.state IS 'replayguard row of the entity''s state: binary format 1, or JSON written before schema version 4';
