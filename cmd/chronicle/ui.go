package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/console"
	"github.com/chronicleflow/chronicle/history"
)

// shutdownGrace bounds how long ui waits for requests in flight when it is
// interrupted.
const shutdownGrace = 5 * time.Second

func runUI(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var roles, hosts listFlag
	listen := fs.String("listen", "127.0.0.1:8080", "serve on this host:port; a loopback address unless --insecure-listen")
	insecure := fs.Bool("insecure-listen", false, "allow a --listen address other hosts can reach (the console has no login of its own)")
	actions := fs.Bool("actions", false, "enable actions: redrive and discard dead letters, terminate, suspend and resume instances, act on human tasks")
	userID := fs.String("user", "", "with --actions, the user recorded with every action (default: the OS user)")
	fs.Var(&roles, "roles", "with --actions, the roles of --user for human-task actions (R1,R2)")
	fs.Var(&hosts, "host", "also answer requests for this `NAME` (NAME or NAME:PORT; repeatable), such as the name of a proxy in front; "+
		"the console answers only for the names it listens as and these")
	var keyFiles listFlag
	fs.Var(&keyFiles, "key", "keyring `FILE` of public keys (\"KEYID BASE64-KEY\" lines; repeatable): chain badges report what the signed checkpoints find")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if err := checkListen(*listen, *insecure); err != nil {
		return usagef(cmd, "%v", err)
	}
	opts := console.Options{Actions: *actions, Logger: slog.New(slog.NewTextHandler(c.stderr, nil))}
	if len(keyFiles) > 0 {
		keys, err := chronicle.ReadKeyring(keyFiles...)
		if err != nil {
			return err
		}
		opts.Keys = keys
	}
	if *actions {
		id := *userID
		if id == "" {
			id = osUser()
		}
		if err := history.ValidateID("user", id); err != nil || id == "" {
			return usagef(cmd, "--actions needs --user: the OS user %q cannot be recorded", id)
		}
		acting := chronicle.User{ID: id, Roles: roles}
		opts.User = func(*http.Request) (chronicle.User, error) { return acting, nil }
		*userID = id
	} else if *userID != "" || len(roles) > 0 {
		return usagef(cmd, "--user and --roles act only with --actions")
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	opts.AllowedHosts = append(listenHosts(*listen, ln.Addr()), hosts...)
	h, err := console.New(e, opts)
	if err != nil {
		_ = ln.Close() // never served: nothing to lose
		return usagef(cmd, "invalid value for flag --host: %v", err)
	}
	mode := "read-only"
	if *actions {
		mode = "actions enabled, acting as " + *userID
	}
	store := "the memory store's demo data, with the engine running"
	if c.demo == nil {
		store = "store " + redactURL(c.storeURL) + "; the deployment's workers apply actions"
	}
	c.printf("Chronicle console on http://%s/ (%s; %s). Interrupt to stop.\n", ln.Addr(), mode, store)

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(quietLogger().Handler(), slog.LevelWarn)}
	ctx, stop := context.WithCancel(c.ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if c.demo != nil {
		// The memory store has no other worker: run the demo engine, so
		// that a redrive or a task action moves its instance on.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.demo.Run(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	if c.hooks.uiServing != nil {
		c.hooks.uiServing(ln.Addr().String(), e)
	}
	var served error
	select {
	case <-ctx.Done():
	case served = <-errs:
	}
	stop()
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	err = srv.Shutdown(shutdown)
	wg.Wait()
	return errors.Join(served, err)
}

// checkListen refuses an address other hosts can reach unless insecure
// allows it: the console has no login of its own.
func checkListen(addr string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid value %q for flag --listen: want host:port", addr)
	}
	if insecure || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %s can be reached from other hosts and the console has no login of its own: "+
		"listen on 127.0.0.1, or pass --insecure-listen behind an authenticating proxy", addr)
}

// listenHosts returns the Host header values a console listening on addr
// (the --listen value) at the address bound answers: the host it listens
// as with its port and, for a loopback or unspecified host, the loopback
// names (localhost, 127.0.0.1, [::1]) with the port. Any other name a
// browser may use, such as a proxy's, comes from --host; a request for
// any other name is refused, which defeats DNS rebinding.
func listenHosts(addr string, bound net.Addr) []string {
	host, _, _ := net.SplitHostPort(addr)
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	var out []string
	if host != "" && host != "localhost" && (ip == nil || !ip.IsUnspecified()) {
		out = append(out, net.JoinHostPort(host, port))
	}
	if host == "" || host == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		out = append(out, net.JoinHostPort("localhost", port), net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port))
	}
	return out
}

// redactURL hides the password of a store URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// osUser is the name of the user running the tool, "" when unknown.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}
