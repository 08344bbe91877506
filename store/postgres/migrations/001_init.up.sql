-- Version 1: the group's tables. Identifiers and names are bytea: a source
-- id is binary, and bytea orders bytewise, as the engine sorts them.
CREATE TABLE /* TEMPLATE: schema */members (
	member        text COLLATE "C" PRIMARY KEY,
	number        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
	holder        text NOT NULL DEFAULT '',
	lease_expires timestamptz NOT NULL DEFAULT '-infinity',
	head_position bigint NOT NULL DEFAULT 0,
	head_hash     bytea NOT NULL DEFAULT '\x'
);
CREATE TABLE /* TEMPLATE: schema */keys (
	key     bytea PRIMARY KEY,
	digest  bytea NOT NULL,
	time    bigint NOT NULL,
	ordinal bigint NOT NULL
);
-- The one index pruning needs: ordinals are at least the time a key
-- was applied (engine.loadRows), so keys older than the ttl are found
-- among those with ordinals below the cutoff.
CREATE INDEX keys_ordinal ON /* TEMPLATE: schema */keys (ordinal);
CREATE TABLE /* TEMPLATE: schema */sources (id bytea PRIMARY KEY, state bytea NOT NULL);
CREATE TABLE /* TEMPLATE: schema */entities (name bytea PRIMARY KEY, state bytea NOT NULL);
CREATE TABLE /* TEMPLATE: schema */audit (
	member   bigint NOT NULL, -- members.number
	position bigint NOT NULL,
	record   bytea NOT NULL,
	PRIMARY KEY (member, position)
);
CREATE TABLE /* TEMPLATE: schema */quarantine (id bigint PRIMARY KEY, entry bytea NOT NULL, payload bytea NOT NULL);
