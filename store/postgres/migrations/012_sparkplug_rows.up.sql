-- Version 12: a source row with a Sparkplug edge's session is engine's
-- binary row format 5: the session is binary, each alias table written once
-- however many births share it, not JSON (with window.keep_epochs 64 an
-- edge's row grew to a megabyte, rewritten by every batch that touched it).
-- Every other source row stays format 3 or 4. The version keeps a build that
-- reads only format 4 from opening the schema.
COMMENT ON COLUMN /* TEMPLATE: schema */sources.state IS 'replayguard row of the source''s window: binary format 3, 4 where a retired epoch keeps its bitmap (since schema version 9), 5 with a Sparkplug session (since schema version 12; 2 before schema version 6, 1 before version 5), or JSON written before schema version 4';
