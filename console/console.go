package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/chronicleflow/chronicle"
)

// Options configure the console. The zero value serves a read-only
// console at the root of its server.
type Options struct {
	// Actions enables the actions: redrive and discard dead letters,
	// terminate instances, claim, assign, reassign, release and complete
	// human tasks, pause, resume and trigger schedules, and pause, resume
	// and cancel batches. Off by default: the console is read-only, its
	// action buttons are disabled and every POST is answered 403
	// Forbidden.
	Actions bool
	// User returns the user acting with a request: the embedding
	// product's authenticated user. Its ID is recorded with every action
	// and its Roles decide which human tasks it may act on. Required when
	// Actions is set. An error refuses the action with 403 Forbidden. It
	// is also called for every page while actions are enabled, to show
	// who acts.
	User func(*http.Request) (chronicle.User, error)
	// BasePath is the path the console is mounted under, such as
	// "/ops/chronicle"; mount the handler at BasePath+"/". Default: the
	// root of the server.
	BasePath string
	// PageSize is how many rows a list shows at a time. Default 50; at
	// most 500.
	PageSize int
	// Logger receives a record of every action taken and of every error a
	// page met. Default: the engine's logger.
	Logger *slog.Logger
	// AllowedHosts are the names the console answers as: a request whose
	// Host header is none of them is refused with 421 Misdirected Request
	// before any page, file or action, so that a web page whose name was
	// rebound to the console's address (DNS rebinding) can neither read
	// the console, nor its CSRF token, nor act. An entry with a port,
	// "127.0.0.1:8080" or "[::1]:8080", matches that host and port; one
	// without, "ops.example.com", matches the host on any port. Names
	// match without regard to case. Default: every host, for a console
	// behind a proxy that checks the name itself; set it whenever the
	// console listens on an address a browser reaches directly.
	AllowedHosts []string
	// Keys, when set, are the public keys of the signed checkpoints: an
	// instance's chain badge then reports what they find (a history
	// rewritten after a checkpoint, deleted, or a broken checkpoint
	// chain), not only the plain hash chain, which a forger who reseals
	// every hash keeps intact. Each instance page then reads every
	// checkpoint.
	Keys *chronicle.Keyring
}

// ErrNoUserHook is returned by New when Options.Actions is set without
// Options.User: actions must be recorded with the user who takes them.
var ErrNoUserHook = errors.New("console: Options.Actions needs Options.User, the acting user of a request")

// maxPageSize bounds Options.PageSize.
const maxPageSize = 500

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// console is the handler New returns.
type console struct {
	engine *chronicle.Engine
	opts   Options
	base   string
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	origin *http.CrossOriginProtection
	hosts  []allowedHost
}

// New returns the console of engine as an http.Handler. It reads the
// store through the engine's client API and never runs workflows itself:
// the effect of an action shows once a running engine (this process's or
// any other on the same store) has applied it.
func New(engine *chronicle.Engine, opts Options) (http.Handler, error) {
	if engine == nil {
		return nil, errors.New("console: nil engine")
	}
	if opts.Actions && opts.User == nil {
		return nil, ErrNoUserHook
	}
	base := strings.TrimRight(opts.BasePath, "/")
	if base != "" {
		if !strings.HasPrefix(base, "/") || strings.ContainsAny(base, "?#") {
			return nil, fmt.Errorf("console: BasePath %q must be a path starting with /", opts.BasePath)
		}
		if u, err := url.Parse(base); err != nil || u.Path != base {
			return nil, fmt.Errorf("console: BasePath %q must be a plain path", opts.BasePath)
		}
	}
	hosts, err := parseHosts(opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.PageSize <= 0:
		opts.PageSize = 50
	case opts.PageSize > maxPageSize:
		opts.PageSize = maxPageSize
	}
	c := &console{engine: engine, opts: opts, base: base, log: opts.Logger, origin: http.NewCrossOriginProtection(), hosts: hosts}
	if c.log == nil {
		c.log = engine.Options().Logger
	}
	if c.pages, err = c.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, c.path("/instances"), http.StatusSeeOther)
	})
	mux.HandleFunc("GET /instances", c.instances)
	mux.HandleFunc("GET /instance", c.instance)
	mux.HandleFunc("GET /deadletters", c.deadLetters)
	mux.HandleFunc("GET /tasks", c.tasks)
	mux.HandleFunc("GET /task", c.task)
	mux.HandleFunc("GET /schedules", c.schedules)
	mux.HandleFunc("GET /schedule", c.schedule)
	mux.HandleFunc("GET /batches", c.batches)
	mux.HandleFunc("GET /batch", c.batch)
	mux.HandleFunc("GET /waiting", c.waiting)
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			c.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
			return
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("POST /actions/{action}", c.action)
	mux.HandleFunc("GET /actions/{action}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		c.fail(w, r, http.StatusMethodNotAllowed, "actions are taken with the forms of the console's pages")
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	c.mux = mux
	return c, nil
}

// contentSecurityPolicy allows what the console serves itself and no
// script at all, no inline style, no plugin, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'none'; object-src 'none'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP implements http.Handler.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !c.allowedHost(r.Host) {
		// Plain text, no page: a page carries the CSRF token.
		http.Error(w, fmt.Sprintf("Misdirected request: this console does not answer for host %q. "+
			"It answers only for the names it was started with (chronicle ui --host NAME, console.Options.AllowedHosts).", r.Host),
			http.StatusMisdirectedRequest)
		return
	}
	if c.base == "" {
		c.mux.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == c.base {
		http.Redirect(w, r, c.base+"/", http.StatusSeeOther)
		return
	}
	http.StripPrefix(c.base, c.mux).ServeHTTP(w, r)
}

// path returns the URL path of a console page: base + p.
func (c *console) path(p string) string { return c.base + p }

// link returns the URL of a console page with a query.
func (c *console) link(p string, q url.Values) string {
	if len(q) == 0 {
		return c.path(p)
	}
	return c.path(p) + "?" + q.Encode()
}

func (c *console) instanceURL(id string) string {
	return c.link("/instance", url.Values{"id": {id}})
}

func (c *console) taskURL(id string) string {
	return c.link("/task", url.Values{"id": {id}})
}

func (c *console) scheduleURL(id string) string {
	return c.link("/schedule", url.Values{"id": {id}})
}

func (c *console) batchURL(id string) string {
	return c.link("/batch", url.Values{"id": {id}})
}

// waitingURL links the waiting page of one concurrency key.
func (c *console) waitingURL(key string) string {
	return c.link("/waiting", url.Values{"key": {key}})
}

// status maps an error of the Engine's API to an HTTP status.
func status(err error) int {
	switch {
	case errors.Is(err, chronicle.ErrInvalidArgument), errors.Is(err, chronicle.ErrPayloadTooLarge):
		return http.StatusBadRequest
	case errors.Is(err, chronicle.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, chronicle.ErrInstanceNotFound), errors.Is(err, chronicle.ErrTaskNotFound),
		errors.Is(err, chronicle.ErrDeadLetterNotFound), errors.Is(err, chronicle.ErrScheduleNotFound),
		errors.Is(err, chronicle.ErrBatchNotFound), errors.Is(err, chronicle.ErrConcurrencyKeyNotFound):
		return http.StatusNotFound
	case errors.Is(err, chronicle.ErrInstanceNotRunning), errors.Is(err, chronicle.ErrTaskClosed),
		errors.Is(err, chronicle.ErrDeadLetterResolved):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// failErr answers with the error page for err, logging errors that are
// not the request's fault.
func (c *console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	code := status(err)
	if code == http.StatusInternalServerError {
		c.log.ErrorContext(r.Context(), "console: request failed", slog.String("path", r.URL.Path), slog.Any("error", err))
	}
	c.fail(w, r, code, err.Error())
}
