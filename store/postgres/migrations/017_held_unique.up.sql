-- Version 17: at most one open quarantine entry of each key and content.
-- Two members holding the same message at once, each before the other's
-- commit, each opened an entry, and releasing both would apply the
-- message twice: the second insert now fails on quarantine_held, a lost
-- race, and its batch, decided again, finds the first entry. Of the open
-- entries a schema already holds with one held value, the lowest id keeps
-- it; the others stay open, unindexed, for an operator to release or
-- discard. A build from before would fail such a commit instead of
-- deciding it again; the version keeps it from opening the schema.
UPDATE /* TEMPLATE: schema */quarantine q SET held = NULL
WHERE held IS NOT NULL AND EXISTS (SELECT 1 FROM /* TEMPLATE: schema */quarantine o WHERE o.held = q.held AND o.id < q.id);
DROP INDEX IF EXISTS /* TEMPLATE: schema */quarantine_held;
CREATE UNIQUE INDEX quarantine_held ON /* TEMPLATE: schema */quarantine (held) WHERE held IS NOT NULL;
