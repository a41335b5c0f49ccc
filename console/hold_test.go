package console_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
)

// TestHeldInstancePage: a held instance shows the hold as a badge and a
// field, and its HoldPlaced event; one without a hold shows neither.
func TestHeldInstancePage(t *testing.T) {
	t.Parallel()
	d := seed(t)
	b := newBrowser(t, newConsole(t, d.Engine, console.Options{}))
	p := b.get("/instance?id=CLM-1001")
	require.NotContains(t, p.body, `id="hold-badge"`)

	_, err := d.Engine.Hold(context.Background(), "CLM-1001", chronicle.HoldOptions{Reason: "coverage dispute", Actor: "counsel", Ticket: "LIT-7"})
	require.NoError(t, err)
	drain(t, d.Engine)
	p = b.get("/instance?id=CLM-1001")
	require.Equal(t, http.StatusOK, p.code)
	require.Contains(t, p.body, `<span class="status status-held" id="hold-badge" title="placed by user:counsel: coverage dispute">legal hold</span>`)
	require.Regexp(t, `id="hold">placed [^<]* by user:counsel: coverage dispute \(ticket LIT-7\)`, p.body)
	require.Contains(t, p.body, `HoldPlaced`)
	require.Contains(t, p.body, `&#34;reason&#34;: &#34;coverage dispute&#34;`)
	require.Contains(t, p.body, `legal hold placed`, "the timeline marks it")
}
