package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// listFlag is a flag that may be repeated and takes comma-separated lists:
// --role adjuster --role supervisor, or --role adjuster,supervisor.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// timeFlag is a flag holding a time: RFC 3339 or a date (UTC midnight).
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			f.t = t.UTC()
			return nil
		}
	}
	return errors.New("want an RFC 3339 time (2026-11-22T09:00:00Z) or a date (2026-11-22)")
}

// ageFlag is a flag holding a positive duration; besides Go's units
// (90m, 36h) it takes days: 30d, 2555d.
type ageFlag struct{ d time.Duration }

func (f *ageFlag) String() string {
	if f == nil || f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f *ageFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, perr := strconv.ParseFloat(days, 64)
		err = perr
		d = time.Duration(n * float64(24*time.Hour))
	}
	if err != nil || d <= 0 {
		return errors.New("want a positive duration such as 36h or 30d")
	}
	f.d = d
	return nil
}

// choice checks that a flag's value is one of the allowed ones ("" means
// not given).
func choice(flagName, value string, allowed ...string) error {
	if value == "" || slices.Contains(allowed, value) {
		return nil
	}
	return fmt.Errorf("invalid value %q for flag --%s: want one of %s", value, flagName, strings.Join(allowed, ", "))
}
