-- Version 16: when a member's share was marked lost (its connection to
-- the broker lost while it still reached this store), on its one session
-- and on each path of mqtt.feeds, so that a live member adopts the
-- session once it has stayed lost for a while (Store.ClaimAdoptions):
-- the broker goes on dealing such a member its share of the group's
-- messages, which would otherwise wait in its session. NULL: not lost. A
-- build from before would clear the share instead, and take its lease or
-- join again without clearing the mark; the version keeps it from opening
-- the schema.
ALTER TABLE /* TEMPLATE: schema */leases ADD COLUMN IF NOT EXISTS share_lost timestamptz;
ALTER TABLE /* TEMPLATE: schema */share_paths ADD COLUMN IF NOT EXISTS lost timestamptz;
