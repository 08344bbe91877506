-- Version 3: what audit retention and the audit sinks keep of each
-- member's chain (engine.ChainKeeper). Each table is keyed by the member's
-- number and holds rows of its own, never the member's row, so that
-- trimming, streaming and claiming a chain never wait for the member's
-- batches (which lock its row).
--
-- A chain's base is the last record retention dropped, to which the first
-- stored record's prev links; absent until the chain's first trim. The
-- chain's head stays in members: a chain trimmed of every record keeps it.
CREATE TABLE /* TEMPLATE: schema */chain_bases (
	member   bigint PRIMARY KEY, -- members.number
	position bigint NOT NULL,
	hash     bytea NOT NULL
);
-- Each audit sink's cursor on each member's chain: the position of the
-- last record the sink delivered.
CREATE TABLE /* TEMPLATE: schema */chain_cursors (
	member   bigint NOT NULL, -- members.number
	sink     text COLLATE "C" NOT NULL,
	position bigint NOT NULL,
	PRIMARY KEY (member, sink)
);
-- The claims that hand each member's chain to one process at a time, as
-- outbox_claims hands its outbox.
CREATE TABLE /* TEMPLATE: schema */chain_claims (
	member  bigint PRIMARY KEY, -- whose chain
	holder  text NOT NULL,      -- the lease holder name of the handle that claims it
	expires timestamptz NOT NULL
);
