package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/tlog"
)

// publishJSON is checkpoint publish's JSON output.
type publishJSON struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"`
	File   string `json:"file"`
	// Cosigned are the notes with each --witness's cosignature.
	Cosigned []string `json:"cosigned"`
}

// runCheckpointPublish publishes the note of the store's newest
// checkpoint to an append-only directory.
func runCheckpointPublish(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var dir string
	var witnesses listFlag
	fs.StringVar(&dir, "dir", "", "publish to this append-only `DIR` (one DIR/<size>.checkpoint a size; required)")
	fs.Var(&witnesses, "witness", "also have the witness at `URL` (its submission prefix; repeatable) cosign it, by C2SP tlog-witness")
	fs.StringVar(&c.origin, "origin", "", "the checkpoint log's `ORIGIN` line (default chronicle/ and the first checkpoint's hash)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if c.signKey == "" || dir == "" {
		return usagef(cmd, "--sign-key FILE and --dir DIR are required")
	}
	if c.origin != "" {
		if err := tlog.ValidateOrigin(c.origin); err != nil {
			return usagef(cmd, "%v", err)
		}
	}
	pub, err := chronicle.NewDirPublisher(dir)
	if err != nil {
		return err
	}
	c.publishers = []chronicle.Publisher{pub}
	var wps []*chronicle.WitnessPublisher
	for _, u := range witnesses {
		wp := chronicle.NewWitnessPublisher(u, nil, nil)
		wps = append(wps, wp)
		c.publishers = append(c.publishers, wp)
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	if err := e.Publish(c.ctx); err != nil {
		return err
	}
	latest, err := pub.Latest(c.ctx)
	if err != nil {
		return err
	}
	cp, err := tlog.Parse(latest)
	if err != nil {
		return err
	}
	out := publishJSON{Origin: cp.Origin, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Root),
		File: filepath.Join(dir, strconv.FormatUint(cp.Size, 10)+".checkpoint"), Cosigned: []string{}}
	for _, wp := range wps {
		cosigned, err := wp.Latest(c.ctx)
		if err != nil {
			return err
		}
		out.Cosigned = append(out.Cosigned, string(cosigned))
	}
	if c.json {
		return c.printJSON(out)
	}
	c.printf("published checkpoint log %s at size %d, root %s: %s\n", out.Origin, out.Size, out.Root, out.File)
	for i, s := range out.Cosigned {
		c.printf("cosigned by %s:\n%s", witnesses[i], s)
	}
	return nil
}

// publishedVerifyJSON is checkpoint verify's JSON output.
type publishedVerifyJSON struct {
	OK     bool                `json:"ok"`
	Stored uint64              `json:"stored"`
	Notes  []publishedNoteJSON `json:"notes"`
}

type publishedNoteJSON struct {
	Size   uint64 `json:"size"`
	Origin string `json:"origin,omitempty"`
	OK     bool   `json:"ok"`
	// Problem is truncated, forked, gap or bad note.
	Problem string `json:"problem,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func publishedRow(r chronicle.PublishedResult) publishedNoteJSON {
	v := publishedNoteJSON{Size: r.Size, Origin: r.Origin, OK: r.Err == nil}
	var bad *chronicle.PublishedNoteError
	switch {
	case r.Err == nil:
		return v
	case errors.Is(r.Err, chronicle.ErrTruncated):
		v.Problem = "truncated"
	case errors.Is(r.Err, chronicle.ErrForked):
		v.Problem = "forked"
	case errors.Is(r.Err, chronicle.ErrCheckpointGap):
		v.Problem = "gap"
	case errors.As(r.Err, &bad):
		v.Problem = "bad note"
	}
	v.Reason = r.Err.Error()
	return v
}

// verifyPublished compares the store's checkpoint log with the notes of
// a published directory.
func (c *cli) verifyPublished(e *chronicle.Engine, keys *chronicle.Keyring, dir, origin string) (*publishedVerifyJSON, error) {
	pub, err := chronicle.NewDirPublisher(dir)
	if err != nil {
		return nil, err
	}
	notes, err := pub.All()
	if err != nil {
		return nil, err
	}
	if len(notes) == 0 {
		return nil, fmt.Errorf("%w in %s", chronicle.ErrNothingPublished, dir)
	}
	rep, err := e.VerifyPublished(c.ctx, keys, origin, notes...)
	if err != nil {
		return nil, err
	}
	out := &publishedVerifyJSON{OK: rep.OK(), Stored: rep.Stored, Notes: []publishedNoteJSON{}}
	for _, r := range rep.Notes {
		out.Notes = append(out.Notes, publishedRow(r))
	}
	return out, nil
}

// runCheckpointVerify checks the store's checkpoints against published
// checkpoint notes.
func runCheckpointVerify(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var dir, origin string
	var keyFiles listFlag
	fs.StringVar(&dir, "published", "", "the `DIR` of published checkpoint notes (required)")
	fs.Var(&keyFiles, "key", "keyring `FILE` of public keys (\"KEYID BASE64-KEY\" lines; repeatable; required)")
	fs.StringVar(&origin, "origin", "", "the checkpoint log's `ORIGIN` (default: each note's own)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if dir == "" || len(keyFiles) == 0 {
		return usagef(cmd, "--published DIR and --key FILE are required")
	}
	keys, err := chronicle.ReadKeyring(keyFiles...)
	if err != nil {
		return err
	}
	e, err := c.open()
	if err != nil {
		return err
	}
	out, err := c.verifyPublished(e, keys, dir, origin)
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
	} else {
		rows := make([][]string, len(out.Notes))
		for i, n := range out.Notes {
			verdict := "ok: the store holds it"
			if !n.OK {
				verdict = fmt.Sprintf("%s: %s", n.Problem, n.Reason)
			}
			rows[i] = []string{strconv.FormatUint(n.Size, 10), verdict}
		}
		table(c.stdout, "", []string{"SIZE", "PUBLISHED CHECKPOINT"}, rows)
		c.printf("%d published checkpoints checked against the store's %d\n", len(out.Notes), out.Stored)
	}
	if !out.OK {
		return errReported
	}
	return nil
}

// runWitnessServe serves a witness (C2SP tlog-witness) of checkpoint logs
// until interrupted.
func runWitnessServe(c *cli, cmd *command, args []string) error {
	fs := c.flags(cmd)
	var listen, name, keyFile, dir string
	var logs listFlag
	fs.StringVar(&listen, "listen", "127.0.0.1:8380", "serve on `HOST:PORT`")
	fs.StringVar(&name, "name", "", "the witness's `NAME`, a schema-less URL such as witness.example/w1 (required)")
	fs.StringVar(&keyFile, "key", "", "the witness's signing key `FILE` (made by keygen; not a log's key; required)")
	fs.StringVar(&dir, "dir", "", "keep the latest cosigned checkpoint of each log in `DIR` (required)")
	fs.Var(&logs, "log", "a log to cosign, `ORIGIN=KEYRING` (its keyring file; repeatable; required)")
	if _, err := c.parse(cmd, fs, args, 0, 0); err != nil {
		return err
	}
	if name == "" || keyFile == "" || dir == "" || len(logs) == 0 {
		return usagef(cmd, "--name, --key, --dir and --log are required")
	}
	signer, err := chronicle.ReadSigningKey(keyFile)
	if err != nil {
		return err
	}
	cos, err := tlog.NewCosigner(name, signer, nil)
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	opts := tlog.WitnessOptions{Cosigner: cos, Dir: dir, Logs: map[string]*chronicle.Keyring{}}
	for _, l := range logs {
		origin, file, ok := strings.Cut(l, "=")
		if !ok {
			return usagef(cmd, "--log %q: want ORIGIN=KEYRING", l)
		}
		keys, err := chronicle.ReadKeyring(file)
		if err != nil {
			return err
		}
		opts.Logs[origin] = keys
	}
	w, err := tlog.NewWitness(opts)
	if err != nil {
		return usagef(cmd, "%v", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	c.printf("witness %s on http://%s/ (submission prefix), cosigning %d logs; its verifier key:\n%s\nInterrupt to stop.\n", name, ln.Addr(), len(opts.Logs), cos.Key())
	srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(quietLogger().Handler(), slog.LevelWarn)}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	if c.hooks.witnessServing != nil {
		c.hooks.witnessServing(ln.Addr().String())
	}
	var served error
	select {
	case <-c.ctx.Done():
	case served = <-errs:
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return errors.Join(served, err)
	}
	if served == nil {
		served = <-errs
	}
	if errors.Is(served, http.ErrServerClosed) {
		served = nil
	}
	return served
}
