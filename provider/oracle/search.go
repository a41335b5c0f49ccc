package oracle

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// maxStatusKey is the longest custom status text that queries see: the
// key column holds 4,000 bytes.
const maxStatusKey = 4000

// statusKey is the bind of custom_status_key: the text when it fits,
// NULL otherwise (and for "").
func statusKey(s string) any {
	if s == "" || len(s) > maxStatusKey {
		return nil
	}
	return s
}

// withWhere fills the {{where}} of a rendered statement with the compiled
// filter (rendered for the store's names) and returns its binds.
func (s *Store) withWhere(stmt string, e query.Expr) (string, []any, error) {
	cond, args, err := compileWhere(e)
	if err != nil {
		return "", nil, err
	}
	return strings.Replace(stmt, "{{where}}", s.names.render(cond), 1), args, nil
}

// attrRow is one row of the attributes table.
type attrRow struct {
	name string
	pos  int64
	typ  query.Type
	str  any
	num  any
	dbl  any
}

// attrRows are the rows of an instance's attributes, in name order; an
// unset value has none.
func attrRows(attrs map[string]query.Value) []attrRow {
	names := make([]string, 0, len(attrs))
	for name, v := range attrs {
		if !v.IsZero() && validAttrName(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var rows []attrRow
	for _, name := range names {
		v := attrs[name]
		row := attrRow{name: name, typ: v.Type}
		switch v.Type {
		case query.Keyword:
			row.str = keywordTag + v.Str
		case query.KeywordList:
			for i, e := range v.List {
				rows = append(rows, attrRow{name: name, pos: int64(i), typ: v.Type, str: keywordTag + e})
			}
			continue
		case query.Int:
			row.num = v.Int
		case query.Float:
			row.dbl = v.Float
		case query.Bool:
			row.num = int64(0)
			if v.Bool {
				row.num = int64(1)
			}
		case query.Time:
			row.num = v.Time.UnixMicro()
		default:
			continue
		}
		rows = append(rows, row)
	}
	return rows
}

// attrChunk is how many attribute rows one INSERT ALL writes (Oracle
// takes at most 999 target columns in a multitable insert; a row has 7).
const attrChunk = 100

// insertAttributesSQL returns the INSERT ALL of n attribute rows.
func (st *statements) insertAttributesSQL(n int) string {
	if text, ok := st.attrInserts.Load(n); ok {
		return text.(string)
	}
	var sb strings.Builder
	sb.WriteString("INSERT ALL")
	for i := range n {
		fmt.Fprintf(&sb, st.insertAttributeRow, i)
	}
	sb.WriteString("\nSELECT 1 FROM dual")
	text, _ := st.attrInserts.LoadOrStore(n, sb.String())
	return text.(string)
}

// saveAttributes replaces the attribute rows of an instance, in the
// transaction that wrote its record.
func (s *Store) saveAttributes(ctx context.Context, db dbtx, instanceID string, attrs map[string]query.Value) error {
	if _, err := db.ExecContext(ctx, s.sql.deleteAttributes, named("inst", instanceID)); err != nil {
		return failf(err, "save the attributes of %s", instanceID)
	}
	rows := attrRows(attrs)
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), attrChunk)]
		rows = rows[len(chunk):]
		args := []any{named("inst", instanceID)}
		for i, r := range chunk {
			args = append(args, named(fmt.Sprintf("a_nm%d", i), r.name), named(fmt.Sprintf("a_pos%d", i), r.pos),
				named(fmt.Sprintf("a_typ%d", i), int64(r.typ)), named(fmt.Sprintf("a_str%d", i), r.str),
				named(fmt.Sprintf("a_num%d", i), r.num), named(fmt.Sprintf("a_dbl%d", i), r.dbl))
		}
		if _, err := db.ExecContext(ctx, s.sql.insertAttributesSQL(len(chunk)), args...); err != nil {
			return failf(err, "save the attributes of %s", instanceID)
		}
	}
	return nil
}

// loadAttributes reads the attributes of records, in one query per
// chunk of ids.
func (s *Store) loadAttributes(ctx context.Context, recs []*provider.InstanceRecord) error {
	if len(recs) == 0 {
		return nil
	}
	byID := make(map[string]*provider.InstanceRecord, len(recs))
	ids := make([]string, len(recs))
	for i, r := range recs {
		byID[r.InstanceID], ids[i] = r, r.InstanceID
	}
	for _, part := range chunks(ids) {
		text, args := expandList(s.sql.listAttributes, "ids", part)
		if err := s.readAttributes(ctx, text, args, byID); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) readAttributes(ctx context.Context, text string, args []any, byID map[string]*provider.InstanceRecord) error {
	rows, err := s.db.QueryContext(ctx, text, args...)
	if err != nil {
		return failf(err, "read attributes")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, name, str string
			pos, typ      int64
			num           numScan
			dbl           floatScan
		)
		if err := rows.Scan(strScan{&id}, strScan{&name}, intScan{&pos}, intScan{&typ}, strScan{&str}, &num, &dbl); err != nil {
			return failf(err, "read attributes")
		}
		r := byID[id]
		if r == nil {
			continue
		}
		v, ok := storedValue(query.Type(typ), str, num, dbl)
		if !ok {
			continue
		}
		if r.Attributes == nil {
			r.Attributes = map[string]query.Value{}
		}
		if v.Type == query.KeywordList {
			old := r.Attributes[name]
			v.List = append(old.List, v.List...)
		}
		r.Attributes[name] = v
	}
	return failf(rows.Err(), "read attributes")
}

// storedValue reads one attribute row back into a Value (one element of
// a list).
func storedValue(t query.Type, str string, num numScan, dbl floatScan) (query.Value, bool) {
	switch t {
	case query.Keyword:
		return query.Value{Type: t, Str: strings.TrimPrefix(str, keywordTag)}, true
	case query.KeywordList:
		return query.Value{Type: t, List: []string{strings.TrimPrefix(str, keywordTag)}}, true
	case query.Int:
		return query.Value{Type: t, Int: num.n}, num.ok
	case query.Bool:
		return query.Value{Type: t, Bool: num.n != 0}, num.ok
	case query.Time:
		return query.Value{Type: t, Time: time.UnixMicro(num.n).UTC()}, num.ok
	case query.Float:
		return query.Value{Type: t, Float: dbl.f}, dbl.ok
	}
	return query.Value{}, false
}

// numScan scans a NUMBER that may be NULL.
type numScan struct {
	n  int64
	ok bool
}

// Scan implements sql.Scanner.
func (s *numScan) Scan(v any) error {
	n, ok, err := scanNumber(v)
	s.n, s.ok = n, ok
	return err
}

// floatScan scans a BINARY_DOUBLE that may be NULL.
type floatScan struct {
	f  float64
	ok bool
}

// Scan implements sql.Scanner.
func (s *floatScan) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		s.f, s.ok = 0, false
		return nil
	case float64:
		s.f, s.ok = v, true
		return nil
	case float32:
		s.f, s.ok = float64(v), true
		return nil
	case int64:
		s.f, s.ok = float64(v), true
		return nil
	}
	var f float64
	if _, err := fmt.Sscan(fmt.Sprint(v), &f); err != nil {
		return fmt.Errorf("oracle: scan a float %v: %w", v, err)
	}
	if math.IsNaN(f) {
		return fmt.Errorf("oracle: scan a float: NaN")
	}
	s.f, s.ok = f, true
	return nil
}

// countStatement is the count of p with its binds, and the field it
// groups by (nil for one group).
func (s *Store) countStatement(p *provider.CountInstancesParams) (string, []any, *field, error) {
	text, args, err := s.withWhere(s.sql.countInstances, p.Where)
	if err != nil {
		return "", nil, nil, err
	}
	group, join, groupBy := "0", "", ""
	var f *field
	if p.By != nil {
		g, err := groupColumn(p.By)
		if err != nil {
			return "", nil, nil, err
		}
		f = &g
		group = g.col
		if g.attr {
			group = "g" + strings.TrimPrefix(g.col, "a")
			join = s.sql.countJoin
			args = append(args, named("gname", g.name), named("gtype", storedType(g.typ)))
		}
		groupBy = "\nGROUP BY " + group
	}
	text = strings.NewReplacer("{{join}}", join, "{{group}}", group, "{{groupby}}", groupBy).Replace(text)
	return text, args, f, nil
}

// CountInstances implements provider.QueryStore in one statement; the
// groups are ordered here (the no-value group first, then by value).
func (s *Store) CountInstances(ctx context.Context, p *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	text, args, f, err := s.countStatement(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, failf(err, "count instances")
	}
	defer rows.Close()
	var out []provider.GroupCount
	for rows.Next() {
		var (
			str   string
			num   numScan
			dbl   floatScan
			count int64
			dest  any = &num
		)
		if f != nil {
			switch f.typ {
			case query.Keyword:
				dest = strScan{&str}
			case query.Float:
				dest = &dbl
			}
		}
		if err := rows.Scan(dest, intScan{&count}); err != nil {
			return nil, failf(err, "count instances")
		}
		var v query.Value
		if f != nil {
			v = groupValue(*f, str, num, dbl)
		}
		i := slices.IndexFunc(out, func(g provider.GroupCount) bool {
			return query.Compare(g.Value, v) == 0 // the zero Value too: it is the group without one
		})
		if i >= 0 {
			out[i].Count += count
			continue
		}
		out = append(out, provider.GroupCount{Value: v, Count: count})
	}
	if err := rows.Err(); err != nil {
		return nil, failf(err, "count instances")
	}
	if f == nil && len(out) == 0 {
		out = []provider.GroupCount{{}}
	}
	// query.Compare orders the zero Value (no value) first.
	slices.SortFunc(out, func(a, b provider.GroupCount) int { return query.Compare(a.Value, b.Value) })
	return out, nil
}

// groupValue is a group's value as a Value of the field's type; NULL is
// the zero Value.
func groupValue(f field, str string, num numScan, dbl floatScan) query.Value {
	switch f.typ {
	case query.Keyword:
		if f.attr {
			if str == "" {
				return query.Value{}
			}
			return query.Value{Type: query.Keyword, Str: strings.TrimPrefix(str, keywordTag)}
		}
		if str != "" {
			return query.Value{Type: query.Keyword, Str: str}
		}
	case query.Time:
		if num.ok {
			if f.attr {
				return query.Value{Type: query.Time, Time: time.UnixMicro(num.n).UTC()}
			}
			return query.Value{Type: query.Time, Time: time.Unix(0, num.n).UTC()}
		}
	case query.Int, query.Bool, query.Float:
		if v, ok := storedValue(f.typ, "", num, dbl); ok {
			return v
		}
	}
	return query.Value{}
}

// ListCustomProjections implements provider.QueryStore in one statement:
// the records joined with the instance records that match.
func (s *Store) ListCustomProjections(ctx context.Context, p *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	text, args, err := s.withWhere(s.sql.listCustom, p.Where)
	if err != nil {
		return nil, err
	}
	args = append(args, named("pname", p.Name), named("after", p.AfterID), named("lim", int64(limitOf(p.Limit))))
	rows, err := s.db.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, failf(err, "list projection %s", p.Name)
	}
	defer rows.Close()
	var out []provider.CustomRecord
	for rows.Next() {
		c := provider.CustomRecord{Name: p.Name}
		var version int64
		if err := rows.Scan(strScan{&c.InstanceID}, intScan{&version}, intScan{&c.Seq}, &c.Data); err != nil {
			return nil, failf(err, "list projection %s", p.Name)
		}
		c.Version = int(version)
		out = append(out, c)
	}
	return out, failf(rows.Err(), "list projection %s", p.Name)
}
