-- Version 15: the open quarantine entries indexed by the key and content
-- of the message each holds (engine.HeldFinder): held is the key (32
-- bytes) and the content (32, engine.HeldContent of the topic and
-- payload), NULL for a message without a key. A delivery about to be
-- held again while an entry of its key and content is open is a
-- duplicate of that entry. Entries held before this version have no held
-- value here (version 18 computes it for the open ones). A build from
-- before would write entries without it, which a delivery again would not
-- find; the version keeps it from opening the schema.
ALTER TABLE /* TEMPLATE: schema */quarantine ADD COLUMN IF NOT EXISTS held bytea;
CREATE INDEX IF NOT EXISTS quarantine_held ON /* TEMPLATE: schema */quarantine (held, id) WHERE held IS NOT NULL;
