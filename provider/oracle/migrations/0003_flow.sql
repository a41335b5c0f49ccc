-- Chronicle schema for Oracle, version 3: priority, concurrency limits and
-- rate limits (see 0001_init.sql for the markers). Every statement may run
-- again after a cut-short run: an object or column already there is
-- skipped by the migrator.

-- Priority of messages. order_at is the queue order of a message,
-- provider.OrderAt(VisibleAt, Priority): visible_at minus one
-- provider.PriorityStep (60,000,000,000 ns) per level. A virtual column,
-- so it moves with visible_at wherever that is written and existing rows
-- get order_at = visible_at (priority 0) without an update; the index
-- stores it.
ALTER TABLE {{obj:MESSAGES}} ADD (
    priority NUMBER(5) DEFAULT 0 NOT NULL
)
/
ALTER TABLE {{obj:MESSAGES}} ADD (
    order_at NUMBER GENERATED ALWAYS AS (visible_at - priority * 60000000000) VIRTUAL
)
/
-- The dequeue walks this index in queue order (then enqueue order) and
-- stops at the first visible messages; visible_at is in it so that the
-- visibility test needs no table access.
CREATE INDEX {{obj:MESSAGES_ORDER}} ON {{obj:MESSAGES}} (order_at, seq, visible_at)
/
-- Activity tasks: the name (for rate limits; NULL when longer than the
-- column, or for tasks queued before this migration, whose envelope
-- still decides), the priority, and the concurrency key and limit. order_at
-- moves with ready_at (the claimable-at time: VisibleAt, or the end of a
-- claim), as a virtual column.
ALTER TABLE {{obj:ACTIVITY_TASKS}} ADD (
    name       VARCHAR2(1000 BYTE),
    priority   NUMBER(5) DEFAULT 0 NOT NULL,
    conc_key   VARCHAR2(512 BYTE),
    conc_limit NUMBER(10)
)
/
ALTER TABLE {{obj:ACTIVITY_TASKS}} ADD (
    order_at NUMBER GENERATED ALWAYS AS (ready_at - priority * 60000000000) VIRTUAL
)
/
-- The claim walks this index per queue in queue order; ready_at is in it
-- so that the claimable test needs no table access.
CREATE INDEX {{obj:ACTIVITY_TASKS_ORDER}} ON {{obj:ACTIVITY_TASKS}} (queue, order_at, seq, ready_at)
/
-- Live claims of a concurrency key: tasks without a key and never claimed
-- have an all-NULL key here and are left out of the index.
CREATE INDEX {{obj:ACTIVITY_TASKS_CONC}} ON {{obj:ACTIVITY_TASKS}} (conc_key, locked_until)
/
-- One row per activity concurrency key ever claimed: its row lock
-- (SELECT ... FOR UPDATE) serializes the claims of the key's tasks, so
-- that claimers in any number of processes never exceed its limit.
CREATE TABLE {{obj:ACTIVITY_KEYS}} (
    conc_key VARCHAR2(512 BYTE) NOT NULL,
    CONSTRAINT {{name:ACTIVITY_KEYS_PK}} PRIMARY KEY (conc_key)
)
/
-- The tokens used of a rate limit key per window (window_start: the
-- window's start, Unix nanoseconds). A claim takes a token with a
-- conditional UPDATE of its window's row in the claim's transaction; the
-- first claim of a window deletes the key's older windows.
CREATE TABLE {{obj:RATE_WINDOWS}} (
    rate_key     VARCHAR2(512 BYTE) NOT NULL,
    window_start NUMBER(19) NOT NULL,
    used         NUMBER(10) DEFAULT 0 NOT NULL,
    CONSTRAINT {{name:RATE_WINDOWS_PK}} PRIMARY KEY (rate_key, window_start)
)
/
-- The slot sets of instance concurrency keys: one row per key, holding
-- the limit of its latest acquire. Its row lock serializes the acquires
-- and releases of the key.
CREATE TABLE {{obj:FLOW_SLOTS}} (
    slot_key   VARCHAR2(512 BYTE) NOT NULL,
    slot_limit NUMBER(10) NOT NULL,
    CONSTRAINT {{name:FLOW_SLOTS_PK}} PRIMARY KEY (slot_key)
)
/
-- The holders (waiting = 0) and waiters (waiting = 1) of each slot set.
-- since is when the instance took its slot or first waited; seq, an
-- identity column, gives the order in which the waiters first waited.
CREATE TABLE {{obj:FLOW_SLOT_MEMBERS}} (
    slot_key    VARCHAR2(512 BYTE) NOT NULL,
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    waiting     NUMBER(1) NOT NULL,
    since       NUMBER(19) NOT NULL,
    seq         NUMBER(19) GENERATED ALWAYS AS IDENTITY (CACHE 100 ORDER),
    CONSTRAINT {{name:FLOW_SLOT_MEMBERS_PK}} PRIMARY KEY (slot_key, instance_id)
)
/
-- Counting holders and listing the first waiters of a key.
CREATE INDEX {{obj:FLOW_SLOT_MEMBERS_QUEUE}} ON {{obj:FLOW_SLOT_MEMBERS}} (slot_key, waiting, seq)
/
