package query

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SyntaxError is the error of [Parse] and [ParseField]: what is wrong and
// where. It wraps ErrInvalidQuery.
type SyntaxError struct {
	// Pos is the byte offset in the query text where the problem is, from 0.
	Pos int
	// Msg says what is wrong or what was expected.
	Msg string
}

// Error returns "query: invalid query at position N: Msg".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v at position %d: %s", ErrInvalidQuery, e.Pos, e.Msg)
}

// Unwrap returns ErrInvalidQuery.
func (e *SyntaxError) Unwrap() error { return ErrInvalidQuery }

// Parse parses a filter. Built-in field names are case-insensitive; any
// other name must be declared in schema. An empty or blank src returns a
// nil Expr, which matches everything.
//
// Every error is a [*SyntaxError] wrapping ErrInvalidQuery. A text longer
// than MaxLength bytes or not valid UTF-8 is refused before it is read.
func Parse(src string, schema Schema) (Expr, error) {
	if len(src) > MaxLength {
		return nil, &SyntaxError{Pos: MaxLength, Msg: fmt.Sprintf("the query is %d bytes long (at most %d)", len(src), MaxLength)}
	}
	if !utf8.ValidString(src) {
		pos := 0
		for pos < len(src) {
			r, size := utf8.DecodeRuneInString(src[pos:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			pos += size
		}
		return nil, &SyntaxError{Pos: pos, Msg: "the query is not valid UTF-8"}
	}
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	p := &parser{lx: lexer{src: src}, schema: schema}
	if err := p.next(); err != nil {
		return nil, err
	}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errorf(p.tok.pos, "unexpected %s: want AND, OR or the end of the query", p.tok)
	}
	return e, nil
}

// ParseField resolves a field name (for a group-by) as Parse does: a
// built-in name in any case, or a name declared in schema. The error is
// a [*SyntaxError] wrapping ErrInvalidQuery.
func ParseField(name string, schema Schema) (Field, error) {
	n := strings.TrimSpace(name)
	if n == "" {
		return Field{}, &SyntaxError{Pos: 0, Msg: "want a field name"}
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(isLetter(c) || c == '_' || (i > 0 && isDigit(c))) {
			return Field{}, &SyntaxError{Pos: i, Msg: fmt.Sprintf("%q is not a field name", n)}
		}
	}
	return resolve(n, 0, schema)
}

// resolve finds the field of a name.
func resolve(name string, pos int, schema Schema) (Field, error) {
	if f, ok := LookupBuiltin(name); ok {
		return f, nil
	}
	if schema != nil {
		if t, ok := schema(name); ok && t != Invalid && t <= KeywordList {
			return Field{Name: name, Builtin: Attribute, Type: t}, nil
		}
	}
	return Field{}, &SyntaxError{Pos: pos, Msg: fmt.Sprintf("unknown field %q (declare it as a search attribute)", name)}
}

// Statuses are the values of the status field.
var statuses = []string{"running", "suspended", "completed", "failed", "terminated"}

// tokKind is the kind of a token.
type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // a name or a keyword of the language
	tString         // 'text'
	tNumber         // -12, 1.5e3
	tLParen
	tRParen
	tComma
	tOp // = != <> < <= > >=
)

// token is one token; text is the name, the unquoted string, the number
// or the operator.
type token struct {
	kind tokKind
	pos  int
	text string
}

// String describes a token for an error message.
func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of query"
	case tIdent:
		return fmt.Sprintf("%q", t.text)
	case tString:
		return "string " + quote(abbrev(t.text))
	case tNumber:
		return "number " + t.text
	case tLParen:
		return `"("`
	case tRParen:
		return `")"`
	case tComma:
		return `","`
	}
	return fmt.Sprintf("%q", t.text)
}

// abbrev shortens a literal quoted in an error message.
func abbrev(s string) string {
	if len(s) <= 40 {
		return s
	}
	i := 40
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// is reports whether the token is the keyword kw (upper case).
func (t token) is(kw string) bool { return t.kind == tIdent && strings.EqualFold(t.text, kw) }

// lexer reads tokens from src.
type lexer struct {
	src string
	pos int
}

// next reads the next token.
func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		switch l.src[l.pos] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			l.pos++
			continue
		}
		break
	}
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.src[start]
	switch {
	case c == '(':
		l.pos++
		return token{kind: tLParen, pos: start, text: "("}, nil
	case c == ')':
		l.pos++
		return token{kind: tRParen, pos: start, text: ")"}, nil
	case c == ',':
		l.pos++
		return token{kind: tComma, pos: start, text: ","}, nil
	case c == '=':
		l.pos++
		return token{kind: tOp, pos: start, text: "="}, nil
	case c == '!':
		if strings.HasPrefix(l.src[start:], "!=") {
			l.pos += 2
			return token{kind: tOp, pos: start, text: "!="}, nil
		}
		return token{}, &SyntaxError{Pos: start, Msg: `unexpected "!": want "!="`}
	case c == '<':
		for _, op := range []string{"<=", "<>"} {
			if strings.HasPrefix(l.src[start:], op) {
				l.pos += 2
				return token{kind: tOp, pos: start, text: op}, nil
			}
		}
		l.pos++
		return token{kind: tOp, pos: start, text: "<"}, nil
	case c == '>':
		if strings.HasPrefix(l.src[start:], ">=") {
			l.pos += 2
			return token{kind: tOp, pos: start, text: ">="}, nil
		}
		l.pos++
		return token{kind: tOp, pos: start, text: ">"}, nil
	case c == '\'':
		return l.str()
	case c == '-' || isDigit(c):
		return l.number()
	case isLetter(c) || c == '_':
		for l.pos < len(l.src) && (isLetter(l.src[l.pos]) || isDigit(l.src[l.pos]) || l.src[l.pos] == '_') {
			l.pos++
		}
		return token{kind: tIdent, pos: start, text: l.src[start:l.pos]}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	return token{}, &SyntaxError{Pos: start, Msg: fmt.Sprintf("unexpected character %q", r)}
}

// str reads a string literal; a quote inside is doubled.
func (l *lexer) str() (token, error) {
	start := l.pos
	l.pos++
	var b strings.Builder
	for {
		i := strings.IndexByte(l.src[l.pos:], '\'')
		if i < 0 {
			return token{}, &SyntaxError{Pos: start, Msg: "unterminated string: want a closing quote (')"}
		}
		b.WriteString(l.src[l.pos : l.pos+i])
		l.pos += i + 1
		if l.pos < len(l.src) && l.src[l.pos] == '\'' {
			b.WriteByte('\'')
			l.pos++
			continue
		}
		return token{kind: tString, pos: start, text: b.String()}, nil
	}
}

// number reads -?digits[.digits][(e|E)[+-]digits].
func (l *lexer) number() (token, error) {
	start := l.pos
	digits := func() int {
		n := 0
		for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
			l.pos++
			n++
		}
		return n
	}
	bad := func() (token, error) {
		for l.pos < len(l.src) && (isLetter(l.src[l.pos]) || isDigit(l.src[l.pos]) || strings.IndexByte("._+-", l.src[l.pos]) >= 0) {
			l.pos++
		}
		return token{}, &SyntaxError{Pos: start, Msg: fmt.Sprintf("malformed number %q", abbrev(l.src[start:l.pos]))}
	}
	if l.src[l.pos] == '-' {
		l.pos++
	}
	if digits() == 0 {
		return bad()
	}
	if l.pos < len(l.src) && l.src[l.pos] == '.' {
		l.pos++
		if digits() == 0 {
			return bad()
		}
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		l.pos++
		if l.pos < len(l.src) && (l.src[l.pos] == '+' || l.src[l.pos] == '-') {
			l.pos++
		}
		if digits() == 0 {
			return bad()
		}
	}
	if l.pos < len(l.src) && (isLetter(l.src[l.pos]) || l.src[l.pos] == '_' || l.src[l.pos] == '.') {
		return bad()
	}
	return token{kind: tNumber, pos: start, text: l.src[start:l.pos]}, nil
}

// parser is a recursive-descent parser over the lexer's tokens. Its
// recursion goes through '(' and NOT only, each bounded by MaxDepth.
type parser struct {
	lx     lexer
	tok    token
	schema Schema
	depth  int
	terms  int
}

func (p *parser) next() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// enter counts one more level of nesting at pos.
func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf(pos, "the query nests more than %d levels of parentheses and NOT", MaxDepth)
	}
	return nil
}

// addTerms counts n more terms at pos.
func (p *parser) addTerms(pos, n int) error {
	p.terms += n
	if p.terms > MaxTerms {
		return p.errorf(pos, "the query has more than %d terms", MaxTerms)
	}
	return nil
}

// or := and ( OR and )*
func (p *parser) or() (Expr, error) {
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	if !p.tok.is("OR") {
		return first, nil
	}
	terms := flatten(nil, first, false)
	for p.tok.is("OR") {
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := p.and()
		if err != nil {
			return nil, err
		}
		terms = flatten(terms, e, false)
	}
	return &Or{Terms: terms}, nil
}

// and := unary ( AND unary )*
func (p *parser) and() (Expr, error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	if !p.tok.is("AND") {
		return first, nil
	}
	terms := flatten(nil, first, true)
	for p.tok.is("AND") {
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		terms = flatten(terms, e, true)
	}
	return &And{Terms: terms}, nil
}

// flatten appends e to terms, or e's own terms when e is an And (and is
// true) or an Or (and is false).
func flatten(terms []Expr, e Expr, and bool) []Expr {
	switch x := e.(type) {
	case *And:
		if and {
			return append(terms, x.Terms...)
		}
	case *Or:
		if !and {
			return append(terms, x.Terms...)
		}
	}
	return append(terms, e)
}

// unary := NOT unary | '(' expr ')' | term
func (p *parser) unary() (Expr, error) {
	switch {
	case p.tok.is("NOT"):
		if err := p.enter(p.tok.pos); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		p.depth--
		return &Not{X: x}, nil
	case p.tok.kind == tLParen:
		open := p.tok.pos
		if err := p.enter(open); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errorf(p.tok.pos, "unexpected %s: want \")\" to close the \"(\" at position %d", p.tok, open)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		p.depth--
		return e, nil
	}
	return p.term()
}

// term reads a field and what is tested of it.
func (p *parser) term() (Expr, error) {
	if p.tok.kind != tIdent || isKeyword(p.tok.text) {
		return nil, p.errorf(p.tok.pos, "unexpected %s: want a field name, NOT or \"(\"", p.tok)
	}
	start := p.tok.pos
	f, err := resolve(p.tok.text, start, p.schema)
	if err != nil {
		return nil, err
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	opPos := p.tok.pos
	switch {
	case p.tok.kind == tOp:
		op := ops[p.tok.text]
		if err := allowed(f, opPos, "operator "+p.tok.text, op); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		v, err := p.literal(f)
		if err != nil {
			return nil, err
		}
		if err := p.addTerms(start, 1); err != nil {
			return nil, err
		}
		return &Cmp{Field: f, Op: op, Value: v}, nil
	case p.tok.is("NOT"):
		if err := p.next(); err != nil {
			return nil, err
		}
		var e Expr
		switch {
		case p.tok.is("IN"):
			e, err = p.in(f, start)
		case p.tok.is("BETWEEN"):
			e, err = p.between(f, start)
		default:
			return nil, p.errorf(p.tok.pos, "unexpected %s after NOT: want IN or BETWEEN", p.tok)
		}
		if err != nil {
			return nil, err
		}
		return &Not{X: e}, nil
	case p.tok.is("IN"):
		return p.in(f, start)
	case p.tok.is("BETWEEN"):
		return p.between(f, start)
	case p.tok.is("STARTS_WITH"):
		if f.Type != Keyword && f.Type != KeywordList {
			return nil, p.errorf(opPos, "STARTS_WITH does not apply to %s, %s field", f.Name, article(f.Type))
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind != tString {
			return nil, p.errorf(p.tok.pos, "unexpected %s: want a string after STARTS_WITH", p.tok)
		}
		if err := checkKeyword(p.tok.text); err != nil {
			return nil, p.errorf(p.tok.pos, "%v", err)
		}
		prefix := p.tok.text
		if err := p.next(); err != nil {
			return nil, err
		}
		if err := p.addTerms(start, 1); err != nil {
			return nil, err
		}
		return &Prefix{Field: f, Prefix: prefix}, nil
	case p.tok.is("IS"):
		if err := p.next(); err != nil {
			return nil, err
		}
		not := false
		if p.tok.is("NOT") {
			not = true
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		if !p.tok.is("NULL") {
			return nil, p.errorf(p.tok.pos, "unexpected %s: want NULL after IS", p.tok)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		if err := p.addTerms(start, 1); err != nil {
			return nil, err
		}
		if not {
			return &Exists{Field: f}, nil
		}
		return &Not{X: &Exists{Field: f}}, nil
	}
	return nil, p.errorf(p.tok.pos, "unexpected %s after %s: want an operator (=, !=, <>, <, <=, >, >=), IN, NOT IN, BETWEEN, STARTS_WITH or IS", p.tok, f.Name)
}

// in reads IN '(' literal {',' literal} ')' (the current token is IN).
func (p *parser) in(f Field, start int) (Expr, error) {
	if err := allowed(f, p.tok.pos, "IN", 0); err != nil {
		return nil, err
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLParen {
		return nil, p.errorf(p.tok.pos, "unexpected %s: want \"(\" after IN", p.tok)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	var values []Value
	for {
		if len(values) == MaxInValues {
			return nil, p.errorf(p.tok.pos, "an IN list of more than %d values", MaxInValues)
		}
		v, err := p.literal(f)
		if err != nil {
			return nil, err
		}
		values = append(values, v)
		switch p.tok.kind {
		case tComma:
			if err := p.next(); err != nil {
				return nil, err
			}
			continue
		case tRParen:
		default:
			return nil, p.errorf(p.tok.pos, "unexpected %s in the IN list: want \",\" or \")\"", p.tok)
		}
		break
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if err := p.addTerms(start, 1); err != nil {
		return nil, err
	}
	return &In{Field: f, Values: values}, nil
}

// between reads BETWEEN literal AND literal (the current token is BETWEEN).
func (p *parser) between(f Field, start int) (Expr, error) {
	if err := allowed(f, p.tok.pos, "BETWEEN", Ge); err != nil {
		return nil, err
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	lo, err := p.literal(f)
	if err != nil {
		return nil, err
	}
	if !p.tok.is("AND") {
		return nil, p.errorf(p.tok.pos, "unexpected %s: want AND between the bounds of BETWEEN", p.tok)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	hi, err := p.literal(f)
	if err != nil {
		return nil, err
	}
	if err := p.addTerms(start, 2); err != nil {
		return nil, err
	}
	return &And{Terms: []Expr{&Cmp{Field: f, Op: Ge, Value: lo}, &Cmp{Field: f, Op: Le, Value: hi}}}, nil
}

var ops = map[string]Op{"=": Eq, "!=": Ne, "<>": Ne, "<": Lt, "<=": Le, ">": Gt, ">=": Ge}

var opText = [...]string{Eq: "=", Ne: "!=", Lt: "<", Le: "<=", Gt: ">", Ge: ">="}

// String returns the operator as the language spells it.
func (o Op) String() string {
	if o >= Eq && o <= Ge {
		return opText[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// allowed checks that an operator applies to a field's type: Bool takes
// = and != only; KeywordList =, != and IN. op is 0 for IN; Ge for BETWEEN.
func allowed(f Field, pos int, what string, op Op) error {
	switch f.Type {
	case Bool:
		if op == Eq || op == Ne {
			return nil
		}
	case KeywordList:
		if op == Eq || op == Ne || op == 0 {
			return nil
		}
	default:
		return nil
	}
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf("%s does not apply to %s, %s field", what, f.Name, article(f.Type))}
}

// literal reads a literal of the field's type (an element's type for a
// KeywordList).
func (p *parser) literal(f Field) (Value, error) {
	t := p.tok
	bad := func(want string) (Value, error) {
		return Value{}, p.errorf(t.pos, "unexpected %s: want %s for %s, %s field", t, want, f.Name, article(f.Type))
	}
	var v Value
	switch f.Type {
	case Keyword, KeywordList:
		if t.kind != tString {
			return bad("a string")
		}
		if err := checkKeyword(t.text); err != nil {
			return Value{}, p.errorf(t.pos, "%v", err)
		}
		if f.Builtin == FieldStatus && !isStatus(t.text) {
			return Value{}, p.errorf(t.pos, "unknown status %s: want one of %s", quote(abbrev(t.text)), strings.Join(statuses, ", "))
		}
		v = Value{Type: Keyword, Str: t.text}
	case Int:
		if t.kind != tNumber {
			return bad("an integer")
		}
		if strings.ContainsAny(t.text, ".eE") {
			return bad("an integer")
		}
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return Value{}, p.errorf(t.pos, "integer %s out of range", t.text)
		}
		v = Value{Type: Int, Int: n}
	case Float:
		if t.kind != tNumber {
			return bad("a number")
		}
		x, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(x, 0) {
			return Value{}, p.errorf(t.pos, "number %s out of range", abbrev(t.text))
		}
		v = Value{Type: Float, Float: x}
	case Bool:
		switch {
		case t.is("TRUE"):
			v = Value{Type: Bool, Bool: true}
		case t.is("FALSE"):
			v = Value{Type: Bool, Bool: false}
		default:
			return bad("true or false")
		}
	case Time:
		if t.kind != tString {
			return bad("a time ('2006-01-02' or RFC 3339)")
		}
		tm, err := parseTime(t.text)
		if err != nil {
			return Value{}, p.errorf(t.pos, "%s is not a time: want RFC 3339 ('2006-01-02T15:04:05Z') or '2006-01-02'", quote(abbrev(t.text)))
		}
		v = Value{Type: Time, Time: tm}
	default:
		return Value{}, p.errorf(t.pos, "field %s has no valid type", f.Name)
	}
	if err := p.next(); err != nil {
		return Value{}, err
	}
	return v, nil
}

// parseTime reads RFC 3339 or a date (midnight UTC), in UTC truncated to
// the microsecond as values are.
func parseTime(s string) (time.Time, error) {
	layout := time.RFC3339Nano
	if len(s) == len("2006-01-02") {
		layout = time.DateOnly
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return time.Time{}, err
	}
	t = t.UTC().Truncate(time.Microsecond)
	if err := checkTime(t); err != nil {
		return time.Time{}, err
	}
	return t, nil
}

func isStatus(s string) bool {
	for _, st := range statuses {
		if s == st {
			return true
		}
	}
	return false
}

// isKeyword reports whether a name is a word of the language.
func isKeyword(s string) bool {
	for _, w := range reserved {
		if strings.EqualFold(s, w) {
			return true
		}
	}
	return false
}
