-- Partitions (issue 26). Each instance belongs to one of P partitions,
-- provider.PartitionOf(instance id, P), a stable hash of its id; P is
-- chosen when the store is created and recorded in store_settings. Every
-- table that holds rows of one instance carries the instance's partition
-- in a column part, and every statement of a round names it, so that a
-- table distributed by part (Citus) routes each statement to one shard,
-- and the dequeue looks at one partition at a time.
--
-- Per-instance tables (carry part): instances, history, messages,
-- activity_task_ids, activity_tasks, dead_letters, human_tasks,
-- human_task_events, custom_projections, tombstones, legal_holds.
-- Global tables (no part): schema_migrations, store_settings,
-- partition_leases, partition_nodes, checkpoints, checkpoint_leaves (a
-- checkpoint covers many instances), flow_rates, flow_keys and
-- flow_slots (a slot set belongs to a key shared by instances of any
-- partition; its key row serializes the key's acquires and releases).
--
-- Rows written before this migration are in partition 0, which is every
-- instance's partition when P = 1: a store migrated from version 8 is
-- recorded with P = 1. Primary keys are unchanged here; a distributed
-- store (Citus) adds part to them when it distributes the tables.

-- The store's settings: one row, written when the store is created.
CREATE TABLE {{schema}}.store_settings (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    partitions integer NOT NULL CHECK (partitions >= 1)
);
INSERT INTO {{schema}}.store_settings (partitions) VALUES (1);

ALTER TABLE {{schema}}.instances ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.history ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.messages ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.activity_task_ids ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.activity_tasks ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.dead_letters ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.human_tasks ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.human_task_events ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.custom_projections ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.tombstones ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.legal_holds ADD COLUMN part integer NOT NULL DEFAULT 0;

-- The dequeue, the next-visible query and the activity claim look at one
-- partition at a time: their indexes lead with part. They replace the
-- indexes of 0001 and 0007 (with P = 1 the leading part is one value, and
-- the plans are the same index scans).
DROP INDEX {{schema}}.messages_order;
DROP INDEX {{schema}}.messages_late;
DROP INDEX {{schema}}.messages_visible;
CREATE INDEX messages_order ON {{schema}}.messages (part, order_at, seq);
CREATE INDEX messages_late ON {{schema}}.messages (part, order_at, seq) WHERE order_at > visible_at;
CREATE INDEX messages_visible ON {{schema}}.messages (part, visible_at, seq);

DROP INDEX {{schema}}.activity_tasks_ready;
DROP INDEX {{schema}}.activity_tasks_order;
DROP INDEX {{schema}}.activity_tasks_late;
CREATE INDEX activity_tasks_ready ON {{schema}}.activity_tasks (part, queue, ready_at, seq);
CREATE INDEX activity_tasks_order ON {{schema}}.activity_tasks (part, queue, order_at, seq);
CREATE INDEX activity_tasks_late ON {{schema}}.activity_tasks (part, queue, order_at, seq) WHERE priority < 0;

-- Held instances, found by the next-visible query per partition.
DROP INDEX {{schema}}.instances_held;
CREATE INDEX instances_held ON {{schema}}.instances (part, hold_until) WHERE hold_until IS NOT NULL;

-- Partition leases: which node dequeues a partition first. A lease is an
-- affinity, never a lock: the instance row's lock (SKIP LOCKED) is what
-- keeps two rounds off one instance, and every node visits every
-- partition now and then, so a partition whose owner died is served
-- before its lease expires and taken over after.
CREATE TABLE {{schema}}.partition_leases (
    part    integer PRIMARY KEY,
    owner   text NOT NULL,
    expires timestamptz NOT NULL
);
-- The live nodes, each renewing its row with its leases: a node's fair
-- share of the partitions is ceil(P / live nodes).
CREATE TABLE {{schema}}.partition_nodes (
    node    text PRIMARY KEY,
    expires timestamptz NOT NULL
);
