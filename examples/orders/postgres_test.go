package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle/provider/postgres/pgtest"
)

// cliDeclarations declares the demo's search attributes (searchAttributes)
// to the chronicle tool, which has no registrations of its own.
const cliDeclarations = "customer:keyword,amount:float,region:keyword,tracking:keyword"

// TestPostgresOrdersCLI runs the demo on PostgreSQL in a fresh schema, as
// `go run ./examples/orders -store URL -schema S` does, then finds its
// orders with the chronicle tool (instances list and instances count with
// the same queries as the demo) and in its console (chronicle ui, the
// instance list with ?q=), and checks that both find what the query API
// found.
//
// It is not parallel: the demo's windows are wall-clock seconds, and
// building the tool next to another test's demo could make an approval
// late.
func TestPostgresOrdersCLI(t *testing.T) {
	pgURL, schema := pgtest.URL(t), pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The demo, on the store main opens for -store URL -schema S.
	store, closeStore, err := openStore(ctx, pgURL, schema)
	require.NoError(t, err)
	var report bytes.Buffer
	res, err := demoOn(ctx, &report, store)
	closeStore()
	require.NoError(t, err, report.String())
	require.Equal(t, []string{"ORD-1002"}, res.Found, "the query API's big orders")
	require.Equal(t, map[string]int64{"settled": 2, "cancelled": 1, "expired": 1}, res.ByStatus, "the query API's counts")
	require.Contains(t, report.String(), "ORD-1002  settled   €1,299.00  uk  TRK-ORD-1002")

	// What the query API says of the orders it found, as the tool and the
	// console print them.
	type order struct{ custom, amount, customer string }
	want := map[string]order{}
	for _, in := range res.Listed {
		amount, ok := in.SearchAttributes["amount"].(float64)
		require.True(t, ok, "%s's amount %#v", in.ID, in.SearchAttributes["amount"])
		customer, _ := in.SearchAttributes["customer"].(string)
		want[in.ID] = order{custom: in.CustomStatusText, amount: strconv.FormatFloat(amount, 'f', -1, 64), customer: customer}
	}
	require.Equal(t, map[string]order{"ORD-1002": {custom: "settled", amount: "1299", customer: "C-1834"}}, want)

	bin := buildCLI(ctx, t)
	global := []string{"--store", pgURL, "--schema", schema, "--search-attributes", cliDeclarations}
	chronicleCLI := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(slices.Clone(global), args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "chronicle %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		return stdout.String()
	}
	const where = "amount >= 1000 AND custom_status IN ('shipped','settled')"

	// instances list, as a table with the custom status and the columns.
	out := chronicleCLI("instances", "list", "--where", where, "--columns", "amount,customer")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Equal(t, []string{"ID", "WORKFLOW", "STATUS", "CUSTOM", "STATUS", "BUSINESS", "KEY", "AMOUNT", "CUSTOMER"},
		strings.Fields(lines[0])[:9], "the header:\n%s", out)
	got := map[string]order{}
	for _, line := range lines[1:] {
		f := strings.Fields(line) // ID WORKFLOW STATUS CUSTOM-STATUS KEY AMOUNT CUSTOMER CREATED...
		require.GreaterOrEqual(t, len(f), 7, "row %q", line)
		require.Equal(t, []string{"order", "completed"}, f[1:3], "row %q", line)
		got[f[0]] = order{custom: f[3], amount: f[5], customer: f[6]}
	}
	require.Equal(t, want, got, "instances list:\n%s", out)

	// instances list --json: the same orders, the attributes typed.
	var listed []struct {
		ID               string `json:"id"`
		CustomStatusText string `json:"custom_status_text"`
		SearchAttributes map[string]struct {
			Type  string `json:"type"`
			Value any    `json:"value"`
		} `json:"search_attributes"`
	}
	out = chronicleCLI("--json", "instances", "list", "--where", where)
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	var ids []string
	for _, in := range listed {
		ids = append(ids, in.ID)
		require.Equal(t, want[in.ID].custom, in.CustomStatusText)
		require.Equal(t, "float", in.SearchAttributes["amount"].Type)
		require.Equal(t, res.Listed[len(ids)-1].SearchAttributes["amount"], in.SearchAttributes["amount"].Value)
		require.Equal(t, "TRK-"+in.ID, in.SearchAttributes["tracking"].Value)
	}
	require.Equal(t, res.Found, ids)

	// instances count --by custom_status, as a table and as JSON.
	out = chronicleCLI("instances", "count", "--by", "custom_status", "--where", "workflow = 'order'")
	counts := map[string]int64{}
	lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Equal(t, []string{"CUSTOM_STATUS", "COUNT"}, strings.Fields(lines[0]), out)
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		require.Len(t, f, 2, "row %q", line)
		n, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err)
		counts[f[0]] = n
	}
	require.Equal(t, int64(len(orders)), counts["total"], out)
	delete(counts, "total")
	require.Equal(t, res.ByStatus, counts, "instances count:\n%s", out)
	var counted struct {
		By     string `json:"by"`
		Groups []struct {
			Value string `json:"value"`
			Count int64  `json:"count"`
		} `json:"groups"`
		Total int64 `json:"total"`
	}
	out = chronicleCLI("--json", "instances", "count", "--by", "custom_status", "--where", "workflow = 'order'")
	require.NoError(t, json.Unmarshal([]byte(out), &counted), out)
	require.Equal(t, "custom_status", counted.By)
	require.Equal(t, int64(len(orders)), counted.Total)
	clear(counts)
	for _, g := range counted.Groups {
		counts[g.Value] = g.Count
	}
	require.Equal(t, res.ByStatus, counts, "instances count --json:\n%s", out)

	// The console: chronicle ui on the schema, its instance list with the
	// same query and the same columns.
	base := startConsole(t, bin, global)
	page := base + "/instances?" + url.Values{"q": {where}, "columns": {"amount,customer"}}.Encode()
	status, body := httpGet(t, page)
	require.Equal(t, http.StatusOK, status, body)
	rows := regexp.MustCompile(`(?s)<tr class="instance" data-id="([^"]*)">(.*?)</tr>`).FindAllStringSubmatch(body, -1)
	got = map[string]order{}
	cell := regexp.MustCompile(`<td class="(custom-status|attr)">([^<]*)</td>`)
	for _, row := range rows {
		var o order
		var attrs []string
		for _, c := range cell.FindAllStringSubmatch(row[2], -1) {
			if c[1] == "custom-status" {
				o.custom = c[2]
			} else {
				attrs = append(attrs, c[2])
			}
		}
		require.Len(t, attrs, 2, "the amount and customer cells of %s:\n%s", row[1], row[2])
		o.amount, o.customer = attrs[0], attrs[1]
		got[row[1]] = o
	}
	require.Equal(t, want, got, "the console's list for ?q=%s", where)
	require.Contains(t, body, `<th class="attr">amount</th><th class="attr">customer</th>`)
}

// buildCLI builds the chronicle tool of this module into a temporary
// directory and returns its path.
func buildCLI(ctx context.Context, t *testing.T) string {
	t.Helper()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(t.TempDir(), "chronicle")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/chronicle")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/chronicle:\n%s", out)
	return bin
}

// consoleLine is what chronicle ui prints once it listens.
var consoleLine = regexp.MustCompile(`^Chronicle console on (http://[^/ ]+)/ `)

// startConsole runs `chronicle <global> ui --listen 127.0.0.1:0` and
// returns the console's base URL once it listens; the console is
// interrupted, and must exit cleanly, when the test ends.
func startConsole(t *testing.T, bin string, global []string) string {
	t.Helper()
	cmd := exec.Command(bin, append(slices.Clone(global), "ui", "--listen", "127.0.0.1:0")...)
	var stderr bytes.Buffer
	stdout, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, &stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	var base string
	for base == "" && lines.Scan() {
		if m := consoleLine.FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		_ = cmd.Process.Kill() // it did not start serving: its output says why
		_ = cmd.Wait()
		_ = w.Close()
		t.Fatalf("chronicle ui did not say where it listens:\n%s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // drain, so that it never blocks writing
	t.Cleanup(func() {
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // it ignored its interrupt: fail, but leave no process behind
			<-exited
			t.Errorf("chronicle ui did not stop within 30s of its interrupt")
		}
		_ = w.Close() // ends the drain
		require.NoError(t, err, "chronicle ui after its interrupt:\n%s", stderr.String())
	})
	return base
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}
