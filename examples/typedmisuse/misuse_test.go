package typedmisuse

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goTool returns the go command that runs the test.
func goTool(t *testing.T) string {
	t.Helper()
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("SKIPPED: no go command to build misuse.go with: %v", err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// wants returns the ERROR patterns of misuse.go by line.
func wants(t *testing.T) map[int]*regexp.Regexp {
	t.Helper()
	src, err := os.ReadFile("misuse.go")
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`// ERROR "(.*)"$`)
	out := map[int]*regexp.Regexp{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for line := 1; sc.Scan(); line++ {
		if m := marker.FindStringSubmatch(sc.Text()); m != nil {
			out[line] = regexp.MustCompile(m[1])
		}
	}
	return out
}

// TestMisuseDoesNotCompile builds misuse.go and checks that it fails with
// one error on every line marked ERROR, matching its pattern, and none
// elsewhere.
func TestMisuseDoesNotCompile(t *testing.T) {
	want := wants(t)
	if len(want) < 9 {
		t.Fatalf("misuse.go marks %d errors, want at least 9", len(want))
	}
	cmd := exec.Command(goTool(t), "build", "-gcflags=-e", "-o", os.DevNull, "misuse.go")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("misuse.go compiled:\n%s", out)
	}
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	at := regexp.MustCompile(`misuse\.go:(\d+):\d+: (.*)$`)
	got := map[int]string{}
	for _, l := range strings.Split(string(out), "\n") {
		m := at.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		line, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		got[line] = m[2]
	}
	for line, re := range want {
		msg, ok := got[line]
		switch {
		case !ok:
			t.Errorf("misuse.go:%d: no error reported, want one matching %q", line, re)
		case !re.MatchString(msg):
			t.Errorf("misuse.go:%d: error %q does not match %q", line, msg, re)
		}
	}
	for line, msg := range got {
		if _, ok := want[line]; !ok {
			t.Errorf("misuse.go:%d: unexpected error %q", line, msg)
		}
	}
	if t.Failed() {
		t.Logf("go build output:\n%s", out)
	}
}
