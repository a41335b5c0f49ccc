package provider

import (
	"testing"
	"time"
)

func TestRateWindowCountsFromTheUnixEpoch(t *testing.T) {
	r := RateLimit{Key: "k", Activity: "a", Tokens: 1, Interval: 7 * time.Second}
	now := time.Date(2026, 11, 26, 9, 0, 3, 500, time.UTC)
	got := r.Window(now)
	if got.Unix()%7 != 0 || got.After(now) || now.Sub(got) >= 7*time.Second {
		t.Fatalf("window of %s is %s, want a multiple of 7s since the epoch at most 7s before", now, got)
	}
	if got.Location() != time.UTC {
		t.Fatalf("window in %s", got.Location())
	}
}
