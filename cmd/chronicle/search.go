package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/internal/demodata"
	"github.com/chronicleflow/chronicle/query"
)

// searchAttributesEnv names the environment variable that declares search
// attributes when --search-attributes is not given.
const searchAttributesEnv = "CHRONICLE_SEARCH_ATTRIBUTES"

// builtinFields returns the names of the fields every instance has, as
// queries name them.
func builtinFields() []string {
	var names []string
	for _, f := range query.Builtins() {
		names = append(names, f.Name)
	}
	return names
}

// declarations returns the search attributes the tool knows: those of
// --search-attributes, else of CHRONICLE_SEARCH_ATTRIBUTES, and on the
// memory store the demo's own as well. It parses them once.
func (c *cli) declarations() (map[string]query.Type, error) {
	if c.decls != nil {
		return c.decls, nil
	}
	src, from := c.searchAttrs, "--search-attributes"
	if src == "" {
		src, from = os.Getenv(searchAttributesEnv), searchAttributesEnv
	}
	decls := map[string]query.Type{}
	if strings.TrimSpace(src) != "" {
		d, err := query.ParseDeclarations(src)
		if err != nil {
			return nil, usagef(nil, "invalid %s %q: %v (write name:type,name:type)", from, src, err)
		}
		decls = d
	}
	if c.storeURL == "memory" {
		for name, t := range demodata.SearchAttributes() {
			if own, ok := decls[name]; ok && own != t {
				return nil, usagef(nil, "invalid %s: the demo data declares %s as %s, not %s", from, name, t.String(), own.String())
			}
			decls[name] = t
		}
	}
	c.decls = decls
	return decls, nil
}

// declaredList describes the declarations for a hint: "amount float,
// customer keyword", or "none".
func declaredList(decls map[string]query.Type) string {
	if len(decls) == 0 {
		return "none"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(decls)) {
		parts = append(parts, name+" "+decls[name].String())
	}
	return strings.Join(parts, ", ")
}

// queryHint is said after a query that does not parse.
func queryHint(decls map[string]query.Type) string {
	return "hint: the fields are " + strings.Join(builtinFields(), ", ") + "\n" +
		"      and the declared search attributes: " + declaredList(decls) + "\n" +
		"      (declare them with --search-attributes 'name:type,...' or " + searchAttributesEnv + ");\n" +
		"      strings take single quotes: status = 'running' AND amount > 100 (docs/search.md)"
}

// checkWhere parses a --where query against the declarations before the
// store is opened, so that a mistake is a usage error naming the
// problem.
func (c *cli) checkWhere(cmd *command, where string) error {
	if strings.TrimSpace(where) == "" {
		return nil
	}
	decls, err := c.declarations()
	if err != nil {
		return err
	}
	if _, err := query.Parse(where, query.SchemaOf(decls)); err != nil {
		return usagef(cmd, "invalid --where: %v\n%s", err, queryHint(decls))
	}
	return nil
}

// queryError turns the engine's refusal of a query (where, or the field
// to group by) into a usage error with the hint; other errors pass.
func (c *cli) queryError(cmd *command, where string, err error) error {
	if errors.Is(err, query.ErrInvalidQuery) || where != "" && errors.Is(err, chronicle.ErrInvalidArgument) {
		decls, _ := c.declarations()
		return usagef(cmd, "%v\n%s", err, queryHint(decls))
	}
	return err
}

// columnsFlag reads --columns: declared attribute names, checked.
func (c *cli) columns(cmd *command, names listFlag) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	decls, err := c.declarations()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := decls[name]; !ok {
			return nil, usagef(cmd, "invalid --columns: %q is not a declared search attribute (declared: %s); declare it with --search-attributes '%s:TYPE' or %s",
				name, declaredList(decls), name, searchAttributesEnv)
		}
	}
	return names, nil
}

// attrText formats an attribute's value for a table cell; "" when unset.
func attrText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return when(v)
	case []string:
		return strings.Join(v, ",")
	}
	return fmt.Sprint(v)
}

// attrJSON is a search attribute's value in JSON output:
// {"type":"float","value":1280}, times in RFC 3339 with nanoseconds in UTC.
type attrJSON struct {
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// toAttrsJSON renders an instance's attributes for JSON output; nil when
// it has none.
func toAttrsJSON(attrs map[string]any) map[string]attrJSON {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]attrJSON, len(attrs))
	for name, v := range attrs {
		switch v := v.(type) {
		case string:
			out[name] = attrJSON{"keyword", v}
		case int64:
			out[name] = attrJSON{"int", v}
		case float64:
			out[name] = attrJSON{"float", v}
		case bool:
			out[name] = attrJSON{"bool", v}
		case time.Time:
			out[name] = attrJSON{"time", v.UTC().Format(time.RFC3339Nano)}
		case []string:
			out[name] = attrJSON{"keyword_list", v}
		}
	}
	return out
}

// countJSON is instances count's JSON output.
type countJSON struct {
	By     string      `json:"by,omitempty"`
	Groups []groupJSON `json:"groups"`
	Total  int64       `json:"total"`
}

// groupJSON is one group of a count: value null for the instances without
// one (and for the single group of a count without --by).
type groupJSON struct {
	Value any   `json:"value"`
	Count int64 `json:"count"`
}

func runInstancesCount(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var f chronicle.CountFilter
	fs.StringVar(&f.By, "by", "", "group by this field: status, workflow, custom_status, business_key, version or a declared attribute")
	fs.StringVar(&f.Where, "where", "", "only instances matching this query, such as \"status = 'running' AND amount > 100\" (docs/search.md)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if err := c.checkWhere(cmd, f.Where); err != nil {
		return err
	}
	if f.By != "" {
		decls, err := c.declarations()
		if err != nil {
			return err
		}
		fld, err := query.ParseField(f.By, query.SchemaOf(decls))
		if err != nil {
			return usagef(cmd, "invalid --by: %v\n%s", err, queryHint(decls))
		}
		if fld.Type == query.KeywordList {
			return usagef(cmd, "invalid --by: %s is a keyword list, which cannot be grouped by", f.By)
		}
		f.By = fld.Name
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	groups, err := e.CountInstances(c.ctx, f)
	if err != nil {
		return c.queryError(cmd, f.Where+f.By, err)
	}
	var total int64
	for _, g := range groups {
		total += g.Count
	}
	if c.json {
		out := countJSON{By: f.By, Groups: []groupJSON{}, Total: total}
		for _, g := range groups {
			v := g.Value
			if t, ok := v.(time.Time); ok {
				v = t.UTC().Format(time.RFC3339Nano)
			}
			out.Groups = append(out.Groups, groupJSON{Value: v, Count: g.Count})
		}
		return c.printJSON(out)
	}
	if f.By == "" {
		c.printf("%d\n", total)
		return nil
	}
	rows := make([][]string, 0, len(groups)+1)
	for _, g := range groups {
		v := attrText(g.Value)
		if g.Value == nil {
			v = "(none)"
		}
		rows = append(rows, []string{v, strconv.FormatInt(g.Count, 10)})
	}
	rows = append(rows, []string{"total", strconv.FormatInt(total, 10)})
	table(c.stdout, "", []string{strings.ToUpper(f.By), "COUNT"}, rows)
	return nil
}
