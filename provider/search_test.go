package provider

import "testing"

func TestPrefixEnd(t *testing.T) {
	for p, want := range map[string]string{"ab": "ac", "a\U0010FFFF": "b", "\uD7FF": "\uE000", "\U0010FFFF": "", "": ""} {
		got, ok := PrefixEnd(p)
		if got != want || ok != (want != "") {
			t.Errorf("PrefixEnd(%q) = %q, %v; want %q", p, got, ok, want)
		}
	}
}
