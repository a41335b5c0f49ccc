package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/chronicleflow/chronicle"
)

// This file simulates the bank's customer portal and the applicants using
// it. The portal is outside the workflow: it reaches running instances only
// through the client API, with engine.RaiseEvent.

// Kinds of notice.
const (
	documentsRequested = "documents-requested"
	offerIssued        = "offer-issued"
)

// notice is an email from the bank to an applicant.
type notice struct {
	Kind        string
	Application string
	Applicant   string
}

// applicant says how a simulated applicant behaves.
type applicant struct {
	// User is the applicant's portal login, recorded as the actor
	// ("user:<User>") of the signals they send.
	User string
	// Uploads is false for an applicant who never uploads documents.
	Uploads bool
}

// portal turns the applicants' actions into signals.
type portal struct {
	engine     *chronicle.Engine
	out        *console
	inbox      <-chan notice
	applicants map[string]applicant // by application id
}

// serve handles emails until ctx ends.
func (p *portal) serve(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-p.inbox:
			if err := p.handle(ctx, n); err != nil {
				return fmt.Errorf("portal: %s for %s: %w", n.Kind, n.Application, err)
			}
		}
	}
}

func (p *portal) handle(ctx context.Context, n notice) error {
	who := p.applicants[n.Application]
	switch n.Kind {
	case documentsRequested:
		if !who.Uploads {
			p.out.log("portal", "%s opens the link for %s and uploads nothing", n.Applicant, n.Application)
			return nil
		}
		docs := Documents{Files: []string{"payslips.pdf", "id-card.png", "bank-statements.pdf"}}
		// The idempotency key names this upload. The same key sent again
		// — a double click, a client retrying after a lost response — is
		// recorded once: the instance sees one signal.
		opts := chronicle.RaiseOptions{IdempotencyKey: "upload-" + n.Application, Sender: "portal", Actor: who.User}
		p.out.log("portal", "%s uploads %s for %s (idempotency key %s)", n.Applicant, strings.Join(docs.Files, ", "), n.Application, opts.IdempotencyKey)
		if err := p.engine.RaiseEvent(ctx, n.Application, documentsSignal, docs, &opts); err != nil {
			return err
		}
		p.out.log("portal", "the browser missed the response and sends the same upload again, same key")
		return p.engine.RaiseEvent(ctx, n.Application, documentsSignal, docs, &opts)
	case offerIssued:
		p.out.log("portal", "%s signs the offer for %s", n.Applicant, n.Application)
		return p.engine.RaiseEvent(ctx, n.Application, offerSignedSignal, Signature{By: n.Applicant, Method: "e-signature"},
			&chronicle.RaiseOptions{IdempotencyKey: "signature-" + n.Application, Sender: "portal", Actor: who.User})
	}
	return fmt.Errorf("unknown notice %q", n.Kind)
}
