package query_test

import (
	"errors"
	"fmt"

	"github.com/chronicleflow/chronicle/query"
)

// record is a query.Record of attribute values.
type record map[string]query.Value

func (r record) Field(f query.Field) (query.Value, bool) {
	v, ok := r[f.Name]
	return v, ok && !v.IsZero()
}

func ExampleParse() {
	decls, err := query.ParseDeclarations("amount:float,customer:keyword,tags:keyword_list")
	if err != nil {
		panic(err)
	}
	schema := query.SchemaOf(decls)

	e, err := query.Parse(`customer = 'acme' AND amount BETWEEN 10 AND 100 AND NOT tags IN ('test')`, schema)
	if err != nil {
		panic(err)
	}
	fmt.Println(e)

	amount, _ := query.Of(query.Float, 42)
	customer, _ := query.Of(query.Keyword, "acme")
	fmt.Println(query.Match(e, record{"amount": amount, "customer": customer}))

	_, err = query.Parse(`total > 5`, schema)
	fmt.Println(err, errors.Is(err, query.ErrInvalidQuery))
	// Output:
	// customer = 'acme' AND amount >= 10 AND amount <= 100 AND tags NOT IN ('test')
	// true
	// query: invalid query at position 0: unknown field "total" (declare it as a search attribute) true
}
