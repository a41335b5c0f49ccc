-- Chronicle schema, version 1. {{schema}} stands for the quoted schema
-- name; the migrator replaces it and runs this file in one transaction.
-- Identifiers use COLLATE "C" so that ordering (dead-letter paging) is
-- byte order whatever the database's collation, as in every provider.

-- One row per instance that ever had a message, projections or a dead
-- letter. Its row lock is the instance lock of a transactional round
-- (SELECT ... FOR UPDATE SKIP LOCKED); it also holds the abandon hold,
-- the incident, the runtime snapshot and the instance record.
CREATE TABLE {{schema}}.instances (
    instance_id    text COLLATE "C" PRIMARY KEY,
    -- Set by AbandonMessages: no message of the instance is dequeued
    -- before it.
    hold_until     timestamptz,
    -- "reason: error" of the newest unresolved dead letter, '' when none.
    incident       text NOT NULL DEFAULT '',
    snapshot       bytea,
    snapshot_seq   bigint NOT NULL DEFAULT 0,
    -- The instance record; record_seq is NULL until the first write.
    record_seq     bigint,
    execution_id   text COLLATE "C",
    name           text,
    version        text,
    status         text,
    business_key   text,
    business_parts jsonb,
    custom_status  bytea,
    parent_id      text COLLATE "C",
    created_at     timestamptz,
    updated_at     timestamptz,
    completed_at   timestamptz,
    output         bytea,
    failure        bytea,
    last_error     text
);
CREATE INDEX instances_held ON {{schema}}.instances (hold_until) WHERE hold_until IS NOT NULL;
CREATE INDEX instances_status ON {{schema}}.instances (status, name) WHERE record_seq IS NOT NULL;
CREATE INDEX instances_business_key ON {{schema}}.instances (business_key) WHERE record_seq IS NOT NULL;
CREATE INDEX instances_parent ON {{schema}}.instances (parent_id) WHERE parent_id <> '';

-- The append-only history. event holds history.MarshalEvent, the
-- authoritative encoding covered by the hash chain; the other columns are
-- copies for indexes and queries.
CREATE TABLE {{schema}}.history (
    instance_id    text COLLATE "C" NOT NULL,
    seq            bigint NOT NULL,
    execution_id   text COLLATE "C" NOT NULL,
    kind           text NOT NULL,
    -- Idempotency class of the kind, NULL for kinds without a key.
    class          text COLLATE "C",
    correlation_id text COLLATE "C" NOT NULL,
    at             timestamptz NOT NULL,
    hash           bytea NOT NULL,
    event          bytea NOT NULL,
    PRIMARY KEY (instance_id, seq)
);
-- At most one completion per scheduled activity, timer or sub-workflow,
-- one raised event per idempotency key, one event per task action.
CREATE UNIQUE INDEX history_idempotency_key
    ON {{schema}}.history (instance_id, execution_id, class, correlation_id)
    WHERE class IS NOT NULL;

-- The orchestration queue. envelope holds round.MarshalMessage of the
-- message as enqueued; attempts and last_error are kept in columns since
-- AbandonMessages changes them.
CREATE TABLE {{schema}}.messages (
    id          text COLLATE "C" PRIMARY KEY,
    instance_id text COLLATE "C" NOT NULL,
    -- Enqueue order.
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    visible_at  timestamptz NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    last_error  text NOT NULL DEFAULT '',
    envelope    bytea NOT NULL
);
CREATE INDEX messages_instance ON {{schema}}.messages (instance_id, seq);
CREATE INDEX messages_visible ON {{schema}}.messages (visible_at, seq);

-- Every activity task id ever enqueued, so that enqueueing a completed or
-- cancelled task again is a no-op.
CREATE TABLE {{schema}}.activity_task_ids (
    id          text COLLATE "C" PRIMARY KEY,
    instance_id text COLLATE "C" NOT NULL
);
CREATE INDEX activity_task_ids_instance ON {{schema}}.activity_task_ids (instance_id);

-- The activity queue: tasks queued or claimed. envelope holds
-- round.MarshalActivityTask; ready_at is when the task can be claimed
-- (its VisibleAt, or the end of a live claim).
CREATE TABLE {{schema}}.activity_tasks (
    id           text COLLATE "C" PRIMARY KEY,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    instance_id  text COLLATE "C" NOT NULL,
    execution_id text COLLATE "C" NOT NULL,
    queue        text COLLATE "C" NOT NULL,
    ready_at     timestamptz NOT NULL,
    token        text COLLATE "C",
    owner        text,
    locked_until timestamptz,
    envelope     bytea NOT NULL
);
CREATE INDEX activity_tasks_ready ON {{schema}}.activity_tasks (queue, ready_at, seq);
CREATE INDEX activity_tasks_execution ON {{schema}}.activity_tasks (instance_id, execution_id);

-- Claim tokens of activity tasks.
CREATE SEQUENCE {{schema}}.lease_tokens;

-- Dead letters, kept after they are resolved as a record of who did what.
CREATE TABLE {{schema}}.dead_letters (
    id          text COLLATE "C" PRIMARY KEY,
    instance_id text COLLATE "C" NOT NULL,
    -- round.MarshalMessage or round.MarshalActivityTask of the item.
    message     bytea,
    activity    bytea,
    reason      text NOT NULL,
    error       text NOT NULL,
    node        text NOT NULL,
    at          timestamptz,
    attempts    integer NOT NULL,
    status      text NOT NULL,
    resolved_by text NOT NULL DEFAULT '',
    resolved_at timestamptz
);
CREATE INDEX dead_letters_instance ON {{schema}}.dead_letters (instance_id, id);
CREATE INDEX dead_letters_status ON {{schema}}.dead_letters (status, id);

-- Human tasks and their audit trail, folded from history. Task ids are
-- unique across instances.
CREATE TABLE {{schema}}.human_tasks (
    task_id      text COLLATE "C" PRIMARY KEY,
    instance_id  text COLLATE "C" NOT NULL,
    execution_id text COLLATE "C" NOT NULL,
    name         text NOT NULL,
    status       text NOT NULL,
    assignee     text NOT NULL,
    roles        text[],
    payload      bytea,
    result       bytea,
    due          timestamptz,
    created_at   timestamptz,
    updated_at   timestamptz,
    completed_at timestamptz,
    seq          bigint NOT NULL
);
CREATE INDEX human_tasks_instance ON {{schema}}.human_tasks (instance_id, task_id);
CREATE INDEX human_tasks_assignee ON {{schema}}.human_tasks (assignee, status);
CREATE INDEX human_tasks_roles ON {{schema}}.human_tasks USING gin (roles);

-- One event per task and history event: the end of an execution closes
-- several tasks at one Seq.
CREATE TABLE {{schema}}.human_task_events (
    instance_id text COLLATE "C" NOT NULL,
    seq         bigint NOT NULL,
    task_id     text COLLATE "C" NOT NULL,
    kind        text NOT NULL,
    actor       text NOT NULL,
    at          timestamptz,
    assignee    text NOT NULL,
    detail      text NOT NULL,
    PRIMARY KEY (instance_id, seq, task_id)
);

-- Records of user-registered projections, one per projection and instance.
CREATE TABLE {{schema}}.custom_projections (
    instance_id text COLLATE "C" NOT NULL,
    name        text COLLATE "C" NOT NULL,
    version     integer NOT NULL,
    seq         bigint NOT NULL,
    data        bytea,
    PRIMARY KEY (instance_id, name)
);

-- What remains of a purged instance: the end of its hash chain.
CREATE TABLE {{schema}}.tombstones (
    instance_id text COLLATE "C" PRIMARY KEY,
    last_seq    bigint NOT NULL,
    last_hash   bytea,
    purged_at   timestamptz,
    purged_by   text NOT NULL
);
