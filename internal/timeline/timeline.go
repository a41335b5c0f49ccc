package timeline

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/chronicleflow/chronicle/history"
)

// TimeFormat is the layout of the time column; times are shown in UTC.
const TimeFormat = "2006-01-02 15:04:05"

// Options configure [Write]. The zero value is ready to use.
type Options struct {
	// Decode renders user payloads. Default: [DecodeMsgpack], which suits
	// the engine's default codec; pass [DecodeJSON] for the JSON codec.
	Decode func([]byte) string
	// Prefix starts every line, to indent the table. Default: none.
	Prefix string
	// NoHeader leaves out the header row.
	NoHeader bool
}

// header names the columns.
var header = []string{"SEQ", "TIME (UTC)", "KIND", "ACTOR", "DETAIL"}

// Write writes events to w as a table with aligned columns: seq, time
// (UTC), kind, actor and [Detail]. It returns the first error of w.
func Write(w io.Writer, events []history.Event, opts Options) error {
	rows := make([][]string, 0, len(events)+1)
	if !opts.NoHeader {
		rows = append(rows, header)
	}
	for i := range events {
		e := &events[i]
		rows = append(rows, []string{
			strconv.FormatInt(e.Seq, 10),
			formatTime(e),
			Shorten(Clean(string(e.Kind)), 40),
			Shorten(Clean(e.Actor), 60),
			Detail(e, opts.Decode),
		})
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for c, cell := range row {
			widths[c] = max(widths[c], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		b.WriteString(opts.Prefix)
		last := len(row) - 1
		for last > 0 && row[last] == "" {
			last-- // no padding after the last non-empty cell
		}
		for c := 0; c <= last; c++ {
			b.WriteString(row[c])
			if c < last {
				b.WriteString(strings.Repeat(" ", widths[c]-utf8.RuneCountInString(row[c])+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatTime(e *history.Event) string {
	if e.At.IsZero() {
		return "-"
	}
	return e.At.UTC().Format(TimeFormat)
}

// Clean makes s safe for one table cell: invalid UTF-8 is replaced and
// control characters (newlines, tabs) become spaces, so a stored string
// cannot break the layout.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// Shorten cuts s to at most n runes, ending with "…" when it cut.
func Shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}
