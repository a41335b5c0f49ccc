-- Legal holds: one row per held instance. It is kept apart from the
-- instance's row, whose record every round rewrites; a purge, holding the
-- instance's row FOR UPDATE, refuses an instance that has one, and a hold
-- is placed under a FOR KEY SHARE lock of the same row, so the two are
-- atomic with each other. A held instance is never purged, so no purge
-- ever deletes a row of this table; a release does.
CREATE TABLE {{schema}}.legal_holds (
    instance_id text COLLATE "C" PRIMARY KEY,
    hold_id     text COLLATE "C" NOT NULL,
    reason      text NOT NULL,
    actor       text NOT NULL,
    ticket      text NOT NULL DEFAULT '',
    placed_at   timestamptz NOT NULL
);
