-- Version 11: each route's key derivation (engine.KeyDerivation), by route
-- name, recorded by the first member that opens the route and never
-- changed: a member whose configuration derives a route's keys another way
-- is refused at start, before it decides anything. A build from before
-- would decide without that check; the version keeps it from opening the
-- schema.
CREATE TABLE IF NOT EXISTS /* TEMPLATE: schema */routes (
	name       text COLLATE "C" PRIMARY KEY,
	derivation bytea NOT NULL
);

-- Each member's MQTT share group ($share/GROUP/…), while it holds that
-- subscription: '' when it holds none (a member not in a group, or one
-- granted leave as it stops). A member stopping leaves the group only
-- while another live member holds its subscription (Store.LeaveShare).
ALTER TABLE /* TEMPLATE: schema */leases ADD COLUMN IF NOT EXISTS share text COLLATE "C" NOT NULL DEFAULT '';
