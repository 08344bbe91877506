-- Version 6: source and entity rows are engine's binary row format 3, the
-- layout of format 2, in which a source that sends in order keeps no bitmap
-- at all (a run: its high-water mark, its first sequence and a floor). Rows of
-- formats 1 and 2 and JSON rows stay as they are until their next write and
-- are read either way; the version keeps a build that reads only format 2,
-- which would take such a window for one with a bitmap, from opening the
-- schema.
COMMENT ON COLUMN /* TEMPLATE: schema */sources.state IS 'replayguard row of the source''s window: binary format 3 (2 before schema version 6, 1 before version 5), or JSON written before schema version 4';
COMMENT ON COLUMN /* TEMPLATE: schema */entities.state IS 'replayguard row of the entity''s state: binary format 3 (2 before schema version 6, 1 before version 5, the same layout), or JSON written before schema version 4';
