-- The schema as replayguard created it before its migrations were embedded
-- .sql files (store/postgres/schema.go and outbox.go at commit 1968789),
-- at version 2: the bookkeeping table and both migrations, verbatim. "{s}"
-- stands for the quoted schema name. The compatibility test creates a
-- schema with it and checks that Open takes it as version 2 and migrates
-- it from there.
CREATE SCHEMA IF NOT EXISTS {s};
			CREATE TABLE IF NOT EXISTS {s}.schema_version (
				one     boolean PRIMARY KEY DEFAULT true CHECK (one),
				version integer NOT NULL
			);
			INSERT INTO {s}.schema_version (version) VALUES (0) ON CONFLICT DO NOTHING;
CREATE TABLE {s}.members (
		member        text COLLATE "C" PRIMARY KEY,
		number        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
		holder        text NOT NULL DEFAULT '',
		lease_expires timestamptz NOT NULL DEFAULT '-infinity',
		head_position bigint NOT NULL DEFAULT 0,
		head_hash     bytea NOT NULL DEFAULT '\x'
	);
	CREATE TABLE {s}.keys (
		key     bytea PRIMARY KEY,
		digest  bytea NOT NULL,
		time    bigint NOT NULL,
		ordinal bigint NOT NULL
	);
	-- The one index pruning needs: ordinals are at least the time a key
	-- was applied (engine.loadRows), so keys older than the ttl are found
	-- among those with ordinals below the cutoff.
	CREATE INDEX keys_ordinal ON {s}.keys (ordinal);
	CREATE TABLE {s}.sources (id bytea PRIMARY KEY, state bytea NOT NULL);
	CREATE TABLE {s}.entities (name bytea PRIMARY KEY, state bytea NOT NULL);
	CREATE TABLE {s}.audit (
		member   bigint NOT NULL, -- members.number
		position bigint NOT NULL,
		record   bytea NOT NULL,
		PRIMARY KEY (member, position)
	);
	CREATE TABLE {s}.quarantine (id bigint PRIMARY KEY, entry bytea NOT NULL, payload bytea NOT NULL);
CREATE TABLE {s}.outbox (
		member  bigint NOT NULL, -- members.number
		id      bigint NOT NULL, -- engine.OutboxID
		entry   bytea NOT NULL,  -- the entry's JSON without its payload
		payload bytea NOT NULL,
		PRIMARY KEY (member, id)
	);
	CREATE TABLE {s}.outbox_held (
		member  bigint NOT NULL,
		id      bigint NOT NULL,
		entry   bytea NOT NULL,
		payload bytea NOT NULL,
		reason  text NOT NULL,
		PRIMARY KEY (member, id)
	);
	CREATE TABLE {s}.outbox_claims (
		member  bigint PRIMARY KEY, -- whose outbox
		holder  text NOT NULL,      -- the lease holder name of the handle that claims it
		expires timestamptz NOT NULL
	);
UPDATE {s}.schema_version SET version = 2;
