-- Version 13: the MQTT session that holds a member's share group (its
-- client id, and the lease holder of the process that recorded it), so
-- that a live member can adopt the session of a member gone while it held
-- the group's subscription, and the claims by which one live member at a
-- time does (Store.ClaimAdoptions). A build from before would record a
-- share without its session, which no member could adopt; the version
-- keeps it from opening the schema.
ALTER TABLE /* TEMPLATE: schema */leases ADD COLUMN IF NOT EXISTS share_client text NOT NULL DEFAULT '';
ALTER TABLE /* TEMPLATE: schema */leases ADD COLUMN IF NOT EXISTS share_holder text NOT NULL DEFAULT '';

CREATE TABLE IF NOT EXISTS /* TEMPLATE: schema */share_claims (
	member  bigint PRIMARY KEY, -- whose session (members.number)
	holder  text NOT NULL,      -- the lease holder name of the handle that adopts it
	expires timestamptz NOT NULL
);
