package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/internal/timeline"
)

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printf writes to stdout. Here and in the other writers of the tool a
// write error is not checked where it happens: the stickyWriter behind
// c.stdout keeps it and runWith fails the run with it.
func (c *cli) printf(format string, args ...any) {
	fmt.Fprintf(c.stdout, format, args...)
}

// table writes rows under header with aligned columns, indented by
// prefix; cells are made safe for one line.
func table(w io.Writer, prefix string, header []string, rows [][]string) {
	all := append([][]string{header}, rows...)
	widths := make([]int, len(header))
	for _, row := range all {
		for i := range row {
			row[i] = timeline.Clean(row[i])
			widths[i] = max(widths[i], utf8.RuneCountInString(row[i]))
		}
	}
	var b strings.Builder
	for _, row := range all {
		last := len(row) - 1
		for last > 0 && row[last] == "" {
			last--
		}
		b.WriteString(prefix)
		for i := 0; i <= last; i++ {
			b.WriteString(row[i])
			if i < last {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(row[i])+2))
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// fields writes label/value pairs with aligned values; pairs whose value
// is empty are left out.
func fields(w io.Writer, pairs [][2]string) {
	width := 0
	for _, p := range pairs {
		if p[1] != "" {
			width = max(width, len(p[0]))
		}
	}
	for _, p := range pairs {
		if p[1] != "" {
			fmt.Fprintf(w, "%-*s  %s\n", width, p[0], timeline.Clean(p[1]))
		}
	}
}

// when formats a time for people: UTC, to the second, "-" when unset.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeline.TimeFormat)
}

// dash shows "-" for an empty string.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// payload is a user payload decoded with the engine's codec, for JSON
// output: the decoded value, or a description of bytes that do not decode.
func (c *cli) payload(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	var v any
	if err := c.engine.Decode(b, &v); err != nil {
		return timeline.Undecodable(b)
	}
	raw, err := marshalCompact(v)
	if err != nil {
		return timeline.Undecodable(b)
	}
	return json.RawMessage(raw)
}

// payloadText renders a user payload for people: compact JSON, "" when
// there is none.
func (c *cli) payloadText(b []byte) string {
	switch v := c.payload(b).(type) {
	case nil:
		return ""
	case json.RawMessage:
		return string(v)
	case string:
		return v
	}
	return ""
}

// decodedText renders a value decoded with the engine's codec as compact
// JSON.
func decodedText(v any) string {
	raw, err := marshalCompact(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
