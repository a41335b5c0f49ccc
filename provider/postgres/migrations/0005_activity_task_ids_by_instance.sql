-- activity_task_ids is keyed by instance first. Task ids are hashes
-- (provider.ActivityTaskID): keyed by the id alone, every enqueue wrote to
-- a random page of an index as large as every task the store ever ran,
-- a page seldom in cache and, after each checkpoint, logged whole. A key
-- led by the instance id (time-ordered for generated ids) puts an
-- instance's tasks together, next to the newest. A task id belongs to one
-- instance, so the new key is as unique as the old; the index on the
-- instance alone is its prefix and goes.
ALTER TABLE {{schema}}.activity_task_ids DROP CONSTRAINT activity_task_ids_pkey;
ALTER TABLE {{schema}}.activity_task_ids ADD PRIMARY KEY (instance_id, id);
DROP INDEX {{schema}}.activity_task_ids_instance;
