-- Chronicle schema for Oracle, version 1.
--
-- The migrator renders {{obj:NAME}} as the quoted, schema-qualified object
-- "SCHEMA"."PREFIX_NAME", {{name:NAME}} as the quoted constraint name
-- "PREFIX_NAME" and {{aq:NAME}} as SCHEMA.PREFIX_NAME inside the string
-- literals that DBMS_AQADM takes. Statements end with a line holding only
-- a slash, as in SQL*Plus; DDL commits on its own, so the migrator records
-- each statement as it completes.
--
-- Times are NUMBER(19) nanoseconds since the Unix epoch (UTC): exact, and
-- free of session time zones. Oracle stores '' as NULL, so every text
-- column that may hold an empty string is nullable and read back as "".

-- One row per instance that ever had a message, projections or a dead
-- letter. Its row lock (SELECT ... FOR UPDATE SKIP LOCKED) is the instance
-- lock of a round; it holds the abandon hold, the incident, the runtime
-- snapshot and the instance record.
CREATE TABLE {{obj:INSTANCES}} (
    instance_id    VARCHAR2(512 BYTE) NOT NULL,
    hold_until     NUMBER(19),
    incident       CLOB,
    snapshot       BLOB,
    snapshot_seq   NUMBER(19) DEFAULT 0 NOT NULL,
    record_seq     NUMBER(19),
    execution_id   VARCHAR2(512 BYTE),
    name           VARCHAR2(1000 BYTE),
    version        VARCHAR2(1000 BYTE),
    status         VARCHAR2(32 BYTE),
    business_key   VARCHAR2(2000 BYTE),
    business_parts CLOB,
    custom_status  BLOB,
    parent_id      VARCHAR2(512 BYTE),
    created_at     NUMBER(19),
    updated_at     NUMBER(19),
    completed_at   NUMBER(19),
    output         BLOB,
    failure        BLOB,
    last_error     CLOB,
    CONSTRAINT {{name:INSTANCES_PK}} PRIMARY KEY (instance_id)
)
/
-- B-tree indexes leave out rows whose key columns are all NULL, which
-- makes these partial: only held instances, only instances with a record.
CREATE INDEX {{obj:INSTANCES_HELD}} ON {{obj:INSTANCES}} (hold_until)
/
CREATE INDEX {{obj:INSTANCES_STATUS}} ON {{obj:INSTANCES}} (status, name)
/
CREATE INDEX {{obj:INSTANCES_BUSINESS_KEY}} ON {{obj:INSTANCES}} (business_key)
/
CREATE INDEX {{obj:INSTANCES_PARENT}} ON {{obj:INSTANCES}} (parent_id)
/
-- The append-only history. event holds history.MarshalEvent, the bytes
-- the hash chain covers; the other columns are copies for indexes.
CREATE TABLE {{obj:HISTORY}} (
    instance_id    VARCHAR2(512 BYTE) NOT NULL,
    seq            NUMBER(19) NOT NULL,
    execution_id   VARCHAR2(512 BYTE),
    kind           VARCHAR2(64 BYTE) NOT NULL,
    class          VARCHAR2(64 BYTE),
    correlation_id VARCHAR2(512 BYTE),
    occurred_at    NUMBER(19),
    hash           RAW(64) NOT NULL,
    event          BLOB NOT NULL,
    CONSTRAINT {{name:HISTORY_PK}} PRIMARY KEY (instance_id, seq)
)
/
-- The idempotency key of the events that have one: at most one completion
-- per scheduled activity, timer or sub-workflow, one raised event per key,
-- one event per task action. Events without a class have an all-NULL key,
-- which the index leaves out (PostgreSQL's partial index).
CREATE UNIQUE INDEX {{obj:HISTORY_IDEMPOTENCY}} ON {{obj:HISTORY}} (
    CASE WHEN class IS NOT NULL THEN instance_id END,
    CASE WHEN class IS NOT NULL THEN execution_id END,
    CASE WHEN class IS NOT NULL THEN class END,
    CASE WHEN class IS NOT NULL THEN correlation_id END)
/
-- The orchestration queue. envelope holds provider.MarshalMessage of the
-- message as enqueued; attempts and last_error are columns, which
-- AbandonMessages updates. seq is the enqueue order (ORDER keeps it
-- increasing across RAC instances too).
CREATE TABLE {{obj:MESSAGES}} (
    id          VARCHAR2(512 BYTE) NOT NULL,
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    seq         NUMBER(19) GENERATED ALWAYS AS IDENTITY (CACHE 100 ORDER),
    visible_at  NUMBER(19) NOT NULL,
    attempts    NUMBER(10) DEFAULT 0 NOT NULL,
    last_error  CLOB,
    envelope    BLOB NOT NULL,
    CONSTRAINT {{name:MESSAGES_PK}} PRIMARY KEY (id)
)
/
CREATE INDEX {{obj:MESSAGES_INSTANCE}} ON {{obj:MESSAGES}} (instance_id, seq)
/
CREATE INDEX {{obj:MESSAGES_VISIBLE}} ON {{obj:MESSAGES}} (visible_at, seq)
/
-- Every activity task id ever enqueued, so that enqueueing a completed or
-- cancelled task again is a no-op until the instance is purged.
CREATE TABLE {{obj:ACTIVITY_TASK_IDS}} (
    id          VARCHAR2(512 BYTE) NOT NULL,
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    CONSTRAINT {{name:ACTIVITY_TASK_IDS_PK}} PRIMARY KEY (id)
)
/
CREATE INDEX {{obj:ACTIVITY_TASK_IDS_INSTANCE}} ON {{obj:ACTIVITY_TASK_IDS}} (instance_id)
/
-- The activity queue: tasks queued or claimed. envelope holds
-- provider.MarshalActivityTask; queue is ':' followed by the queue's name
-- (Oracle would store the default queue "" as NULL); ready_at is when the
-- task can be claimed (its VisibleAt, or the end of a live claim).
CREATE TABLE {{obj:ACTIVITY_TASKS}} (
    id           VARCHAR2(512 BYTE) NOT NULL,
    seq          NUMBER(19) GENERATED ALWAYS AS IDENTITY (CACHE 100 ORDER),
    instance_id  VARCHAR2(512 BYTE) NOT NULL,
    execution_id VARCHAR2(512 BYTE),
    queue        VARCHAR2(512 BYTE) NOT NULL,
    ready_at     NUMBER(19) NOT NULL,
    token        VARCHAR2(40 BYTE),
    owner        VARCHAR2(1000 BYTE),
    locked_until NUMBER(19),
    envelope     BLOB NOT NULL,
    CONSTRAINT {{name:ACTIVITY_TASKS_PK}} PRIMARY KEY (id)
)
/
CREATE INDEX {{obj:ACTIVITY_TASKS_READY}} ON {{obj:ACTIVITY_TASKS}} (queue, ready_at, seq)
/
CREATE INDEX {{obj:ACTIVITY_TASKS_EXECUTION}} ON {{obj:ACTIVITY_TASKS}} (instance_id, execution_id)
/
-- Claim tokens of activity tasks (the fencing tokens of claims).
CREATE SEQUENCE {{obj:LEASE_TOKENS}} CACHE 1000
/
-- Dead letters, kept after they are resolved as a record of who did what.
CREATE TABLE {{obj:DEAD_LETTERS}} (
    id          VARCHAR2(512 BYTE) NOT NULL,
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    message     BLOB,
    activity    BLOB,
    reason      VARCHAR2(64 BYTE) NOT NULL,
    error       CLOB,
    node        VARCHAR2(1000 BYTE),
    failed_at   NUMBER(19),
    attempts    NUMBER(10) NOT NULL,
    status      VARCHAR2(16 BYTE) NOT NULL,
    resolved_by VARCHAR2(1000 BYTE),
    resolved_at NUMBER(19),
    CONSTRAINT {{name:DEAD_LETTERS_PK}} PRIMARY KEY (id)
)
/
CREATE INDEX {{obj:DEAD_LETTERS_INSTANCE}} ON {{obj:DEAD_LETTERS}} (instance_id, id)
/
CREATE INDEX {{obj:DEAD_LETTERS_STATUS}} ON {{obj:DEAD_LETTERS}} (status, id)
/
-- Human tasks, folded from history. Task ids are unique across instances.
-- roles holds the encoded role list; HUMAN_TASK_ROLES indexes it.
CREATE TABLE {{obj:HUMAN_TASKS}} (
    task_id      VARCHAR2(512 BYTE) NOT NULL,
    instance_id  VARCHAR2(512 BYTE) NOT NULL,
    execution_id VARCHAR2(512 BYTE),
    name         VARCHAR2(1000 BYTE),
    status       VARCHAR2(16 BYTE),
    assignee     VARCHAR2(1000 BYTE),
    roles        BLOB,
    payload      BLOB,
    result       BLOB,
    due          NUMBER(19),
    created_at   NUMBER(19),
    updated_at   NUMBER(19),
    completed_at NUMBER(19),
    seq          NUMBER(19) NOT NULL,
    CONSTRAINT {{name:HUMAN_TASKS_PK}} PRIMARY KEY (task_id)
)
/
CREATE INDEX {{obj:HUMAN_TASKS_INSTANCE}} ON {{obj:HUMAN_TASKS}} (instance_id, task_id)
/
CREATE INDEX {{obj:HUMAN_TASKS_ASSIGNEE}} ON {{obj:HUMAN_TASKS}} (assignee, status)
/
CREATE TABLE {{obj:HUMAN_TASK_ROLES}} (
    task_id VARCHAR2(512 BYTE) NOT NULL,
    role    VARCHAR2(1000 BYTE) NOT NULL,
    CONSTRAINT {{name:HUMAN_TASK_ROLES_PK}} PRIMARY KEY (task_id, role)
)
/
CREATE INDEX {{obj:HUMAN_TASK_ROLES_ROLE}} ON {{obj:HUMAN_TASK_ROLES}} (role, task_id)
/
-- One event per task and history event: the end of an execution closes
-- several tasks at one Seq.
CREATE TABLE {{obj:HUMAN_TASK_EVENTS}} (
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    seq         NUMBER(19) NOT NULL,
    task_id     VARCHAR2(512 BYTE) NOT NULL,
    kind        VARCHAR2(64 BYTE) NOT NULL,
    actor       VARCHAR2(1000 BYTE),
    occurred_at NUMBER(19),
    assignee    VARCHAR2(1000 BYTE),
    detail      CLOB,
    CONSTRAINT {{name:HUMAN_TASK_EVENTS_PK}} PRIMARY KEY (instance_id, seq, task_id)
)
/
-- Records of user-registered projections, one per projection and instance.
CREATE TABLE {{obj:CUSTOM_PROJECTIONS}} (
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    name        VARCHAR2(512 BYTE) NOT NULL,
    version     NUMBER(10) NOT NULL,
    seq         NUMBER(19) NOT NULL,
    data        BLOB,
    CONSTRAINT {{name:CUSTOM_PROJECTIONS_PK}} PRIMARY KEY (instance_id, name)
)
/
-- What remains of a purged instance: the end of its hash chain, one row
-- per purge (an id may be reused and purged again); seq orders them.
CREATE TABLE {{obj:TOMBSTONES}} (
    instance_id VARCHAR2(512 BYTE) NOT NULL,
    seq         NUMBER(19) GENERATED ALWAYS AS IDENTITY (CACHE 100 ORDER),
    last_seq    NUMBER(19) NOT NULL,
    last_hash   RAW(64),
    purged_at   NUMBER(19),
    purged_by   VARCHAR2(1000 BYTE),
    CONSTRAINT {{name:TOMBSTONES_PK}} PRIMARY KEY (instance_id, seq)
)
/
-- The wake-up queue: a round that queues work enqueues a small RAW message
-- in its own transaction (visible when it commits); each store's listener
-- dequeues them and wakes its workers. Single consumer: a message wakes
-- one listener; the others poll.
BEGIN
    DBMS_AQADM.CREATE_QUEUE_TABLE(
        queue_table        => '{{aq:WQT}}',
        queue_payload_type => 'RAW');
END;
/
BEGIN
    DBMS_AQADM.CREATE_QUEUE(
        queue_name     => '{{aq:WQ}}',
        queue_table    => '{{aq:WQT}}',
        retention_time => 0);
END;
/
BEGIN
    DBMS_AQADM.START_QUEUE(queue_name => '{{aq:WQ}}');
END;
/
