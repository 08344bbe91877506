-- Version 7: sources and entities leave half of each page free, so that a
-- batch's rewrite of a row stays on its page as a HOT update (no new index
-- entry, less WAL). With every page full, nine in ten entity updates of a
-- group's batches went to another page, and its index. Pages written before
-- keep no room until the table is rewritten (VACUUM FULL, at a quiet time).
ALTER TABLE /* TEMPLATE: schema */sources SET (fillfactor = 50);
ALTER TABLE /* TEMPLATE: schema */entities SET (fillfactor = 50);
