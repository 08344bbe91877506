-- Version 2: the outbox. Each member's pending entries, the held ones, and
-- the claims that hand each member's outbox to one drainer at a time (see
-- engine.OutboxClaimer). Entries are written by the batch's own
-- transaction; the claims are rows of their own, so that claiming never
-- waits for a member's row locks.
CREATE TABLE /* TEMPLATE: schema */outbox (
	member  bigint NOT NULL, -- members.number
	id      bigint NOT NULL, -- engine.OutboxID
	entry   bytea NOT NULL,  -- the entry's JSON without its payload
	payload bytea NOT NULL,
	PRIMARY KEY (member, id)
);
CREATE TABLE /* TEMPLATE: schema */outbox_held (
	member  bigint NOT NULL,
	id      bigint NOT NULL,
	entry   bytea NOT NULL,
	payload bytea NOT NULL,
	reason  text NOT NULL,
	PRIMARY KEY (member, id)
);
CREATE TABLE /* TEMPLATE: schema */outbox_claims (
	member  bigint PRIMARY KEY, -- whose outbox
	holder  text NOT NULL,      -- the lease holder name of the handle that claims it
	expires timestamptz NOT NULL
);
