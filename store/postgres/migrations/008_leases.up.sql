-- Version 8: a member's lease expiry has a row of its own. A batch locks its
-- member's row from its first statement to its commit, and the renewal of a
-- lease kept in that row waited for it: a batch longer than a third of the
-- lease turned the member not ready, and one longer than the lease let it run
-- out (another member took over its outbox and chain) while the member was
-- alive and working. The holder stays in the member's row, where a batch
-- checks it under that lock: a takeover still waits for the batch to commit.
CREATE TABLE /* TEMPLATE: schema */leases (
	member  text COLLATE "C" PRIMARY KEY,
	expires timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO /* TEMPLATE: schema */leases (member, expires)
	SELECT member, lease_expires FROM /* TEMPLATE: schema */members;
ALTER TABLE /* TEMPLATE: schema */members DROP COLUMN lease_expires;
