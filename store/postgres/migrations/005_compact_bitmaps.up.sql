-- Version 5: source rows are engine's binary row format 2, which writes a
-- window's bitmap in runs (a source that sends in order: a few bytes, not
-- sequence_span/8). Format 1 and JSON rows stay as they are until their next
-- write and are read either way; the version keeps a build that reads only
-- format 1 from opening the schema.
COMMENT ON COLUMN /* TEMPLATE: schema */sources.state IS 'replayguard row of the source''s window: binary format 2 (1 before schema version 5), or JSON written before schema version 4';
COMMENT ON COLUMN /* TEMPLATE: schema */entities.state IS 'replayguard row of the entity''s state: binary format 2 (1 before schema version 5, the same layout), or JSON written before schema version 4';
