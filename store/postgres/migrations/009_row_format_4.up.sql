-- Version 9: a source row is engine's binary row format 4 where a retired
-- epoch keeps its bitmap (its window held more gaps than its list keeps),
-- the layout of format 3; every other source row stays format 3. An entity
-- row is format 4: each field names the source that wrote it, by which a
-- set from another source is judged. The version keeps a build that reads
-- only format 3, which would take that epoch's gaps for sequences seen, from
-- opening the schema.
COMMENT ON COLUMN /* TEMPLATE: schema */sources.state IS 'replayguard row of the source''s window: binary format 3, or 4 where a retired epoch keeps its bitmap (since schema version 9; 2 before schema version 6, 1 before version 5), or JSON written before schema version 4';
COMMENT ON COLUMN /* TEMPLATE: schema */entities.state IS 'replayguard row of the entity''s state: binary format 4, each field with the tag of its writer''s source (since schema version 9; 3 before, 2 before schema version 6, 1 before version 5, the same layout), or JSON written before schema version 4';
