package oracle

import (
	"strings"
	"sync"
)

// The provider's SQL, as templates: {{obj:NAME}} and the other static
// markers (see names.render) are filled in once per store by
// newStatements, {{list:NAME}} per call by expandList. Every bind is named
// (:name); a name used twice in a statement is one bind. Oracle stores ''
// as NULL, so "match anything when empty" filters read (:x IS NULL OR
// col = :x), and pages start with (:after IS NULL OR id > :after).

// ensureInstanceSQL creates the row of an instance that has none. It
// never waits for a round (the row, when committed, makes it a no-op);
// it waits only for another transaction that is creating the same row,
// and a unique violation after that wait is ignored by the caller.
const ensureInstanceSQL = `
INSERT INTO {{obj:INSTANCES}} (instance_id)
SELECT :inst FROM dual
WHERE NOT EXISTS (SELECT 1 FROM {{obj:INSTANCES}} WHERE instance_id = :inst)`

// insertMessageSQL queues one message; a unique violation (the id is
// queued already) makes the enqueue of that message a no-op. seq, an
// identity column, gives the enqueue order; order_at, a virtual column,
// follows from visible_at and priority.
const insertMessageSQL = `
INSERT INTO {{obj:MESSAGES}} (id, instance_id, visible_at, priority, attempts, last_error, envelope)
VALUES (:id, :inst, :visible, :prio, :attempts, :lerr, :env)`

// dequeueCandidatesSQL lists, first by queue order (order_at: VisibleAt
// shifted by priority, see provider.OrderAt) and then by enqueue order,
// the instances of visible messages that are not held (a parked instance
// is held for good) and not in the skip list (this round's own instances
// and those it found locked): an ordered scan of MESSAGES_ORDER that
// stops after 32 rows. An instance row missing (a
// message enqueued while a purge deleted its instance) counts as not
// held: orphan says so, and the dequeue creates the row. Nothing is
// locked here: the caller locks each candidate with lockInstanceSQL,
// skipping those that other rounds hold.
const dequeueCandidatesSQL = `
SELECT m.instance_id, CASE WHEN i.instance_id IS NULL THEN 1 ELSE 0 END AS orphan
FROM {{obj:MESSAGES}} m
LEFT JOIN {{obj:INSTANCES}} i ON i.instance_id = m.instance_id
WHERE m.visible_at <= :now
  AND (i.hold_until IS NULL OR i.hold_until <= :now)
  AND m.instance_id NOT IN ({{list:skip}})
ORDER BY m.order_at, m.seq
FETCH FIRST 32 ROWS ONLY`

// lockInstanceSQL locks the row of one instance that is not held, skipping
// it when another transaction holds the lock (never waiting). It returns
// whether a hold that has passed is to be cleared.
const lockInstanceSQL = `
SELECT CASE WHEN hold_until IS NULL THEN 0 ELSE 1 END AS held
FROM {{obj:INSTANCES}}
WHERE instance_id = :inst AND (hold_until IS NULL OR hold_until <= :now)
FOR UPDATE SKIP LOCKED`

// hasVisibleSQL tells whether an instance has visible messages and a row.
const hasVisibleSQL = `
SELECT (SELECT COUNT(*) FROM {{obj:MESSAGES}} WHERE instance_id = :inst AND visible_at <= :now AND ROWNUM = 1),
       (SELECT COUNT(*) FROM {{obj:INSTANCES}} WHERE instance_id = :inst)
FROM dual`

// dequeueFetchSQL reads the visible messages of a locked instance. It is a
// statement of its own, after the lock, so it sees every commit up to the
// lock: the ack of the round that held the instance before is among them.
const dequeueFetchSQL = `
SELECT id, envelope, attempts, last_error
FROM {{obj:MESSAGES}}
WHERE instance_id = :inst AND visible_at <= :now
ORDER BY seq
FETCH FIRST :lim ROWS ONLY`

const clearHoldSQL = `
UPDATE {{obj:INSTANCES}} SET hold_until = NULL WHERE instance_id = :inst AND hold_until <= :now`

const ackMessagesSQL = `
DELETE FROM {{obj:MESSAGES}} WHERE instance_id = :inst AND id IN ({{list:ids}})`

const abandonMessagesSQL = `
UPDATE {{obj:MESSAGES}} SET attempts = attempts + 1, last_error = :lerr
WHERE instance_id = :inst AND id IN ({{list:ids}})`

// holdInstanceSQL moves the hold to :until unless it is later already;
// GREATEST of Oracle is NULL when an argument is, hence the NVL.
const holdInstanceSQL = `
UPDATE {{obj:INSTANCES}}
SET hold_until = CASE WHEN :until IS NULL THEN hold_until ELSE GREATEST(NVL(hold_until, :until), :until) END
WHERE instance_id = :inst`

const listMessagesSQL = `
SELECT envelope, attempts, last_error
FROM {{obj:MESSAGES}}
WHERE instance_id = :inst
ORDER BY seq
FETCH FIRST :lim ROWS ONLY`

// noTime stands for "no time" where LEAST needs a value: Oracle's LEAST
// is NULL when an argument is.
const noTime = "9223372036854775807"

// parkedHold is the hold_until of a parked instance (provider.ParkedUntil,
// which NUMBER(19) nanoseconds cannot hold): the greatest time, which no
// clock reaches and which NextVisibleAt reads as no time.
const parkedHold = noTime

// nextOrchestrationSQL is the earliest time an instance can be dequeued:
// the least of the earliest VisibleAt of a message not delayed by a hold
// (an ordered index scan stopping at the first) and the earliest hold
// that delays a message. Instances in the list (held by this store's open
// rounds) are left out, and so are parked instances: they are due only
// when a wake clears their hold.
const nextOrchestrationSQL = `
SELECT LEAST(
    NVL((SELECT m.visible_at
         FROM {{obj:MESSAGES}} m
         LEFT JOIN {{obj:INSTANCES}} i ON i.instance_id = m.instance_id
         WHERE (i.hold_until IS NULL OR i.hold_until <= m.visible_at)
           AND m.instance_id NOT IN ({{list:skip}})
         ORDER BY m.visible_at
         FETCH FIRST 1 ROWS ONLY), ` + noTime + `),
    NVL((SELECT i.hold_until
         FROM {{obj:INSTANCES}} i
         WHERE i.hold_until IS NOT NULL
           AND i.hold_until < ` + parkedHold + `
           AND i.instance_id NOT IN ({{list:skip}})
           AND EXISTS (SELECT 1 FROM {{obj:MESSAGES}} m
                       WHERE m.instance_id = i.instance_id AND m.visible_at < i.hold_until)
         ORDER BY i.hold_until
         FETCH FIRST 1 ROWS ONLY), ` + noTime + `))
FROM dual`

const nextActivitySQL = `
SELECT MIN(ready_at) FROM {{obj:ACTIVITY_TASKS}} WHERE queue IN ({{list:queues}})`

const loadHistorySQL = `
SELECT seq, event FROM {{obj:HISTORY}} WHERE instance_id = :inst AND seq >= :from_seq ORDER BY seq`

// lastSeqSQL reads the seq of an instance's last event, 0 without one.
const lastSeqSQL = `
SELECT NVL(MAX(seq), 0) FROM {{obj:HISTORY}} WHERE instance_id = :inst`

// historyHeadSQL reads the seq and hash of an instance's last event.
const historyHeadSQL = `
SELECT seq, hash FROM {{obj:HISTORY}} WHERE instance_id = :inst ORDER BY seq DESC FETCH FIRST 1 ROWS ONLY`

const historyTailSQL = `
SELECT seq, hash FROM {{obj:HISTORY}} WHERE instance_id = :inst AND seq >= :from_seq ORDER BY seq FETCH FIRST :lim ROWS ONLY`

// historyColumns are the columns appendHistorySQL writes per event.
const historyColumns = `instance_id, seq, execution_id, kind, class, correlation_id, occurred_at, hash, event`

// appendHistoryRow is one INTO clause of the multi-row append; %d is the
// event's index.
const appendHistoryRow = `
    INTO {{obj:HISTORY}} (` + historyColumns + `)
    VALUES (:inst, :seq%[1]d, :exec%[1]d, :kind%[1]d, :class%[1]d, :corr%[1]d, :occurred%[1]d, :hash%[1]d, :event%[1]d)`

// recordColumns are the columns of the instance record.
var recordColumns = []string{
	"execution_id", "name", "version", "status", "business_key", "business_parts", "custom_status",
	"parent_id", "created_at", "updated_at", "completed_at", "output", "failure", "last_error",
	"custom_status_text", "custom_status_key",
}

// recordBinds are the binds of recordColumns in saveRecordSQL.
var recordBinds = []string{
	"exec", "name", "version", "status", "bkey", "parts", "cstatus",
	"parent", "created", "updated", "completed", "output", "failure", "lerr",
	"cstext", "cskey",
}

// saveRecordSQL writes the instance record when it was folded beyond the
// stored one.
var saveRecordSQL = func() string {
	sets := []string{"record_seq = :seq"}
	for i, c := range recordColumns {
		sets = append(sets, c+" = :"+recordBinds[i])
	}
	return `
UPDATE {{obj:INSTANCES}} SET ` + strings.Join(sets, ", ") + `
WHERE instance_id = :inst AND (record_seq IS NULL OR record_seq < :seq)`
}()

// saveSnapshotSQL writes the snapshot when it was folded beyond the stored
// one; it runs after every other projection of the call.
const saveSnapshotSQL = `
UPDATE {{obj:INSTANCES}} SET snapshot = :snap, snapshot_seq = :seq
WHERE instance_id = :inst AND snapshot_seq < :seq`

// saveTaskSQL upserts a human task record folded beyond the stored one of
// the same instance; a task of another instance with the id is left as
// it is (takenTaskSQL then reports it).
const saveTaskSQL = `
MERGE INTO {{obj:HUMAN_TASKS}} t
USING (SELECT :task_id AS task_id FROM dual) s
ON (t.task_id = s.task_id)
WHEN MATCHED THEN UPDATE SET
    t.execution_id = :exec, t.name = :name, t.status = :status, t.assignee = :assignee, t.roles = :roles,
    t.payload = :payload, t.result = :result, t.due = :due, t.created_at = :created,
    t.updated_at = :updated, t.completed_at = :completed, t.seq = :seq
    WHERE t.seq < :seq AND t.instance_id = :inst
WHEN NOT MATCHED THEN INSERT
    (task_id, instance_id, execution_id, name, status, assignee, roles, payload, result,
     due, created_at, updated_at, completed_at, seq)
    VALUES (s.task_id, :inst, :exec, :name, :status, :assignee, :roles, :payload, :result,
     :due, :created, :updated, :completed, :seq)`

const deleteTaskRolesSQL = `
DELETE FROM {{obj:HUMAN_TASK_ROLES}} WHERE task_id = :task_id`

const insertTaskRoleSQL = `
INSERT INTO {{obj:HUMAN_TASK_ROLES}} (task_id, role) VALUES (:task_id, :role_name)`

// takenTaskSQL finds a task id of the list that another instance than
// :inst has. It runs after the task upserts, as a statement of its own,
// so it sees a task a concurrent round committed while an upsert waited.
const takenTaskSQL = `
SELECT task_id, instance_id FROM {{obj:HUMAN_TASKS}}
WHERE task_id IN ({{list:ids}}) AND instance_id <> :inst
ORDER BY task_id
FETCH FIRST 1 ROWS ONLY`

// saveTaskEventSQL adds a task event; a unique violation (it is there)
// is ignored.
const saveTaskEventSQL = `
INSERT INTO {{obj:HUMAN_TASK_EVENTS}} (instance_id, seq, task_id, kind, actor, occurred_at, assignee, detail)
VALUES (:inst, :seq, :task_id, :kind, :actor, :occurred, :assignee, :detail)`

// saveCustomSQL writes a custom record when it replaces the stored one
// (see provider.CustomRecord.Replaces).
const saveCustomSQL = `
MERGE INTO {{obj:CUSTOM_PROJECTIONS}} c
USING (SELECT :inst AS instance_id, :name AS name FROM dual) s
ON (c.instance_id = s.instance_id AND c.name = s.name)
WHEN MATCHED THEN UPDATE SET c.version = :version, c.seq = :seq, c.data = :data
    WHERE (c.version = :version AND c.seq < :seq) OR (c.version < :version AND c.seq <= :seq)
WHEN NOT MATCHED THEN INSERT (instance_id, name, version, seq, data)
    VALUES (s.instance_id, s.name, :version, :seq, :data)`

// recordSelect reads an instance record; scanRecord takes its columns.
const recordSelect = `
SELECT instance_id, record_seq, execution_id, name, version, status, business_key, business_parts, custom_status,
    parent_id, created_at, updated_at, completed_at, output, failure, last_error, incident, custom_status_text
FROM {{obj:INSTANCES}}`

const getInstanceSQL = recordSelect + `
WHERE instance_id = :inst AND record_seq IS NOT NULL`

const getSnapshotSQL = `
SELECT snapshot, snapshot_seq FROM {{obj:INSTANCES}} WHERE instance_id = :inst AND snapshot IS NOT NULL`

// listInstancesSQL filters instance records. A NULL time counts as the
// earliest time, before any bound, as in the other providers. {{where}}
// is the compiled Where of the call (compileWhere: SQL of this package
// and binds only).
const listInstancesSQL = recordSelect + ` i
WHERE record_seq IS NOT NULL
  AND ({{where}})
  AND (:after IS NULL OR instance_id > :after)
  AND (:status IS NULL OR status = :status)
  AND (:name IS NULL OR name = :name)
  AND (:bkey IS NULL OR business_key = :bkey)
  AND (:cfrom IS NULL OR NVL(created_at, -9223372036854775808) >= :cfrom)
  AND (:cto IS NULL OR NVL(created_at, -9223372036854775808) < :cto)
  AND (:ubefore IS NULL OR NVL(updated_at, -9223372036854775808) < :ubefore)
  AND (:terminal = 0 OR status IN ('completed', 'failed', 'terminated'))
ORDER BY instance_id
FETCH FIRST :lim ROWS ONLY`

// countInstancesSQL counts the instance records matching {{where}},
// grouped by {{group}} (a column of the instances table, or of the
// attribute rows g joined for a group by an attribute; the constant 0
// for one group, when {{groupby}} is empty). {{join}} is that join or
// nothing. The column is chosen from a fixed list, never user text.
const countInstancesSQL = `
SELECT {{group}}, COUNT(*)
FROM {{obj:INSTANCES}} i{{join}}
WHERE i.record_seq IS NOT NULL
  AND ({{where}}){{groupby}}`

// countJoinSQL joins the rows of the attribute a count groups by; an
// instance without one gets NULL, the group of no value.
const countJoinSQL = `
LEFT JOIN {{obj:ATTRIBUTES}} g ON g.instance_id = i.instance_id AND g.name = :gname AND g.vtype = :gtype`

// listCustomSQL reads the records of a user projection whose instance
// record matches {{where}}, in one statement.
const listCustomSQL = `
SELECT c.instance_id, c.version, c.seq, c.data
FROM {{obj:CUSTOM_PROJECTIONS}} c
JOIN {{obj:INSTANCES}} i ON i.instance_id = c.instance_id
WHERE c.name = :pname
  AND i.record_seq IS NOT NULL
  AND (:after IS NULL OR c.instance_id > :after)
  AND ({{where}})
ORDER BY c.instance_id
FETCH FIRST :lim ROWS ONLY`

// listAttributesSQL reads the attribute rows of instances, in order.
const listAttributesSQL = `
SELECT instance_id, name, pos, vtype, str, num, dbl
FROM {{obj:ATTRIBUTES}}
WHERE instance_id IN ({{list:ids}})
ORDER BY instance_id, name, pos`

// deleteAttributesSQL removes the attribute rows of an instance: before
// its record's new rows are written, when it is reset, when it is purged.
const deleteAttributesSQL = `
DELETE FROM {{obj:ATTRIBUTES}} WHERE instance_id = :inst`

// insertAttributeRow is one INTO clause of the multi-row insert of an
// instance's attribute rows; %d is the row's index.
const insertAttributeRow = `
    INTO {{obj:ATTRIBUTES}} (instance_id, name, pos, vtype, str, num, dbl)
    VALUES (:inst, :a_nm%[1]d, :a_pos%[1]d, :a_typ%[1]d, :a_str%[1]d, :a_num%[1]d, :a_dbl%[1]d)`

const taskSelect = `
SELECT t.task_id, t.instance_id, t.execution_id, t.name, t.status, t.assignee, t.roles, t.payload, t.result,
    t.due, t.created_at, t.updated_at, t.completed_at, t.seq
FROM {{obj:HUMAN_TASKS}} t`

const getTaskSQL = taskSelect + `
WHERE t.task_id = :task_id`

const listTasksSQL = taskSelect + `
WHERE (:after IS NULL OR t.task_id > :after)
  AND (:inst IS NULL OR t.instance_id = :inst)
  AND (:status IS NULL OR t.status = :status)
  AND (:assignee IS NULL OR t.assignee = :assignee)
  AND (:unassigned = 0 OR t.assignee IS NULL)
  AND (:any_role = 0 OR EXISTS (SELECT 1 FROM {{obj:HUMAN_TASK_ROLES}} r
                                WHERE r.task_id = t.task_id AND r.role IN ({{list:roles}})))
ORDER BY t.task_id
FETCH FIRST :lim ROWS ONLY`

const listTaskEventsSQL = `
SELECT instance_id, task_id, seq, kind, actor, occurred_at, assignee, detail
FROM {{obj:HUMAN_TASK_EVENTS}}
WHERE instance_id = :inst AND (:task_id IS NULL OR task_id = :task_id)
ORDER BY seq, task_id`

const getCustomSQL = `
SELECT version, seq, data FROM {{obj:CUSTOM_PROJECTIONS}} WHERE instance_id = :inst AND name = :name`

// resetInstanceSQL clears the snapshot and record of an instance, keeping
// its queue state and incident.
var resetInstanceSQL = func() string {
	sets := []string{"snapshot = NULL", "snapshot_seq = 0", "record_seq = NULL"}
	for _, c := range recordColumns {
		sets = append(sets, c+" = NULL")
	}
	return `
UPDATE {{obj:INSTANCES}} SET ` + strings.Join(sets, ", ") + `
WHERE instance_id = :inst`
}()

const (
	resetTaskRolesSQL = `
DELETE FROM {{obj:HUMAN_TASK_ROLES}}
WHERE task_id IN (SELECT task_id FROM {{obj:HUMAN_TASKS}} WHERE instance_id = :inst)`
	resetTasksSQL = `
DELETE FROM {{obj:HUMAN_TASKS}} WHERE instance_id = :inst`
	resetTaskEventsSQL = `
DELETE FROM {{obj:HUMAN_TASK_EVENTS}} WHERE instance_id = :inst`
	resetCustomSQL = `
DELETE FROM {{obj:CUSTOM_PROJECTIONS}} WHERE instance_id = :inst AND name IN ({{list:names}})`
)

// insertTaskIDSQL remembers an activity task id; a unique violation means
// the task was enqueued before, and its enqueue is a no-op.
const insertTaskIDSQL = `
INSERT INTO {{obj:ACTIVITY_TASK_IDS}} (id, instance_id) VALUES (:id, :inst)`

// insertTaskSQL queues an activity task. name, conc_key and conc_limit
// are copies of the envelope's for the claim's filters; order_at, a
// virtual column, follows from ready_at and priority.
const insertTaskSQL = `
INSERT INTO {{obj:ACTIVITY_TASKS}} (id, instance_id, execution_id, queue, ready_at, envelope, name, priority, conc_key, conc_limit)
VALUES (:id, :inst, :exec, :queue, :ready, :env, :aname, :prio, :ckey, :clim)`

// claimCandidatesSQL lists the claimable tasks of the queues, first by
// queue order (order_at: the claimable-at time shifted by priority) and
// then by enqueue order, but those of the skip list (tried already),
// those whose concurrency key has its limit of live claims, and those
// that an exhausted rate limit matches ({{rates}}: rateFilter's
// conditions, binds only), without locking them; claimLockSQL then locks
// one, skipping those another claim holds. The filters only spare work:
// the claim decides under the key's lock and with the window's tokens.
const claimCandidatesSQL = `
SELECT t.id FROM {{obj:ACTIVITY_TASKS}} t
WHERE t.queue IN ({{list:queues}}) AND t.ready_at <= :now AND t.id NOT IN ({{list:skip}})
  AND (t.conc_key IS NULL OR t.conc_limit > (
       SELECT COUNT(*) FROM {{obj:ACTIVITY_TASKS}} c
       WHERE c.conc_key = t.conc_key AND c.locked_until > :now)){{rates}}
ORDER BY t.order_at, t.seq
FETCH FIRST 16 ROWS ONLY`

// claimLockSQL locks a claimable task and reads the claim it may take
// over. FOR UPDATE re-evaluates the condition on the newest row version.
const claimLockSQL = `
SELECT envelope, token, owner, locked_until FROM {{obj:ACTIVITY_TASKS}}
WHERE id = :id AND ready_at <= :now
FOR UPDATE SKIP LOCKED`

// claimSQL gives a locked task a new claim, its token from the sequence.
const claimSQL = `
UPDATE {{obj:ACTIVITY_TASKS}}
SET token = TO_CHAR({{obj:LEASE_TOKENS}}.NEXTVAL), owner = :owner, locked_until = :until, ready_at = :until
WHERE id = :id
RETURNING token INTO :tok`

const heartbeatActivitySQL = `
UPDATE {{obj:ACTIVITY_TASKS}} SET locked_until = :until, ready_at = :until WHERE id = :id AND token = :tok`

const taskEnvelopeSQL = `
SELECT envelope FROM {{obj:ACTIVITY_TASKS}} WHERE id = :id AND token = :tok`

// retryActivitySQL stores the task's next attempt and releases the claim,
// only while the token matches.
const retryActivitySQL = `
UPDATE {{obj:ACTIVITY_TASKS}}
SET envelope = :env, ready_at = :ready, token = NULL, owner = NULL, locked_until = NULL
WHERE id = :id AND token = :tok`

// completeActivitySQL removes a claimed task while the token matches.
const completeActivitySQL = `
DELETE FROM {{obj:ACTIVITY_TASKS}} WHERE id = :id AND token = :tok`

// claimedTaskSQL reads a claimed task's instance while the token matches.
const claimedTaskSQL = `
SELECT instance_id FROM {{obj:ACTIVITY_TASKS}} WHERE id = :id AND token = :tok`

// lockInstanceWaitSQL locks an instance row, waiting for the round or
// purge that holds it: the lock order of every writer is the instance
// row first.
const lockInstanceWaitSQL = `
SELECT 1 FROM {{obj:INSTANCES}} WHERE instance_id = :inst FOR UPDATE`

// lockClaimedTaskSQL locks a claimed task and reads it, while the token
// matches, after its instance row.
const lockClaimedTaskSQL = `
SELECT instance_id, envelope FROM {{obj:ACTIVITY_TASKS}} WHERE id = :id AND token = :tok FOR UPDATE`

const cancelActivitiesSQL = `
DELETE FROM {{obj:ACTIVITY_TASKS}}
WHERE instance_id = :inst
  AND ((:other IS NOT NULL AND (execution_id IS NULL OR execution_id <> :other))
    OR (:other IS NULL AND execution_id = :exec))`

const listQueuedActivitiesSQL = `
SELECT envelope, owner, locked_until
FROM {{obj:ACTIVITY_TASKS}}
WHERE instance_id = :inst
ORDER BY seq`

// letterColumnList are the stored columns of a dead letter, in the order
// of letterArgs and scanLetter.
const letterColumnList = `id, instance_id, message, activity, reason, error, node, failed_at, attempts, status, resolved_by, resolved_at`

// insertDeadLetterSQL stores a dead letter; a unique violation (the same
// letter, stored before) is ignored.
const insertDeadLetterSQL = `
INSERT INTO {{obj:DEAD_LETTERS}} (` + letterColumnList + `)
VALUES (:id, :inst, :message, :activity, :reason, :error, :node, :failed, :attempts, :status, :resolved_by, :resolved)`

// setIncidentSQL sets the incident of an instance, creating its row.
const setIncidentSQL = `
MERGE INTO {{obj:INSTANCES}} i
USING (SELECT :inst AS instance_id FROM dual) s
ON (i.instance_id = s.instance_id)
WHEN MATCHED THEN UPDATE SET i.incident = :incident
WHEN NOT MATCHED THEN INSERT (instance_id, incident) VALUES (s.instance_id, :incident)`

const lockDeadLetterSQL = `
SELECT instance_id, message, activity, status, reason, error FROM {{obj:DEAD_LETTERS}} WHERE id = :id FOR UPDATE`

const resolveDeadLetterSQL = `
UPDATE {{obj:DEAD_LETTERS}} SET status = :status, resolved_by = :resolved_by, resolved_at = :resolved WHERE id = :id`

// refreshIncidentSQL sets an instance's incident to its newest unresolved
// dead letter (by time, then id), or clears it.
const refreshIncidentSQL = `
UPDATE {{obj:INSTANCES}} SET incident = (
    SELECT d.reason || ': ' || d.error
    FROM {{obj:DEAD_LETTERS}} d
    WHERE d.instance_id = :inst AND d.status = 'dead'
    ORDER BY d.failed_at DESC NULLS LAST, d.id DESC
    FETCH FIRST 1 ROWS ONLY)
WHERE instance_id = :inst`

const redriveTaskDeleteSQL = `
DELETE FROM {{obj:ACTIVITY_TASKS}} WHERE id = :id`

const selectDeadLetterSQL = `
SELECT ` + letterColumnList + ` FROM {{obj:DEAD_LETTERS}} WHERE id = :id`

const listDeadLettersSQL = `
SELECT ` + letterColumnList + `
FROM {{obj:DEAD_LETTERS}}
WHERE (:after IS NULL OR id > :after)
  AND (:inst IS NULL OR instance_id = :inst)
  AND (:status IS NULL OR status = :status)
ORDER BY id
FETCH FIRST :lim ROWS ONLY`

// purgeLockSQL locks the row of an instance to purge unless a round holds
// it (never waiting).
const purgeLockSQL = `
SELECT CASE WHEN record_seq IS NULL THEN 0 ELSE 1 END AS has_record, status, execution_id
FROM {{obj:INSTANCES}} WHERE instance_id = :inst
FOR UPDATE SKIP LOCKED`

// purgeMessagesSQL reads the queued messages of an instance to purge,
// whose row the purge holds (so no enqueue adds one meanwhile).
const purgeMessagesSQL = `
SELECT envelope FROM {{obj:MESSAGES}} WHERE instance_id = :inst ORDER BY seq`

const purgeProbeSQL = `
SELECT (SELECT COUNT(*) FROM {{obj:INSTANCES}} WHERE instance_id = :inst AND record_seq IS NOT NULL),
       (SELECT COUNT(*) FROM {{obj:HISTORY}} WHERE instance_id = :inst AND ROWNUM = 1)
FROM dual`

// purgeSQL deletes everything of an instance, its row last.
var purgeSQL = []string{
	`DELETE FROM {{obj:HISTORY}} WHERE instance_id = :inst`,
	`DELETE FROM {{obj:MESSAGES}} WHERE instance_id = :inst`,
	`DELETE FROM {{obj:ACTIVITY_TASKS}} WHERE instance_id = :inst`,
	`DELETE FROM {{obj:ACTIVITY_TASK_IDS}} WHERE instance_id = :inst`,
	`DELETE FROM {{obj:DEAD_LETTERS}} WHERE instance_id = :inst`,
	resetTaskRolesSQL, resetTasksSQL, resetTaskEventsSQL,
	`DELETE FROM {{obj:CUSTOM_PROJECTIONS}} WHERE instance_id = :inst`,
	deleteAttributesSQL,
	`DELETE FROM {{obj:INSTANCES}} WHERE instance_id = :inst`,
}

// tombstoneSQL adds the tombstone of a purge; those of earlier purges of
// the id stay.
const tombstoneSQL = `
INSERT INTO {{obj:TOMBSTONES}} (instance_id, last_seq, last_hash, purged_at, purged_by)
VALUES (:inst, :last_seq, :last_hash, :purged, :purged_by)`

const getTombstoneSQL = `
SELECT last_seq, last_hash, purged_at, purged_by FROM {{obj:TOMBSTONES}} WHERE instance_id = :inst
ORDER BY seq DESC
FETCH FIRST 1 ROWS ONLY`

const listTombstonesSQL = `
SELECT last_seq, last_hash, purged_at, purged_by FROM {{obj:TOMBSTONES}} WHERE instance_id = :inst
ORDER BY seq`

// Rate-limit conditions of claimCandidatesSQL ({{rates}}), one per
// exhausted limit: a task that the limit matches is left out. %[1]d is
// the limit's index. A task without a stored name (queued before
// migration 3, or with a name longer than the column) passes, and the
// claim checks its envelope.
const (
	rateFilterActivity = `
  AND (t.name IS NULL OR t.name <> :rn%[1]d)`
	rateFilterQueue = `
  AND t.queue <> :rq%[1]d`
	rateFilterBoth = `
  AND (t.name IS NULL OR t.name <> :rn%[1]d OR t.queue <> :rq%[1]d)`
)

// ensureActivityKeySQL creates the row of an activity concurrency key,
// whose lock serializes the claims of its tasks; a unique violation (a
// concurrent claim created it) is ignored.
const ensureActivityKeySQL = `
INSERT INTO {{obj:ACTIVITY_KEYS}} (conc_key)
SELECT :ckey FROM dual
WHERE NOT EXISTS (SELECT 1 FROM {{obj:ACTIVITY_KEYS}} WHERE conc_key = :ckey)`

// lockActivityKeySQL locks the row of a concurrency key, waiting for the
// claim that holds it to end: claims of one key are serialized.
const lockActivityKeySQL = `
SELECT 1 FROM {{obj:ACTIVITY_KEYS}} WHERE conc_key = :ckey FOR UPDATE`

// countClaimsSQL counts the live claims of a concurrency key: claims that
// have not run out at :now. Under the key's lock, it sees every claim
// committed before.
const countClaimsSQL = `
SELECT COUNT(*) FROM {{obj:ACTIVITY_TASKS}} WHERE conc_key = :ckey AND locked_until > :now`

// ensureRateWindowSQL creates the row of a rate limit key's window; a
// unique violation (a concurrent claim created it) is ignored.
const ensureRateWindowSQL = `
INSERT INTO {{obj:RATE_WINDOWS}} (rate_key, window_start, used)
SELECT :rkey, :win, 0 FROM dual
WHERE NOT EXISTS (SELECT 1 FROM {{obj:RATE_WINDOWS}} WHERE rate_key = :rkey AND window_start = :win)`

// dropRateWindowsSQL deletes the windows of a key before :win, by the
// claim that created the window of :win.
const dropRateWindowsSQL = `
DELETE FROM {{obj:RATE_WINDOWS}} WHERE rate_key = :rkey AND window_start < :win`

// takeRateTokenSQL takes a token of a window while one is left: the
// UPDATE waits for a claim that holds the row, and Oracle evaluates the
// condition again on the row it then finds (a changed row restarts the
// statement), so concurrent claims never take more than :tokens.
const takeRateTokenSQL = `
UPDATE {{obj:RATE_WINDOWS}} SET used = used + 1
WHERE rate_key = :rkey AND window_start = :win AND used < :tokens`

// rateUsedSQL reads the tokens used of a window (no row: none).
const rateUsedSQL = `
SELECT used FROM {{obj:RATE_WINDOWS}} WHERE rate_key = :rkey AND window_start = :win`

// ensureSlotSQL creates the row of a slot set; a unique violation (a
// concurrent acquire created it) is ignored.
const ensureSlotSQL = `
INSERT INTO {{obj:FLOW_SLOTS}} (slot_key, slot_limit)
SELECT :skey, :lim FROM dual
WHERE NOT EXISTS (SELECT 1 FROM {{obj:FLOW_SLOTS}} WHERE slot_key = :skey)`

// setSlotLimitSQL sets the limit of a slot set to the latest acquire's and
// locks its row (waiting for another round that holds it) for the rest
// of the round: acquires and releases of a key are serialized.
const setSlotLimitSQL = `
UPDATE {{obj:FLOW_SLOTS}} SET slot_limit = :lim WHERE slot_key = :skey`

// lockSlotSQL locks the row of a slot set and reads its limit, waiting
// for another round that holds it.
const lockSlotSQL = `
SELECT slot_limit FROM {{obj:FLOW_SLOTS}} WHERE slot_key = :skey FOR UPDATE`

// slotMemberSQL reads whether an instance holds (0) or waits (1) in a set,
// and its place.
const slotMemberSQL = `
SELECT waiting, seq FROM {{obj:FLOW_SLOT_MEMBERS}} WHERE slot_key = :skey AND instance_id = :holder`

// slotCountsSQL counts the holders of a set and its waiters that waited
// before :ahead_of (an identity value; the greatest number for all).
const slotCountsSQL = `
SELECT (SELECT COUNT(*) FROM {{obj:FLOW_SLOT_MEMBERS}} WHERE slot_key = :skey AND waiting = 0),
       (SELECT COUNT(*) FROM {{obj:FLOW_SLOT_MEMBERS}} WHERE slot_key = :skey AND waiting = 1 AND seq < :ahead_of)
FROM dual`

const insertSlotMemberSQL = `
INSERT INTO {{obj:FLOW_SLOT_MEMBERS}} (slot_key, instance_id, waiting, since)
VALUES (:skey, :holder, :waiting, :since)`

// promoteSlotMemberSQL makes a waiter a holder, since :since.
const promoteSlotMemberSQL = `
UPDATE {{obj:FLOW_SLOT_MEMBERS}} SET waiting = 0, since = :since
WHERE slot_key = :skey AND instance_id = :holder AND waiting = 1`

const deleteSlotMemberSQL = `
DELETE FROM {{obj:FLOW_SLOT_MEMBERS}} WHERE slot_key = :skey AND instance_id = :holder`

// firstWaitersSQL lists the first :lim waiters of a set, in the order
// they first waited.
const firstWaitersSQL = `
SELECT instance_id FROM {{obj:FLOW_SLOT_MEMBERS}}
WHERE slot_key = :skey AND waiting = 1
ORDER BY seq
FETCH FIRST :lim ROWS ONLY`

// listSlotsSQL lists slot sets by key, after :after, those with waiters
// only when :only_waiting is 1.
const listSlotsSQL = `
SELECT s.slot_key, s.slot_limit FROM {{obj:FLOW_SLOTS}} s
WHERE (:after IS NULL OR s.slot_key > :after)
  AND (:only_waiting = 0 OR EXISTS (SELECT 1 FROM {{obj:FLOW_SLOT_MEMBERS}} m
                                    WHERE m.slot_key = s.slot_key AND m.waiting = 1))
ORDER BY s.slot_key
FETCH FIRST :lim ROWS ONLY`

// getSlotSQL reads the limit of a slot set.
const getSlotSQL = `
SELECT slot_limit FROM {{obj:FLOW_SLOTS}} WHERE slot_key = :skey`

// slotMembersSQL reads the members of slot sets: per key the holders in
// the order they took their slots, then the waiters in the order they
// first waited.
const slotMembersSQL = `
SELECT slot_key, instance_id, waiting, since FROM {{obj:FLOW_SLOT_MEMBERS}}
WHERE slot_key IN ({{list:keys}})
ORDER BY slot_key, waiting, CASE WHEN waiting = 0 THEN since END, seq`

// parkInstanceSQL holds an instance until a wake: none of its messages is
// dequeued meanwhile, as no clock reaches the hold.
const parkInstanceSQL = `
UPDATE {{obj:INSTANCES}} SET hold_until = ` + parkedHold + ` WHERE instance_id = :inst`

// wakeInstanceSQL ends the park of an instance, and only a park: a hold
// of an abandon stays. It waits for a round that holds the instance (the
// round that parks it, say) and then finds the newest hold.
const wakeInstanceSQL = `
UPDATE {{obj:INSTANCES}} SET hold_until = NULL WHERE instance_id = :inst AND hold_until = ` + parkedHold

// wakeSQL enqueues a wake message per queue kind that got work (:orch,
// :act are 1 or 0) with ON_COMMIT visibility: it becomes visible exactly
// when the round commits, and goes if the round rolls back. Enqueues are
// coalesced: a kind whose wake message is still ready (not dequeued yet)
// gets none, so a listener dequeues one message per wake-up however many
// rounds committed meanwhile. The check runs as dynamic SQL and any of its
// failures only skips the coalescing; a failed enqueue is reported in
// :failure and costs other processes their safety poll, never the round.
const wakeSQL = `
DECLARE
    eopt  DBMS_AQ.ENQUEUE_OPTIONS_T;
    mprop DBMS_AQ.MESSAGE_PROPERTIES_T;
    msgid RAW(16);
    PROCEDURE wake(kind IN VARCHAR2, message IN RAW) IS
        ready PLS_INTEGER := 0;
    BEGIN
        BEGIN
            EXECUTE IMMEDIATE 'SELECT COUNT(*) FROM {{aqview:WQT}}'
                || ' WHERE queue = ''{{aqname:WQ}}'' AND corr_id = :k AND msg_state = ''READY'' AND ROWNUM = 1'
                INTO ready USING kind;
        EXCEPTION WHEN OTHERS THEN
            ready := 0;
        END;
        IF ready = 0 THEN
            mprop.correlation := kind;
            DBMS_AQ.ENQUEUE(queue_name => '{{aq:WQ}}', enqueue_options => eopt,
                message_properties => mprop, payload => message, msgid => msgid);
        END IF;
    END;
BEGIN
    :failure := NULL;
    eopt.visibility := DBMS_AQ.ON_COMMIT;
    IF :orch = 1 THEN
        wake('orchestration', HEXTORAW('01'));
    END IF;
    IF :act = 1 THEN
        wake('activity', HEXTORAW('02'));
    END IF;
EXCEPTION WHEN OTHERS THEN
    :failure := SQLERRM;
END;`

// listenSQL dequeues the ready wake messages, waiting up to :secs seconds
// for the first, and tells which queue kinds they name. Its dequeues
// commit on their own (IMMEDIATE visibility).
const listenSQL = `
DECLARE
    dopt     DBMS_AQ.DEQUEUE_OPTIONS_T;
    mprop    DBMS_AQ.MESSAGE_PROPERTIES_T;
    msgid    RAW(16);
    message  RAW(2000);
    got      PLS_INTEGER := 0;
    finished BOOLEAN := FALSE;
    timed_out EXCEPTION;
    PRAGMA EXCEPTION_INIT(timed_out, -25228);
BEGIN
    :orch := 0;
    :act := 0;
    dopt.visibility := DBMS_AQ.IMMEDIATE;
    -- FIRST_MESSAGE: see wake messages committed after this session's
    -- first dequeue in any order (NEXT_MESSAGE reads from that snapshot).
    dopt.navigation := DBMS_AQ.FIRST_MESSAGE;
    dopt.wait := :secs;
    WHILE NOT finished AND got < 1000 LOOP
        BEGIN
            DBMS_AQ.DEQUEUE(queue_name => '{{aq:WQ}}', dequeue_options => dopt,
                message_properties => mprop, payload => message, msgid => msgid);
            got := got + 1;
            IF mprop.correlation = 'activity' THEN
                :act := 1;
            ELSE
                :orch := 1;
            END IF;
            dopt.wait := DBMS_AQ.NO_WAIT;
        EXCEPTION WHEN timed_out THEN
            finished := TRUE;
        END;
    END LOOP;
END;`

// statements are the provider's SQL with the store's names filled in.
type statements struct {
	ensureInstance, insertMessage                                                 string
	dequeueCandidates, lockInstance, hasVisible, dequeueFetch                     string
	clearHold, ackMessages, abandonMessages, holdInstance                         string
	listMessages, nextOrchestration, nextActivity                                 string
	loadHistory, lastSeq, historyHead, historyTail, appendHistoryRow              string
	saveRecord, saveSnapshot, saveTask, deleteTaskRoles                           string
	insertTaskRole, takenTask, saveTaskEvent, saveCustom                          string
	getInstance, getSnapshot, listInstances                                       string
	countInstances, countJoin, listCustom, listAttributes, deleteAttributes       string
	insertAttributeRow                                                            string
	getTask, listTasks, listTaskEvents, getCustom                                 string
	resetInstance, resetTaskRoles, resetTasks, resetTaskEvents                    string
	resetCustom                                                                   string
	insertTaskID, insertTask, claimCandidates, claimLock, claim                   string
	heartbeatActivity, taskEnvelope, retryActivity                                string
	completeActivity, claimedTask, lockInstanceWait, lockClaimedTask              string
	cancelActivities, listQueuedActivities                                        string
	insertDeadLetter, setIncident, lockDeadLetter                                 string
	resolveDeadLetter, refreshIncident, redriveTaskDelete                         string
	selectDeadLetter, listDeadLetters                                             string
	purgeLock, purgeProbe, purgeMessages, tombstone, getTombstone, listTombstones string
	wake, listen                                                                  string
	ensureActivityKey, lockActivityKey, countClaims                               string
	ensureRateWindow, dropRateWindows, takeRateToken, rateUsed                    string
	ensureSlot, setSlotLimit, lockSlot, slotMember, slotCounts                    string
	insertSlotMember, promoteSlotMember, deleteSlotMember, firstWaiters           string
	listSlots, getSlot, slotMembers, parkInstance, wakeInstance                   string
	holdLock, insertHold, getHold, releaseHold, listHolds                         string
	purge                                                                         []string
	// appends holds the multi-row append statement per event count.
	appends sync.Map
	// attrInserts holds the multi-row insert of attribute rows per row
	// count.
	attrInserts sync.Map
}

// newStatements renders every statement for a store's names: once per
// store, so that each call only binds.
func newStatements(n names) *statements {
	q := n.render
	st := &statements{
		ensureInstance: q(ensureInstanceSQL), insertMessage: q(insertMessageSQL),
		dequeueCandidates: q(dequeueCandidatesSQL), lockInstance: q(lockInstanceSQL),
		hasVisible: q(hasVisibleSQL), dequeueFetch: q(dequeueFetchSQL),
		clearHold: q(clearHoldSQL), ackMessages: q(ackMessagesSQL), abandonMessages: q(abandonMessagesSQL),
		holdInstance: q(holdInstanceSQL), listMessages: q(listMessagesSQL),
		nextOrchestration: q(nextOrchestrationSQL), nextActivity: q(nextActivitySQL),
		loadHistory: q(loadHistorySQL), lastSeq: q(lastSeqSQL), historyHead: q(historyHeadSQL),
		historyTail: q(historyTailSQL), appendHistoryRow: q(appendHistoryRow),
		saveRecord: q(saveRecordSQL), saveSnapshot: q(saveSnapshotSQL), saveTask: q(saveTaskSQL),
		deleteTaskRoles: q(deleteTaskRolesSQL), insertTaskRole: q(insertTaskRoleSQL),
		takenTask: q(takenTaskSQL), saveTaskEvent: q(saveTaskEventSQL), saveCustom: q(saveCustomSQL),
		getInstance: q(getInstanceSQL), getSnapshot: q(getSnapshotSQL), listInstances: q(listInstancesSQL),
		countInstances: q(countInstancesSQL), countJoin: q(countJoinSQL), listCustom: q(listCustomSQL),
		listAttributes: q(listAttributesSQL), deleteAttributes: q(deleteAttributesSQL),
		insertAttributeRow: q(insertAttributeRow),
		getTask:            q(getTaskSQL), listTasks: q(listTasksSQL), listTaskEvents: q(listTaskEventsSQL),
		getCustom:     q(getCustomSQL),
		resetInstance: q(resetInstanceSQL), resetTaskRoles: q(resetTaskRolesSQL), resetTasks: q(resetTasksSQL),
		resetTaskEvents: q(resetTaskEventsSQL), resetCustom: q(resetCustomSQL),
		insertTaskID: q(insertTaskIDSQL), insertTask: q(insertTaskSQL),
		claimCandidates: q(claimCandidatesSQL), claimLock: q(claimLockSQL), claim: q(claimSQL),
		heartbeatActivity: q(heartbeatActivitySQL), taskEnvelope: q(taskEnvelopeSQL),
		retryActivity: q(retryActivitySQL), completeActivity: q(completeActivitySQL),
		claimedTask: q(claimedTaskSQL), lockInstanceWait: q(lockInstanceWaitSQL),
		lockClaimedTask:  q(lockClaimedTaskSQL),
		cancelActivities: q(cancelActivitiesSQL), listQueuedActivities: q(listQueuedActivitiesSQL),
		insertDeadLetter: q(insertDeadLetterSQL), setIncident: q(setIncidentSQL),
		lockDeadLetter: q(lockDeadLetterSQL), resolveDeadLetter: q(resolveDeadLetterSQL),
		refreshIncident: q(refreshIncidentSQL), redriveTaskDelete: q(redriveTaskDeleteSQL),
		selectDeadLetter: q(selectDeadLetterSQL), listDeadLetters: q(listDeadLettersSQL),
		purgeLock: q(purgeLockSQL), purgeProbe: q(purgeProbeSQL), purgeMessages: q(purgeMessagesSQL), tombstone: q(tombstoneSQL),
		getTombstone: q(getTombstoneSQL), listTombstones: q(listTombstonesSQL),
		wake: q(wakeSQL), listen: q(listenSQL),
		ensureActivityKey: q(ensureActivityKeySQL), lockActivityKey: q(lockActivityKeySQL),
		countClaims: q(countClaimsSQL), ensureRateWindow: q(ensureRateWindowSQL),
		dropRateWindows: q(dropRateWindowsSQL), takeRateToken: q(takeRateTokenSQL), rateUsed: q(rateUsedSQL),
		ensureSlot: q(ensureSlotSQL), setSlotLimit: q(setSlotLimitSQL), lockSlot: q(lockSlotSQL),
		slotMember: q(slotMemberSQL), slotCounts: q(slotCountsSQL), insertSlotMember: q(insertSlotMemberSQL),
		promoteSlotMember: q(promoteSlotMemberSQL), deleteSlotMember: q(deleteSlotMemberSQL),
		firstWaiters: q(firstWaitersSQL), listSlots: q(listSlotsSQL), getSlot: q(getSlotSQL),
		slotMembers: q(slotMembersSQL), parkInstance: q(parkInstanceSQL), wakeInstance: q(wakeInstanceSQL),
		holdLock: q(holdLockSQL), insertHold: q(insertHoldSQL), getHold: q(getHoldSQL),
		releaseHold: q(releaseHoldSQL), listHolds: q(listHoldsSQL),
	}
	for _, sql := range purgeSQL {
		st.purge = append(st.purge, q(sql))
	}
	return st
}
