package oracle

import (
	"fmt"
	"regexp"
	"strings"
)

// names renders the store's object names from its schema and prefix, both
// validated identifiers in upper case.
type names struct {
	schema, prefix string
}

// object is the quoted, schema-qualified name of the object suffix names:
// "SCHEMA"."PREFIX_SUFFIX".
func (n names) object(suffix string) string {
	return `"` + n.schema + `"."` + n.prefix + "_" + suffix + `"`
}

// local is the quoted name of suffix without the schema, as constraint
// names are written: "PREFIX_SUFFIX".
func (n names) local(suffix string) string { return `"` + n.prefix + "_" + suffix + `"` }

// aq is the unquoted, qualified name DBMS_AQ and DBMS_AQADM take in a
// string literal: SCHEMA.PREFIX_SUFFIX.
func (n names) aq(suffix string) string { return n.schema + "." + n.prefix + "_" + suffix }

// placeholder matches the markers of the SQL templates: {{obj:NAME}},
// {{name:NAME}}, {{aq:NAME}}, {{aqname:NAME}} (the unqualified name, as AQ
// views show it) and {{aqview:NAME}} (the queue table's AQ$ view).
var placeholder = regexp.MustCompile(`\{\{(obj|name|aq|aqname|aqview):([A-Z0-9_]+)\}\}`)

// render fills in the static markers of a template. Markers of lists,
// {{list:NAME}}, are filled in per call by expandList.
func (n names) render(sql string) string {
	return placeholder.ReplaceAllStringFunc(sql, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		switch sub[1] {
		case "obj":
			return n.object(sub[2])
		case "name":
			return n.local(sub[2])
		case "aq":
			return n.aq(sub[2])
		case "aqname":
			return n.prefix + "_" + sub[2]
		case "aqview":
			return `"` + n.schema + `"."AQ$` + n.prefix + "_" + sub[2] + `"`
		}
		return m
	})
}

// Object suffixes: every object the migrations create, in the order
// DropObjects removes them.
const (
	tableInstances         = "INSTANCES"
	tableHistory           = "HISTORY"
	tableMessages          = "MESSAGES"
	tableActivityTaskIDs   = "ACTIVITY_TASK_IDS"
	tableActivityTasks     = "ACTIVITY_TASKS"
	tableDeadLetters       = "DEAD_LETTERS"
	tableHumanTasks        = "HUMAN_TASKS"
	tableHumanTaskRoles    = "HUMAN_TASK_ROLES"
	tableHumanTaskEvents   = "HUMAN_TASK_EVENTS"
	tableCustomProjections = "CUSTOM_PROJECTIONS"
	tableTombstones        = "TOMBSTONES"
	tableAttributes        = "ATTRIBUTES"
	tableActivityKeys      = "ACTIVITY_KEYS"
	tableRateWindows       = "RATE_WINDOWS"
	tableFlowSlotMembers   = "FLOW_SLOT_MEMBERS"
	tableFlowSlots         = "FLOW_SLOTS"
	tableLegalHolds        = "LEGAL_HOLDS"
	tableSchemaMigrations  = "SCHEMA_MIGRATIONS"
	tableMigrationLock     = "MIGRATION_LOCK"
	sequenceLeaseTokens    = "LEASE_TOKENS"
	wakeQueue              = "WQ"
	wakeQueueTable         = "WQT"
)

// dataTables are the tables holding a store's data, in the order a purge
// of everything would delete from them; schema_migrations and the lock
// table are not among them.
var dataTables = []string{
	tableHistory, tableMessages, tableActivityTasks, tableActivityTaskIDs, tableDeadLetters,
	tableHumanTaskRoles, tableHumanTasks, tableHumanTaskEvents, tableCustomProjections,
	tableTombstones, tableAttributes, tableActivityKeys, tableRateWindows,
	tableFlowSlotMembers, tableFlowSlots, tableLegalHolds, tableInstances,
}

// Tables lists the names, as [Store.Table] takes them, of the tables
// that hold a store's data (not its migration records).
func Tables() []string {
	out := make([]string, len(dataTables))
	for i, t := range dataTables {
		out[i] = strings.ToLower(t)
	}
	return out
}

// maxListLength bounds the binds of one IN list (Oracle allows 1,000
// expressions); longer lists are split by the callers that must see every
// element, and cut by those for which a shorter list only costs work.
const maxListLength = 512

// listLength is the number of binds an IN list of n values gets: the next
// power of two, so that few distinct statement texts reach the server's
// cursor cache. Extra binds repeat the first value.
func listLength(n int) int {
	size := 1
	for size < n {
		size *= 2
	}
	return size
}

// expandList replaces every {{list:name}} in sql with the binds :name0, :name1, …
// of values (padded as listLength says) and returns the SQL and the named
// arguments. values must not be empty.
func expandList(sql, name string, values []string) (string, []any) {
	if len(values) == 0 {
		panic("oracle: expandList of an empty list")
	}
	size := listLength(len(values))
	binds := make([]string, size)
	args := make([]any, size)
	for i := range size {
		v := values[0]
		if i < len(values) {
			v = values[i]
		}
		binds[i] = fmt.Sprintf(":%s%d", name, i)
		args[i] = named(fmt.Sprintf("%s%d", name, i), v)
	}
	return strings.ReplaceAll(sql, "{{list:"+name+"}}", strings.Join(binds, ", ")), args
}

// noMatch stands in an IN list that must not be empty: no id starts with
// a space (history.ValidateID), and unlike "" it is not NULL in Oracle.
const noMatch = " "

// chunks splits values into lists of at most maxListLength.
func chunks(values []string) [][]string {
	var out [][]string
	for len(values) > maxListLength {
		out = append(out, values[:maxListLength])
		values = values[maxListLength:]
	}
	if len(values) > 0 {
		out = append(out, values)
	}
	return out
}
