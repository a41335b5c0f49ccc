-- Signed checkpoints (provider.CheckpointStore): a chain numbered from 1,
-- each with the heads (leaves) of the instances it covers. Leaves are
-- found by checkpoint (to rebuild its Merkle tree) and by instance (the
-- checkpoints that cover it).
CREATE TABLE {{schema}}.checkpoints (
    number    bigint PRIMARY KEY,
    prev_hash bytea,
    at        timestamptz NOT NULL,
    key_id    text NOT NULL,
    root      bytea NOT NULL,
    size      integer NOT NULL,
    hash      bytea NOT NULL,
    signature bytea NOT NULL
);

CREATE TABLE {{schema}}.checkpoint_leaves (
    number      bigint NOT NULL REFERENCES {{schema}}.checkpoints (number) ON DELETE CASCADE,
    instance_id text NOT NULL,
    seq         bigint NOT NULL,
    hash        bytea NOT NULL,
    PRIMARY KEY (number, instance_id)
);

CREATE INDEX checkpoint_leaves_instance ON {{schema}}.checkpoint_leaves (instance_id, number);
