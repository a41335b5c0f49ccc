package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/query"
)

// uiRun is a run of chronicle ui in the background.
type uiRun struct {
	addr   string
	engine *chronicle.Engine
	stop   context.CancelFunc
	done   chan int
	stdout *bytes.Buffer
	stderr *bytes.Buffer
}

// startUI runs chronicle with args (ui and its flags, on 127.0.0.1:0) and
// returns once the console listens.
func startUI(t *testing.T, args ...string) *uiRun {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r := &uiRun{stop: stop, done: make(chan int, 1), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	serving := make(chan struct{})
	h := hooks{uiServing: func(addr string, e *chronicle.Engine) {
		r.addr, r.engine = addr, e
		close(serving)
	}}
	go func() { r.done <- runWith(ctx, args, r.stdout, r.stderr, h) }()
	select {
	case <-serving:
	case code := <-r.done:
		t.Fatalf("chronicle %v exited with %d before serving:\n%s%s", args, code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { r.close(t) })
	return r
}

// close interrupts the run and checks that it ended well; it returns its
// exit code.
func (r *uiRun) close(t *testing.T) int {
	r.stop()
	select {
	case code := <-r.done:
		r.done <- code
		require.Equal(t, exitOK, code, r.stderr.String())
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("chronicle ui did not stop within 30s of its interrupt")
	}
	return -1
}

// client is a browser-like HTTP client of the console: it keeps cookies.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	res, err := c.Get(u)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	res, err := c.PostForm(u, form)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

var (
	csrfField    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	letterRow    = regexp.MustCompile(`<tr class="letter" data-id="([^"]+)"`)
	instanceRows = regexp.MustCompile(`<tr class="instance" data-id="`)
)

// redrive redrives the first dead letter the console lists, as a person
// would: read the list page, post its form.
func redrive(t *testing.T, c *http.Client, base string) (int, string) {
	t.Helper()
	code, body := get(t, c, base+"/deadletters")
	require.Equal(t, http.StatusOK, code, body)
	tok, letter := csrfField.FindStringSubmatch(body), letterRow.FindStringSubmatch(body)
	require.NotNil(t, tok, body)
	require.NotNil(t, letter, body)
	return post(t, c, base+"/actions/redrive", url.Values{"csrf": {tok[1]}, "id": {letter[1]}})
}

// TestUI serves the demo data, redrives its dead letter in the console
// and sees the running engine complete the refund; a read-only console
// refuses the same.
func TestUI(t *testing.T) {
	t.Parallel()

	t.Run("Actions", func(t *testing.T) {
		t.Parallel()
		r := startUI(t, "ui", "--listen", "127.0.0.1:0", "--actions", "--user", "ops", "--roles", "adjuster")
		base := "http://" + r.addr
		c := client(t)
		code, body := get(t, c, base+"/")
		require.Equal(t, http.StatusOK, code)
		require.Len(t, instanceRows.FindAllString(body, -1), 8, "the demo's instances")
		require.Contains(t, body, "acting as <strong>ops</strong>")

		code, body = redrive(t, c, base)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "redriven by ops.")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		in, err := r.engine.Wait(ctx, "REF-4001")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusCompleted, in.Status, "the demo engine runs: the redriven refund completed")
		_, body = get(t, c, base+"/instance?id=REF-4001")
		require.Contains(t, body, `<span class="status status-completed">completed</span>`)

		r.close(t)
		require.Regexp(t, `^Chronicle console on http://127\.0\.0\.1:\d+/ \(actions enabled, acting as ops; the memory store's demo data`, r.stdout.String())
		require.Contains(t, r.stderr.String(), `msg="console: action taken" action=redrive`)
		require.Contains(t, r.stderr.String(), `user=ops`)
	})

	t.Run("Hosts", func(t *testing.T) {
		t.Parallel()
		r := startUI(t, "ui", "--listen", "127.0.0.1:0", "--actions", "--user", "ops", "--host", "ops.example", "--host", "console.example:8443")
		_, port, err := net.SplitHostPort(r.addr)
		require.NoError(t, err)
		c := client(t)
		as := func(host, path string) (int, string) {
			t.Helper()
			req, err := http.NewRequest(http.MethodGet, "http://"+r.addr+path, nil)
			require.NoError(t, err)
			req.Host = host
			res, err := c.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			return res.StatusCode, string(b)
		}
		// A page whose name was rebound to 127.0.0.1 reads nothing, and
		// no CSRF token in particular.
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.2:" + port, "console.example:" + port} {
			code, body := as(host, "/deadletters")
			require.Equal(t, http.StatusMisdirectedRequest, code, host)
			require.Contains(t, body, "does not answer for host")
			require.False(t, csrfField.MatchString(body), host)
		}
		for _, host := range []string{r.addr, "localhost:" + port, "[::1]:" + port, "ops.example", "console.example:8443"} {
			code, body := as(host, "/deadletters")
			require.Equal(t, http.StatusOK, code, host)
			require.True(t, csrfField.MatchString(body), host)
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		t.Parallel()
		r := startUI(t, "ui", "--listen", "127.0.0.1:0")
		c := client(t)
		code, body := redrive(t, c, "http://"+r.addr)
		require.Equal(t, http.StatusForbidden, code)
		require.Contains(t, body, "Actions are disabled")
		in, err := r.engine.Describe(context.Background(), "REF-4001")
		require.NoError(t, err)
		require.Equal(t, chronicle.StatusRunning, in.Status)
		require.NotEmpty(t, in.Incident)
		r.close(t)
		require.True(t, strings.HasPrefix(r.stdout.String(), "Chronicle console on http://127.0.0.1:"), r.stdout.String())
		require.Contains(t, r.stdout.String(), "(read-only;")
	})
}

// TestUISearch serves chronicle ui with a declaration of its own besides
// the demo's: the console's query box takes queries on both, and shows a
// query on an undeclared attribute as a problem of the page.
func TestUISearch(t *testing.T) {
	t.Parallel()
	r := startUI(t, "--search-attributes", "region:keyword", "ui", "--listen", "127.0.0.1:0")
	require.Equal(t, query.Keyword, r.engine.Options().SearchAttributes["region"])
	c := client(t)
	code, body := get(t, c, "http://"+r.addr+"/instances?q="+url.QueryEscape("amount < 100 OR region = 'eu'"))
	require.Equal(t, http.StatusOK, code, body)
	require.Regexp(t, `data-id="REF-4001"`, body)
	require.NotContains(t, body, `data-id="CLM-1001"`)
	code, body = get(t, c, "http://"+r.addr+"/instances?q="+url.QueryEscape("zone = 'eu'"))
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `unknown field &#34;zone&#34;`)
}
