package console

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle/internal/timeline"
)

// pageNames are the templates of templates/ that render a whole page;
// the others (layout.html, parts.html) are shared by every page.
var pageNames = []string{"instances", "instance", "deadletters", "tasks", "task", "schedules", "schedule", "batches", "batch", "waiting", "error"}

// parseTemplates parses each page with the shared templates.
func (c *console) parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"path":        c.path,
		"instanceURL": c.instanceURL,
		"taskURL":     c.taskURL,
		"scheduleURL": c.scheduleURL,
		"batchURL":    c.batchURL,
		"waitingURL":  c.waitingURL,
		"atURL": func(id string, seq int64) string {
			return c.link("/instance", url.Values{"id": {id}, "seq": {strconv.FormatInt(seq, 10)}}) + "#projections"
		},
		"deadLettersURL": func(instanceID string) string {
			return c.link("/deadletters", url.Values{"instance": {instanceID}})
		},
		"tasksURL": func(instanceID string) string {
			return c.link("/tasks", url.Values{"instance": {instanceID}, "status": {"any"}})
		},
		"when":   when,
		"attr":   attrText,
		"short":  func(n int, s string) string { return timeline.Shorten(timeline.Clean(s), n) },
		"join":   strings.Join,
		"plural": plural,
		"actionURL": func(action string) string {
			return c.path("/actions/" + action)
		},
		"form": func(l layout, action, id, label, class string) actionForm {
			return actionForm{L: l, Action: action, ID: id, Label: label, Class: class}
		},
		"letters": func(l layout, rows []letterRow) lettersTable {
			return lettersTable{L: l, Rows: rows}
		},
	}
	shared, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := shared.Clone()
		if err != nil {
			return nil, err
		}
		if pages[name], err = t.ParseFS(templateFiles, "templates/"+name+".html"); err != nil {
			return nil, err
		}
	}
	return pages, nil
}

// when renders a time in UTC, "-" when unset.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeline.TimeFormat)
}

// layout is what every page template gets: the page's own data in Data,
// and what the layout and the action forms need.
type layout struct {
	Title string
	// Nav names the menu entry to highlight.
	Nav string
	// CSRF is the token the action forms carry.
	CSRF string
	// Actions says whether actions are enabled; their buttons are
	// disabled otherwise.
	Actions bool
	// Actor is the acting user, when actions are enabled and the hook
	// names one for this request.
	Actor string
	// Notice is what the last action did.
	Notice string
	// Return is this page's URL, where an action sends the browser back.
	Return string
	// Status is the HTTP status of the page.
	Status int
	Data   any
}

// actionForm is what the "action", "hidden" and "submit" templates need:
// the page's layout (for the CSRF token and the return path), the action
// and its id, and the button.
type actionForm struct {
	L                        layout
	Action, ID, Label, Class string
}

// lettersTable is what the "letters" template needs.
type lettersTable struct {
	L    layout
	Rows []letterRow
}

// render writes a page with status code.
func (c *console) render(w http.ResponseWriter, r *http.Request, code int, name, title, nav string, data any) {
	l := layout{Title: title, Nav: nav, Actions: c.opts.Actions, Status: code, Data: data,
		CSRF: c.token(w, r), Notice: c.takeNotice(w, r), Return: c.base + r.URL.RequestURI()}
	if c.opts.Actions {
		if u, err := c.opts.User(r); err == nil {
			l.Actor = u.ID
		}
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", l); err != nil {
		c.log.ErrorContext(r.Context(), "console: render failed", slog.String("page", name), slog.Any("error", err))
		http.Error(w, "the console could not render this page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with the error page.
func (c *console) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	c.render(w, r, code, "error", http.StatusText(code), "", msg)
}

// Cookies of the console.
const (
	csrfCookie   = "chronicle_console_csrf"
	noticeCookie = "chronicle_console_notice"
	// csrfField is the form field that echoes the CSRF cookie.
	csrfField = "csrf"
)

// cookiePath scopes the console's cookies to its pages.
func (c *console) cookiePath() string { return c.base + "/" }

// token returns the CSRF token of the browser session, setting a new one
// in a cookie when the request has none.
func (c *console) token(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && validToken(ck.Value) {
		return ck.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: c.cookiePath(),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return tok
}

// validToken reports whether s has the form of a token.
func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}

// checkCSRF reports whether a POST carries the token of its cookie.
func checkCSRF(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || !validToken(ck.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue(csrfField))) == 1
}

// setNotice keeps msg for the next page the browser shows.
func (c *console) setNotice(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, &http.Cookie{Name: noticeCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(timeline.Shorten(msg, 300))),
		Path: c.cookiePath(), MaxAge: 60, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// takeNotice returns the notice an action left, and clears it.
func (c *console) takeNotice(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(noticeCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: noticeCookie, Path: c.cookiePath(), MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return ""
	}
	return timeline.Clean(string(b))
}

// returnPath is where an action sends the browser: the page the form
// names if it is one of the console's, else fallback.
func (c *console) returnPath(r *http.Request, fallback string) string {
	ret := r.PostFormValue("return")
	u, err := url.Parse(ret)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(ret, "//") ||
		strings.ContainsAny(ret, "\\\r\n") || !strings.HasPrefix(u.Path, c.base+"/") {
		return fallback
	}
	return ret
}

// plural renders n things: "1 event", "3 events", "2 activities".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	if stem, ok := strings.CutSuffix(one, "y"); ok && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "e") {
		return fmt.Sprintf("%d %sies", n, stem)
	}
	return fmt.Sprintf("%d %ss", n, one)
}
