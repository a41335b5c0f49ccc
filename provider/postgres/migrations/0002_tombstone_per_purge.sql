-- Every purge of an instance id keeps its own tombstone: an id can be
-- reused after a purge, and the proof for each archived history must
-- outlive the next purge. seq orders the purges of an id.
ALTER TABLE {{schema}}.tombstones DROP CONSTRAINT tombstones_pkey;
ALTER TABLE {{schema}}.tombstones ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE {{schema}}.tombstones ADD PRIMARY KEY (instance_id, seq);
