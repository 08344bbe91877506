-- Version 14: the share of a member that consumes several broker paths at
-- once (mqtt.feeds), one row a path it holds the share group's
-- subscription on: the MQTT session there (its client id, and the lease
-- holder of the process that recorded it), the path's brokers (passwords
-- redacted) and the group's filters, so that a live member can adopt the
-- member's session on each path once it is gone; and the claims by which
-- one live member at a time does, path by path (Store.PathAdopter). A
-- member's one session stays in leases (version 13). A build from before
-- would take its lease without clearing its paths' shares, by which an
-- adopter tells a member that returned; the version keeps it from opening
-- the schema.
CREATE TABLE IF NOT EXISTS /* TEMPLATE: schema */share_paths (
	member  text COLLATE "C" NOT NULL, -- members.member
	path    text COLLATE "C" NOT NULL, -- the path's name (mqtt.feeds[].name)
	share   text COLLATE "C" NOT NULL, -- the share group held there
	client  text NOT NULL,             -- the session's client id
	holder  text NOT NULL,             -- the lease holder that recorded it
	brokers text[] NOT NULL,
	filters text[] NOT NULL,
	PRIMARY KEY (member, path)
);

CREATE TABLE IF NOT EXISTS /* TEMPLATE: schema */share_path_claims (
	member  bigint NOT NULL,           -- whose session (members.number)
	path    text COLLATE "C" NOT NULL,
	holder  text NOT NULL,             -- the lease holder name of the handle that adopts it
	expires timestamptz NOT NULL,
	PRIMARY KEY (member, path)
);
