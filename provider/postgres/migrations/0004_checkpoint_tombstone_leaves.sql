-- A checkpoint leaf may be a signed tombstone (history.CheckpointLeaf.Purged):
-- the final head of an incarnation that a purge may delete. Existing leaves
-- are heads.
ALTER TABLE {{schema}}.checkpoint_leaves ADD COLUMN purged boolean NOT NULL DEFAULT false;
