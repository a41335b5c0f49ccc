package mongo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/chronicleflow/chronicle/provider"
	"github.com/chronicleflow/chronicle/query"
)

// ErrInvalidFilter is wrapped by the error of a query the store cannot
// translate: an attribute name that is not an identifier, an operator the
// field's type does not have, a value of another type than the field's.
// The engine's parser never produces one; a store called directly may.
var ErrInvalidFilter = errors.New("mongo: invalid filter")

// attrFields returns the two stored forms of an instance's search
// attributes (see instanceDoc): the values by name, in name order, and
// the sorted keys of every value. Unset values are left out.
func attrFields(attrs map[string]query.Value) (bson.D, []string) {
	names := make([]string, 0, len(attrs))
	for name, v := range attrs {
		if !v.IsZero() && validAttrName(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	a := make(bson.D, 0, len(names))
	ax := []string{}
	for _, name := range names {
		v := attrs[name]
		if v.Type == query.KeywordList {
			if len(v.List) == 0 {
				continue
			}
			a = append(a, bson.E{Key: name, Value: slices.Clone(v.List)})
		} else {
			a = append(a, bson.E{Key: name, Value: nativeValue(v)})
		}
		ax = append(ax, attrKeys(name, v)...)
	}
	if len(a) == 0 {
		a = nil
	}
	slices.Sort(ax)
	return a, slices.Compact(ax)
}

// nativeValue is the BSON value a attribute value is stored as in the
// "a" document: times as Unix microseconds (BSON dates keep only
// milliseconds).
func nativeValue(v query.Value) any {
	switch v.Type {
	case query.Keyword:
		return v.Str
	case query.Int:
		return v.Int
	case query.Float:
		return v.Float
	case query.Bool:
		return v.Bool
	case query.Time:
		return v.Time.UnixMicro()
	}
	return nil
}

// attrKeys returns the keys of an attribute value in the "ax" array: the
// name, a type code and the value in a form whose equality is the
// value's, one key per element of a list.
func attrKeys(name string, v query.Value) []string {
	if v.Type == query.KeywordList {
		out := make([]string, len(v.List))
		for i, s := range v.List {
			out[i] = attrKey(name, query.Value{Type: query.Keyword, Str: s})
		}
		return out
	}
	return []string{attrKey(name, v)}
}

// attrKey is the "ax" key of a single value: "name:code:value", with
// numbers and times in a fixed-width hexadecimal form (no two values of
// a type share a key; -0 and +0 do, as they are equal).
func attrKey(name string, v query.Value) string {
	var enc string
	switch v.Type {
	case query.Keyword, query.KeywordList:
		return name + ":k:" + v.Str
	case query.Int:
		enc = hex64(uint64(v.Int) ^ 1<<63)
	case query.Float:
		f := v.Float
		if f == 0 {
			f = 0
		}
		enc = hex64(math.Float64bits(f))
	case query.Bool:
		enc = strconv.FormatBool(v.Bool)
	case query.Time:
		enc = hex64(uint64(v.Time.UnixMicro()) ^ 1<<63)
	}
	return name + ":" + typeCode(v.Type) + ":" + enc
}

func hex64(u uint64) string { return fmt.Sprintf("%016x", u) }

func typeCode(t query.Type) string {
	switch t {
	case query.Keyword, query.KeywordList:
		return "k"
	case query.Int:
		return "i"
	case query.Float:
		return "f"
	case query.Bool:
		return "b"
	case query.Time:
		return "t"
	}
	return "?"
}

// validAttrName reports whether name can be a declared attribute's name
// (an identifier of at most 64 bytes: it names a field or fills a column).
func validAttrName(name string) bool { return query.ValidName(name) == nil }

// matchNothing is a filter no document matches.
func matchNothing() bson.D { return filter("_id", filter("$in", bson.A{})) }

// compileWhere translates a parsed filter into a filter document. Every
// value goes in as a BSON value; no user text becomes an operator or a
// field name (attribute names are checked to be identifiers), and no
// JavaScript ($where) or aggregation expression ($expr) is used.
//
// Two-valued logic: every term is false on a field without a value, so
// NOT x is {$nor: [x]} (true on an instance without the field). Keyword
// built-ins treat "" as no value, and every term on one requires a
// non-empty string ($gt: ""). Attribute terms of equality and IN test
// the "ax" keys; the others test the values in "a".
func compileWhere(e query.Expr) (bson.D, error) {
	if e == nil {
		return bson.D{}, nil
	}
	return compileExpr(e, 0)
}

// maxCompileDepth bounds the recursion of compileExpr (the parser bounds
// nesting at query.MaxDepth).
const maxCompileDepth = 2 * query.MaxDepth

func compileExpr(e query.Expr, depth int) (bson.D, error) {
	if depth > maxCompileDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrInvalidFilter, maxCompileDepth)
	}
	switch x := e.(type) {
	case *query.And:
		return compileList("$and", x.Terms, depth)
	case *query.Or:
		if len(x.Terms) == 0 {
			return matchNothing(), nil
		}
		return compileList("$or", x.Terms, depth)
	case *query.Not:
		if inner, ok := x.X.(*query.Not); ok {
			return compileExpr(inner.X, depth+1)
		}
		f, err := compileExpr(x.X, depth+1)
		if err != nil {
			return nil, err
		}
		return filter("$nor", bson.A{f}), nil
	case *query.Cmp:
		return compileCmp(x.Field, x.Op, x.Value)
	case *query.In:
		return compileIn(x)
	case *query.Prefix:
		return compilePrefix(x)
	case *query.Exists:
		return compileExists(x.Field)
	case nil:
		return bson.D{}, nil
	}
	return nil, fmt.Errorf("%w: unknown expression %T", ErrInvalidFilter, e)
}

func compileList(op string, terms []query.Expr, depth int) (bson.D, error) {
	if len(terms) == 0 {
		return bson.D{}, nil
	}
	parts := make(bson.A, 0, len(terms))
	for _, t := range terms {
		f, err := compileExpr(t, depth+1)
		if err != nil {
			return nil, err
		}
		parts = append(parts, f)
	}
	if len(parts) == 1 {
		return parts[0].(bson.D), nil
	}
	return filter(op, parts), nil
}

// builtinPath is the instance document's field of a built-in.
func builtinPath(b query.Builtin) string {
	switch b {
	case query.FieldID:
		return "_id"
	case query.FieldWorkflow:
		return "n"
	case query.FieldStatus:
		return "st"
	case query.FieldCustomStatus:
		return "cs"
	case query.FieldBusinessKey:
		return "bk"
	case query.FieldVersion:
		return "ver"
	case query.FieldParentID:
		return "p"
	case query.FieldCreatedAt:
		return "ca"
	case query.FieldUpdatedAt:
		return "ua"
	case query.FieldCompletedAt:
		return "co"
	}
	return ""
}

// field describes how a field is stored: its path, whether it is a time
// in nanoseconds (built-ins) or microseconds (attributes), and its type.
type field struct {
	path  string
	attr  bool
	typ   query.Type
	name  string
	nanos bool
}

func resolve(f query.Field) (field, error) {
	if f.Builtin == query.Attribute {
		if !validAttrName(f.Name) {
			return field{}, fmt.Errorf("%w: attribute name %q is not an identifier", ErrInvalidFilter, f.Name)
		}
		if f.Type < query.Keyword || f.Type > query.KeywordList {
			return field{}, fmt.Errorf("%w: attribute %s has no type", ErrInvalidFilter, f.Name)
		}
		return field{path: "a." + f.Name, attr: true, typ: f.Type, name: f.Name}, nil
	}
	path := builtinPath(f.Builtin)
	if path == "" {
		return field{}, fmt.Errorf("%w: unknown built-in field %d", ErrInvalidFilter, f.Builtin)
	}
	return field{path: path, typ: f.Builtin.Type(), name: f.Builtin.String(), nanos: f.Builtin.Type() == query.Time}, nil
}

// checkValue refuses a literal of another type than the field's (a
// keyword literal for a list field is one of its elements).
func checkValue(f field, v query.Value) error {
	want := f.typ
	if want == query.KeywordList {
		want = query.Keyword
	}
	if v.Type != want {
		return fmt.Errorf("%w: a %s value for %s, a %s field", ErrInvalidFilter, v.Type, f.name, f.typ)
	}
	return nil
}

func timeBound(f field, t time.Time, ceil bool) (n int64, exact bool) {
	return provider.TimeBound(t, f.nanos, ceil)
}

// scalar is the stored form of a literal for a comparison on the "a"
// document or a built-in's field.
func scalar(f field, v query.Value, ceil bool) (any, bool) {
	if v.Type == query.Time {
		n, exact := timeBound(f, v.Time, ceil)
		return n, exact
	}
	if f.attr {
		return nativeValue(v), true
	}
	return v.Str, true
}

// keywordBuiltin reports whether f is a keyword built-in, where "" is no
// value (the id always has one).
func (f field) keywordBuiltin() bool { return !f.attr && f.typ == query.Keyword && f.path != "_id" }

// exists is the condition that f has a value.
func (f field) exists() bson.E {
	if f.keywordBuiltin() {
		return bson.E{Key: "$gt", Value: ""}
	}
	return bson.E{Key: "$exists", Value: true}
}

func compileCmp(qf query.Field, op query.Op, v query.Value) (bson.D, error) {
	f, err := resolve(qf)
	if err != nil {
		return nil, err
	}
	if err := checkValue(f, v); err != nil {
		return nil, err
	}
	if f.typ == query.KeywordList && op != query.Eq && op != query.Ne {
		return nil, fmt.Errorf("%w: a list field (%s) compares only with = and !=", ErrInvalidFilter, f.name)
	}
	if f.typ == query.Bool && op != query.Eq && op != query.Ne {
		return nil, fmt.Errorf("%w: a bool field (%s) compares only with = and !=", ErrInvalidFilter, f.name)
	}
	if f.keywordBuiltin() && v.Str == "" {
		// "" is no value: = '' and every bound by '' say nothing of a
		// value but whether there is one.
		switch op {
		case query.Eq, query.Lt:
			return matchNothing(), nil
		case query.Ne, query.Gt, query.Ge:
			return compileExists(qf)
		case query.Le:
			return matchNothing(), nil
		}
	}
	if f.attr && (op == query.Eq || op == query.Ne) {
		key := attrKey(f.name, v)
		if v.Type == query.Time {
			if _, exact := timeBound(f, v.Time, false); !exact {
				if op == query.Eq {
					return matchNothing(), nil
				}
				return compileExists(qf)
			}
		}
		if op == query.Eq {
			return filter("ax", key), nil
		}
		// Set, and not (holding) the value.
		return filter("$and", bson.A{filter(f.path, filter("$exists", true)), filter("$nor", bson.A{filter("ax", key)})}), nil
	}
	switch op {
	case query.Eq:
		s, exact := scalar(f, v, false)
		if !exact {
			return matchNothing(), nil
		}
		return filter(f.path, s), nil
	case query.Ne:
		s, exact := scalar(f, v, false)
		if !exact {
			return compileExists(qf)
		}
		return filter(f.path, bson.D{f.exists(), {Key: "$ne", Value: s}}), nil
	case query.Lt, query.Ge:
		s, _ := scalar(f, v, true)
		o := "$lt"
		if op == query.Ge {
			o = "$gte"
		}
		d := bson.D{{Key: o, Value: s}}
		if f.keywordBuiltin() && op == query.Lt {
			d = append(d, f.exists())
		}
		return filter(f.path, d), nil
	case query.Gt, query.Le:
		s, _ := scalar(f, v, false)
		o := "$gt"
		if op == query.Le {
			o = "$lte"
		}
		d := bson.D{{Key: o, Value: s}}
		if f.keywordBuiltin() && op == query.Le {
			d = append(d, f.exists())
		}
		return filter(f.path, d), nil
	}
	return nil, fmt.Errorf("%w: unknown operator %d", ErrInvalidFilter, op)
}

func compileIn(x *query.In) (bson.D, error) {
	f, err := resolve(x.Field)
	if err != nil {
		return nil, err
	}
	if f.typ == query.Bool {
		// Bool has = and != only; IN of booleans is an OR of =.
		terms := make([]query.Expr, len(x.Values))
		for i, v := range x.Values {
			terms[i] = &query.Cmp{Field: x.Field, Op: query.Eq, Value: v}
		}
		return compileExpr(&query.Or{Terms: terms}, 0)
	}
	vals := bson.A{}
	for _, v := range x.Values {
		if err := checkValue(f, v); err != nil {
			return nil, err
		}
		if f.keywordBuiltin() && v.Str == "" {
			continue
		}
		if f.attr {
			if v.Type == query.Time {
				if _, exact := timeBound(f, v.Time, false); !exact {
					continue
				}
			}
			vals = append(vals, attrKey(f.name, v))
			continue
		}
		s, exact := scalar(f, v, false)
		if exact {
			vals = append(vals, s)
		}
	}
	if len(vals) == 0 {
		return matchNothing(), nil
	}
	if f.attr {
		return filter("ax", filter("$in", vals)), nil
	}
	return filter(f.path, filter("$in", vals)), nil
}

func compilePrefix(x *query.Prefix) (bson.D, error) {
	f, err := resolve(x.Field)
	if err != nil {
		return nil, err
	}
	if f.typ != query.Keyword && f.typ != query.KeywordList {
		return nil, fmt.Errorf("%w: STARTS_WITH on %s, a %s field", ErrInvalidFilter, f.name, f.typ)
	}
	if x.Prefix == "" {
		return compileExists(x.Field)
	}
	if f.typ == query.KeywordList {
		// A range on an array may be met by two different elements, so
		// a list takes an anchored regular expression of the literal
		// text, which one element must match.
		return filter(f.path, filter("$regex", "^"+regexp.QuoteMeta(x.Prefix))), nil
	}
	d := bson.D{{Key: "$gte", Value: x.Prefix}}
	if up, ok := provider.PrefixEnd(x.Prefix); ok {
		d = append(d, bson.E{Key: "$lt", Value: up})
	}
	return filter(f.path, d), nil
}

func compileExists(qf query.Field) (bson.D, error) {
	f, err := resolve(qf)
	if err != nil {
		return nil, err
	}
	return filter(f.path, bson.D{f.exists()}), nil
}

// instanceFilter is the filter of ListInstancesParams, Where included.
func instanceFilter(p *provider.ListInstancesParams) (bson.D, error) {
	f := filter("_id", filter("$gt", p.AfterID))
	add := func(k string, v any) { f = append(f, bson.E{Key: k, Value: v}) }
	if p.Status != "" {
		add("st", string(p.Status))
	}
	if p.Name != "" {
		add("n", p.Name)
	}
	if p.BusinessKey != "" {
		add("bk", p.BusinessKey)
	}
	created := bson.D{}
	if !p.CreatedFrom.IsZero() {
		created = append(created, bson.E{Key: "$gte", Value: provider.UnixNanos(p.CreatedFrom)})
	}
	if !p.CreatedTo.IsZero() {
		created = append(created, bson.E{Key: "$lt", Value: provider.UnixNanos(p.CreatedTo)})
	}
	if len(created) > 0 {
		add("ca", created)
	}
	if !p.UpdatedBefore.IsZero() {
		add("ua", filter("$lt", provider.UnixNanos(p.UpdatedBefore)))
	}
	if p.Terminal {
		add("$and", bson.A{filter("st", filter("$in", []string{string(provider.StatusCompleted), string(provider.StatusFailed), string(provider.StatusTerminated)}))})
	}
	if p.Where != nil {
		w, err := compileWhere(p.Where)
		if err != nil {
			return nil, err
		}
		if len(w) > 0 {
			add("$and", bson.A{w})
		}
	}
	return merged(f), nil
}

// merged joins the "$and" entries of f into one.
func merged(f bson.D) bson.D {
	out := make(bson.D, 0, len(f))
	var and bson.A
	for _, e := range f {
		if e.Key == "$and" {
			and = append(and, e.Value.(bson.A)...)
			continue
		}
		out = append(out, e)
	}
	if len(and) > 0 {
		out = append(out, bson.E{Key: "$and", Value: and})
	}
	return out
}

// groupKey is the document field CountInstances groups by.
func groupKey(by *query.Field) (field, error) {
	f, err := resolve(*by)
	if err != nil {
		return field{}, err
	}
	if f.typ == query.KeywordList {
		return field{}, fmt.Errorf("%w: cannot group by %s, a list", ErrInvalidFilter, f.name)
	}
	return f, nil
}

// groupValue reads a group's key back into a Value of the field's type;
// no value (missing, null, "" of a keyword built-in, a value stored with
// another type) is the zero Value. An empty keyword attribute is a value.
func groupValue(f field, raw bson.RawValue) query.Value {
	switch f.typ {
	case query.Keyword:
		if s, ok := raw.StringValueOK(); ok && (s != "" || f.attr) {
			return query.Value{Type: query.Keyword, Str: s}
		}
	case query.Int:
		if n, ok := raw.Int64OK(); ok {
			return query.Value{Type: query.Int, Int: n}
		}
	case query.Float:
		if x, ok := raw.DoubleOK(); ok {
			return query.Value{Type: query.Float, Float: x}
		}
	case query.Bool:
		if b, ok := raw.BooleanOK(); ok {
			return query.Value{Type: query.Bool, Bool: b}
		}
	case query.Time:
		if n, ok := raw.Int64OK(); ok {
			if f.nanos {
				if n != 0 {
					return query.Value{Type: query.Time, Time: provider.FromUnixNanos(n)}
				}
			} else {
				return query.Value{Type: query.Time, Time: time.UnixMicro(n).UTC()}
			}
		}
	}
	return query.Value{}
}

// indexedGroups are the fields with an index of their own: a count
// grouped by one of them sorts by it first, so that the server reads
// the index instead of the collection.
var indexedGroups = map[string]bool{"st": true, "n": true, "bk": true}

// countPipeline is the aggregation of CountInstances and the field it
// groups by: $match, a $sort by the field when it has an index of its own,
// nothing else narrows the match and sortFirst is set (so that MongoDB
// reads the index, not the collection), and $group.
func countPipeline(p *provider.CountInstancesParams, sortFirst bool) (bson.A, field, error) {
	where, err := compileWhere(p.Where)
	if err != nil {
		return nil, field{}, err
	}
	var key any
	var f field
	if p.By != nil {
		if f, err = groupKey(p.By); err != nil {
			return nil, field{}, err
		}
		key = "$" + f.path
	}
	pipeline := bson.A{filter("$match", where)}
	if sortFirst && p.By != nil && indexedGroups[f.path] && len(where) == 0 {
		pipeline = append(pipeline, filter("$sort", filter(f.path, 1)))
	}
	pipeline = append(pipeline, filter("$group", filter("_id", key, "c", filter("$sum", 1))))
	return pipeline, f, nil
}

// onFerretDB reports whether the server is FerretDB, asking it once: a
// count sorts before it groups only on MongoDB, since FerretDB 1.x
// uses no index and would sort every document in memory. A failed
// question counts as MongoDB (the sort costs, and changes no answer).
func (s *Store) onFerretDB(ctx context.Context) bool {
	s.ferretOnce.Do(func() {
		ferret, err := s.isFerretDB(ctx)
		s.ferret = err == nil && ferret
	})
	return s.ferret
}

// CountInstances implements provider.QueryStore: one aggregation,
// $match then $group (FerretDB 1.x has both), the groups merged and
// ordered here (the no-value group first, then by value).
func (s *Store) CountInstances(ctx context.Context, p *provider.CountInstancesParams) ([]provider.GroupCount, error) {
	pipeline, f, err := countPipeline(p, !s.onFerretDB(ctx))
	if err != nil {
		return nil, err
	}
	cur, err := s.c.instances.Aggregate(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("count instances: %w", translate(err))
	}
	var rows []struct {
		ID bson.RawValue `bson:"_id"`
		C  int64         `bson:"c"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, fmt.Errorf("count instances: %w", translate(err))
	}
	if p.By == nil {
		var n int64
		for _, r := range rows {
			n += r.C
		}
		return []provider.GroupCount{{Count: n}}, nil
	}
	var out []provider.GroupCount
	for _, r := range rows {
		v := groupValue(f, r.ID)
		i := slices.IndexFunc(out, func(g provider.GroupCount) bool {
			return query.Compare(g.Value, v) == 0 // the zero Value too: it is the group without one
		})
		if i >= 0 {
			out[i].Count += r.C
			continue
		}
		out = append(out, provider.GroupCount{Value: v, Count: r.C})
	}
	// query.Compare orders the zero Value (no value) first.
	slices.SortFunc(out, func(a, b provider.GroupCount) int { return query.Compare(a.Value, b.Value) })
	return out, nil
}

// maxCustomPage bounds the instances ListCustomProjections reads per
// step: it starts at the limit and doubles while instances without a
// record of the projection fill the pages.
const maxCustomPage = 1000

// ListCustomProjections implements provider.QueryStore in steps of two
// reads: the ids of a page of matching instances (after AfterID, in id
// order), then the projection's records of those instances by id. An
// instance without a record is skipped; steps go on until the limit is
// met or the instances run out, with pages growing, so the reads do not
// grow with the instances of a page.
func (s *Store) ListCustomProjections(ctx context.Context, p *provider.ListCustomProjectionsParams) ([]provider.CustomRecord, error) {
	limit := limitOf(p.Limit)
	page := limit
	after := p.AfterID
	var out []provider.CustomRecord
	for len(out) < limit {
		f, err := instanceFilter(&provider.ListInstancesParams{Where: p.Where, AfterID: after})
		if err != nil {
			return nil, err
		}
		cur, err := s.c.instances.Find(ctx, f, options.Find().SetSort(filter("_id", 1)).SetLimit(int64(page)).SetProjection(filter("_id", 1)))
		if err != nil {
			return nil, fmt.Errorf("custom projections %s: %w", p.Name, translate(err))
		}
		var ids []struct {
			ID string `bson:"_id"`
		}
		if err := cur.All(ctx, &ids); err != nil {
			return nil, fmt.Errorf("custom projections %s: %w", p.Name, translate(err))
		}
		if len(ids) == 0 {
			break
		}
		keys := make([]string, len(ids))
		for i, d := range ids {
			keys[i] = customID(p.Name, d.ID)
		}
		cur, err = s.c.custom.Find(ctx, filter("_id", filter("$in", keys)))
		if err != nil {
			return nil, fmt.Errorf("custom projections %s: %w", p.Name, translate(err))
		}
		var docs []customDoc
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("custom projections %s: %w", p.Name, translate(err))
		}
		byInstance := make(map[string]*customDoc, len(docs))
		for i := range docs {
			if docs[i].Name == p.Name {
				byInstance[docs[i].Instance] = &docs[i]
			}
		}
		for _, d := range ids {
			if c, ok := byInstance[d.ID]; ok && len(out) < limit {
				out = append(out, c.record())
			}
		}
		if len(ids) < page {
			break
		}
		after = ids[len(ids)-1].ID
		page = min(page*2, maxCustomPage)
	}
	return out, nil
}
