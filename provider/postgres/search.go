package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// recordColumnsSQL are the columns scanRecord reads, as recordSelect
// lists them.
const recordColumnsSQL = `instance_id, record_seq, execution_id, name, version, status, business_key, business_parts, custom_status,
    parent_id, created_at, updated_at, completed_at, output, failure, last_error, incident,
    attrs, coalesce(custom_status_text, '')`

// instanceFilter compiles the filter of a listing or count: the record
// exists, the params' fields, then Where. Only the conditions that apply
// are written, so that a plan (generic ones too) sees each condition
// it can use an index for.
func (s *Store) instanceFilter(w *whereSQL, p *provider.ListInstancesParams) (string, error) {
	w.driven = w.driven && drivenBy(p.Where)
	conds := []string{w.alias + "record_seq IS NOT NULL"}
	if p.AfterID != "" {
		conds = append(conds, w.alias+"instance_id > "+w.arg(p.AfterID)+"::text")
	}
	if p.Status != "" {
		conds = append(conds, w.alias+"status"+w.eq()+w.arg(string(p.Status))+"::text")
	}
	if p.Terminal {
		conds = append(conds, w.alias+"status"+strings.TrimSuffix(w.eq(), " ")+" ANY ("+w.arg(terminalStatuses)+"::text[])")
	}
	if p.Name != "" {
		conds = append(conds, w.alias+"name"+w.eq()+w.arg(p.Name)+"::text")
	}
	if p.BusinessKey != "" {
		conds = append(conds, w.alias+"business_key"+w.eq()+w.arg(p.BusinessKey)+"::text")
	}
	// A NULL time counts as the zero time, before any bound, as in the
	// other providers.
	if !p.CreatedFrom.IsZero() {
		conds = append(conds, w.alias+"created_at >= "+w.arg(p.CreatedFrom)+"::timestamptz")
	}
	if !p.CreatedTo.IsZero() {
		conds = append(conds, "coalesce("+w.alias+"created_at, '-infinity') < "+w.arg(p.CreatedTo)+"::timestamptz")
	}
	if !p.UpdatedBefore.IsZero() {
		conds = append(conds, "coalesce("+w.alias+"updated_at, '-infinity') < "+w.arg(p.UpdatedBefore)+"::timestamptz")
	}
	if p.Where != nil {
		where, err := w.compile(p.Where)
		if err != nil {
			return "", err
		}
		conds = append(conds, where)
	}
	return strings.Join(conds, "\n  AND "), nil
}

// searchMode is how search statements are sent: as an unnamed statement
// with a cached description, so that the server plans each execution
// with its values (a custom plan: it knows a customer is selective and a
// region is not) instead of settling on a generic plan after five runs,
// as it may for a named prepared statement.
const searchMode = pgx.QueryExecModeCacheDescribe

// forcedGeneric reports whether the pool's sessions are on
// plan_cache_mode = force_generic_plan (a server, database or role
// setting), where even an unnamed statement gets a generic plan: search
// statements driven by an attribute are then written in the shape that
// keeps such a plan on the GIN index (see whereSQL.driven). It asks the
// server once; if it cannot, it assumes generic plans.
func (s *Store) forcedGeneric(ctx context.Context) bool {
	switch s.genericPlans.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	var mode string
	if err := s.pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		return true
	}
	generic := mode == "force_generic_plan"
	s.genericPlans.Store(map[bool]int32{false: 1, true: 2}[generic])
	return generic
}

// ListInstances implements provider.QueryStore.
func (s *Store) ListInstances(ctx context.Context, p *provider.ListInstancesParams) ([]provider.InstanceRecord, error) {
	w := &whereSQL{driven: s.forcedGeneric(ctx)}
	cond, err := s.instanceFilter(w, p)
	if err != nil {
		return nil, fmt.Errorf("postgres: list instances: %w", err)
	}
	// The limit is a number in the statement, not a parameter, so that
	// a generic plan knows it (it takes 10 % of the rows otherwise).
	sql := "SELECT " + recordColumnsSQL + "\nFROM " + s.table("instances") + "\nWHERE " + cond +
		"\nORDER BY " + w.orderBy("instance_id") + "\nLIMIT " + strconv.Itoa(limitOf(p.Limit))
	rows, err := s.pool.Query(ctx, sql, append([]any{searchMode}, w.args...)...)
	if err != nil {
		return nil, failf(err, "list instances")
	}
	defer rows.Close()
	var out []provider.InstanceRecord
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, failf(err, "list instances")
		}
		out = append(out, *r)
	}
	return out, failf(rows.Err(), "list instances")
}

// table returns the qualified name of one of the store's tables.
func (s *Store) table(name string) string {
	return pgx.Identifier{s.schema, name}.Sanitize()
}

// CountInstances implements provider.QueryStore. Groups of a built-in
// field are its column's values (an empty string is no value); those of
// an attribute are its stored values of the declared type (a value of
// another type counts as none).
func (s *Store) CountInstances(ctx context.Context, p *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	w := &whereSQL{driven: s.forcedGeneric(ctx)}
	cond, err := s.instanceFilter(w, &provider.ListInstancesParams{Where: p.Where})
	if err != nil {
		return nil, fmt.Errorf("postgres: count instances: %w", err)
	}
	from := "\nFROM " + s.table("instances") + "\nWHERE " + cond
	if p.By == nil {
		var n int64
		if err := s.pool.QueryRow(ctx, "SELECT count(*)"+from, append([]any{searchMode}, w.args...)...).Scan(&n); err != nil {
			return nil, failf(err, "count instances")
		}
		return []provider.GroupCount{{Count: n}}, nil
	}
	by := *p.By
	var key string
	switch {
	case by.Builtin != query.Attribute:
		col, _, err := w.column(by)
		if err != nil {
			return nil, fmt.Errorf("postgres: count instances: %w", err)
		}
		key = col
	case by.Type == query.KeywordList:
		return nil, fmt.Errorf("postgres: count instances: %w: a keyword list (%s) cannot group", query.ErrInvalidQuery, by.Name)
	default:
		tag := typeTag(by.Type)
		if tag == "" {
			return nil, fmt.Errorf("postgres: count instances: %w: attribute %s has no type", query.ErrInvalidQuery, by.Name)
		}
		// The value under the type's tag ("c-17" of {"k": "c-17"}).
		key = w.attr(by) + " -> '" + tag + "'"
	}
	rows, err := s.pool.Query(ctx, "SELECT "+key+", count(*)"+from+"\nGROUP BY 1", append([]any{searchMode}, w.args...)...)
	if err != nil {
		return nil, failf(err, "count instances")
	}
	defer rows.Close()
	var (
		out  []provider.GroupCount
		none int64
	)
	for rows.Next() {
		var (
			v query.Value
			n int64
		)
		switch {
		case by.Builtin == query.Attribute:
			var raw []byte
			if err := rows.Scan(&raw, &n); err != nil {
				return nil, failf(err, "count instances")
			}
			if raw != nil {
				var sv storedValue
				doc := append(append([]byte(`{"`+typeTag(by.Type)+`":`), raw...), '}')
				if err := json.Unmarshal(doc, &sv); err != nil {
					return nil, fmt.Errorf("postgres: count instances: group of %s: %w", by.Name, err)
				}
				if v, err = sv.value(); err != nil {
					return nil, fmt.Errorf("postgres: count instances: group of %s: %w", by.Name, err)
				}
			}
		case by.Type == query.Time:
			var t *time.Time
			if err := rows.Scan(&t, &n); err != nil {
				return nil, failf(err, "count instances")
			}
			if t != nil {
				v = query.Value{Type: query.Time, Time: t.UTC()}
			}
		default:
			var str *string
			if err := rows.Scan(&str, &n); err != nil {
				return nil, failf(err, "count instances")
			}
			if str != nil && *str != "" {
				v = query.Value{Type: query.Keyword, Str: *str}
			}
		}
		if v.Type == query.Invalid {
			none += n
			continue
		}
		out = append(out, provider.GroupCount{Value: v, Count: n})
	}
	if err := rows.Err(); err != nil {
		return nil, failf(err, "count instances")
	}
	slices.SortFunc(out, func(a, b provider.GroupCount) int { return query.Compare(a.Value, b.Value) })
	if none > 0 {
		out = slices.Insert(out, 0, provider.GroupCount{Count: none})
	}
	return out, nil
}

// ListCustomProjections implements provider.QueryStore.
func (s *Store) ListCustomProjections(ctx context.Context, p *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	w := &whereSQL{alias: "i.", driven: s.forcedGeneric(ctx)}
	name := w.arg(p.Name)
	cond, err := s.instanceFilter(w, &provider.ListInstancesParams{Where: p.Where})
	if err != nil {
		return nil, fmt.Errorf("postgres: list projection %s: %w", p.Name, err)
	}
	after := ""
	if p.AfterID != "" {
		after = "\n  AND c.instance_id > " + w.arg(p.AfterID) + "::text"
	}
	sql := "SELECT c.instance_id, c.version, c.seq, c.data\nFROM " + s.table("custom_projections") + " AS c\nJOIN " +
		s.table("instances") + " AS i ON " + s.joinOnPart("i", "c") + "i.instance_id = c.instance_id\nWHERE c.name = " + name + "::text" + after +
		"\n  AND " + cond + "\nORDER BY " + w.orderBy("c.instance_id") + "\nLIMIT " + strconv.Itoa(limitOf(p.Limit))
	rows, err := s.pool.Query(ctx, sql, append([]any{searchMode}, w.args...)...)
	if err != nil {
		return nil, failf(err, "list projection %s", p.Name)
	}
	defer rows.Close()
	var out []provider.CustomRecord
	for rows.Next() {
		c := provider.CustomRecord{Name: p.Name}
		var version int32
		if err := rows.Scan(&c.InstanceID, &version, &c.Seq, &c.Data); err != nil {
			return nil, failf(err, "list projection %s", p.Name)
		}
		c.Version = int(version)
		out = append(out, c)
	}
	return out, failf(rows.Err(), "list projection %s", p.Name)
}
