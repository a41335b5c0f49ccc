-- Priority, concurrency keys, rate limits and instance slots.

-- The queue order: OrderAt(VisibleAt, Priority), computed when a message
-- is enqueued. Rows queued before this migration have priority 0.
ALTER TABLE {{schema}}.messages ADD COLUMN order_at timestamptz;
UPDATE {{schema}}.messages SET order_at = visible_at;
ALTER TABLE {{schema}}.messages ALTER COLUMN order_at SET NOT NULL;
-- The dequeue walks this index up to order_at <= now, which covers every
-- visible message of priority >= 0; messages of negative priority whose
-- order is later than now (but visible) come from the small partial
-- index that holds only negative priorities.
CREATE INDEX messages_order ON {{schema}}.messages (order_at, seq);
CREATE INDEX messages_late ON {{schema}}.messages (order_at, seq) WHERE order_at > visible_at;

-- Activity tasks: the priority and the order key that moves with
-- ready_at, the name (for rate limits) and the concurrency key and limit.
-- Tasks queued before this migration have no name column (NULL): a claim
-- with rate limits reads their name from the envelope.
ALTER TABLE {{schema}}.activity_tasks ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.activity_tasks ADD COLUMN order_at timestamptz;
ALTER TABLE {{schema}}.activity_tasks ADD COLUMN name text COLLATE "C";
ALTER TABLE {{schema}}.activity_tasks ADD COLUMN concurrency_key text COLLATE "C";
ALTER TABLE {{schema}}.activity_tasks ADD COLUMN concurrency_limit integer;
UPDATE {{schema}}.activity_tasks SET order_at = ready_at;
ALTER TABLE {{schema}}.activity_tasks ALTER COLUMN order_at SET NOT NULL;
CREATE INDEX activity_tasks_order ON {{schema}}.activity_tasks (queue, order_at, seq);
CREATE INDEX activity_tasks_late ON {{schema}}.activity_tasks (queue, order_at, seq) WHERE priority < 0;
-- Live claims per concurrency key (CountClaims and the claim's check).
CREATE INDEX activity_tasks_key ON {{schema}}.activity_tasks (concurrency_key, locked_until)
    WHERE concurrency_key IS NOT NULL;

-- Rate limits: one row per key, the window it counts and the tokens used
-- in it; a claim in a later window starts the count again.
CREATE TABLE {{schema}}.flow_rates (
    key          text COLLATE "C" PRIMARY KEY,
    window_start timestamptz NOT NULL,
    used         integer NOT NULL
);

-- Slot sets of instances: the key row (its lock serializes the acquires
-- and releases of the key) with the limit of the latest acquire, and one
-- row per holder or waiter; waiters are in seq order.
CREATE TABLE {{schema}}.flow_keys (
    key text COLLATE "C" PRIMARY KEY,
    lim integer NOT NULL
);
CREATE TABLE {{schema}}.flow_slots (
    key     text COLLATE "C" NOT NULL,
    holder  text COLLATE "C" NOT NULL,
    waiting boolean NOT NULL,
    since   timestamptz NOT NULL,
    seq     bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (key, holder)
);
CREATE INDEX flow_slots_order ON {{schema}}.flow_slots (key, waiting, seq);
