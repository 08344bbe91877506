-- Version 10: an audit record may carry connected, when the broker
-- connection that delivered it came up (the first delivery of each
-- connection). A build from before decodes such a record without it and
-- finds its hash wrong, as if the record had been altered; the version
-- keeps that build from opening the schema.
COMMENT ON COLUMN /* TEMPLATE: schema */audit.record IS 'replayguard audit record: canonical JSON, with connected on the first delivery of each broker connection (since schema version 10)';
