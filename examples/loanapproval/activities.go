package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/chronicleflow/chronicle"
)

// This file holds the activities: ordinary Go functions that talk to the
// outside world (a credit bureau, the bank's treasury, email). Chronicle
// runs them outside workflow code, records their results in history and
// retries them when they fail. An activity may run more than once — a
// retry, or a node that died after the work but before recording it — so
// each one is written to be safe to repeat (idempotent).

// CreditRequest is the input of the credit-check activity.
type CreditRequest struct {
	Application string
	Applicant   string
}

// FundsRequest is the input of the reserve-funds activity.
type FundsRequest struct {
	Application string
	Amount      int
}

// DocumentRequest is the input of the request-documents activity.
type DocumentRequest struct {
	Application string
	Applicant   string
	Email       string
	Deadline    time.Time
}

// OfferRequest is the input of the issue-offer activity.
type OfferRequest struct {
	Application string
	Applicant   string
	Amount      int
	CreditScore int
}

// activities are the bank's activities, with the fake outside world they
// talk to.
type activities struct {
	out      *console
	treasury *treasury
	// portal receives the emails the bank sends applicants.
	portal chan<- notice
	// scores is the credit bureau's data.
	scores map[string]int
	// values is the surveyor's opinion of each property.
	values map[string]int
}

// register registers the activities and workflows on the engine under the
// names history records.
func register(e *chronicle.Engine, a *activities, w *workflows) error {
	return errors.Join(
		chronicle.RegisterActivity(e, creditCheckActivity, a.creditCheck),
		chronicle.RegisterActivity(e, reserveFundsActivity, a.reserveFunds),
		chronicle.RegisterActivity(e, releaseFundsActivity, a.releaseFunds),
		chronicle.RegisterActivity(e, appraisePropertyActivity, a.appraiseProperty),
		chronicle.RegisterActivity(e, requestDocumentsActivity, a.requestDocuments),
		chronicle.RegisterActivity(e, issueOfferActivity, a.issueOffer),
		chronicle.RegisterWorkflow(e, loanApprovalWorkflow, w.loanApproval),
		chronicle.RegisterWorkflow(e, propertyValuationWorkflow, w.propertyValuation),
	)
}

// creditCheck asks the credit bureau for the applicant's score. The bureau
// is slow this morning: every first request times out, and the engine's
// retry policy (creditCheckRetry) sends the second one.
func (a *activities) creditCheck(ctx context.Context, req CreditRequest) (int, error) {
	info, _ := chronicle.ActivityInfoFrom(ctx)
	if info.Attempt == 1 {
		a.out.log("activity", "%s attempt %d for %s: credit bureau timeout (will retry)", creditCheckActivity, info.Attempt, req.Application)
		return 0, errors.New("credit bureau timeout")
	}
	score, ok := a.scores[req.Applicant]
	if !ok {
		// No retry can make an unknown person known: fail at once.
		return 0, chronicle.NonRetryable(fmt.Errorf("bureau has no file on %s", req.Applicant))
	}
	a.out.log("activity", "%s attempt %d for %s: score %d", creditCheckActivity, info.Attempt, req.Application, score)
	return score, nil
}

// reserveFunds sets the loan amount aside in the treasury. The reservation
// id is derived from the application, so running it twice reserves once.
func (a *activities) reserveFunds(_ context.Context, req FundsRequest) (string, error) {
	id := "RES-" + req.Application
	a.treasury.reserve(id, req.Amount)
	a.out.log("activity", "%s: %s set aside for %s (reservation %s)", reserveFundsActivity, euros(req.Amount), req.Application, id)
	return id, nil
}

// releaseFunds gives a reservation back; the saga calls it to compensate
// reserveFunds. Releasing a released reservation does nothing.
func (a *activities) releaseFunds(_ context.Context, reservation string) (string, error) {
	amount := a.treasury.release(reservation)
	a.out.log("activity", "%s: reservation %s cancelled, %s back in the treasury", releaseFundsActivity, reservation, euros(amount))
	return reservation, nil
}

// appraiseProperty is the surveyor's visit, run by the property-valuation
// child workflow.
func (a *activities) appraiseProperty(_ context.Context, property string) (int, error) {
	value, ok := a.values[property]
	if !ok {
		return 0, chronicle.NonRetryable(fmt.Errorf("no surveyor covers %q", property))
	}
	a.out.log("activity", "%s: %s is worth %s", appraisePropertyActivity, property, euros(value))
	return value, nil
}

// requestDocuments emails the applicant a link to the upload portal.
func (a *activities) requestDocuments(ctx context.Context, req DocumentRequest) (string, error) {
	a.out.log("activity", "%s: emailed %s <%s> an upload link for %s, due %s UTC",
		requestDocumentsActivity, req.Applicant, req.Email, req.Application, req.Deadline.UTC().Format(time.TimeOnly))
	return "sent", a.send(ctx, notice{Kind: documentsRequested, Application: req.Application, Applicant: req.Applicant})
}

// issueOffer computes the offer's terms and emails it to the applicant.
func (a *activities) issueOffer(ctx context.Context, req OfferRequest) (Offer, error) {
	offer := Offer{Application: req.Application, Amount: req.Amount, RatePercent: 4.4, Years: 25}
	if req.CreditScore >= 700 {
		offer.RatePercent = 3.9
	}
	a.out.log("activity", "%s: %s at %.1f%% over %d years sent to %s", issueOfferActivity, euros(offer.Amount), offer.RatePercent, offer.Years, req.Applicant)
	return offer, a.send(ctx, notice{Kind: offerIssued, Application: req.Application, Applicant: req.Applicant})
}

// send delivers an email to the portal, giving up when the activity's
// context ends (the engine stops, or the instance ended meanwhile).
func (a *activities) send(ctx context.Context, n notice) error {
	select {
	case a.portal <- n:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// treasury is the bank's ledger of reserved funds.
type treasury struct {
	mu       sync.Mutex
	reserved map[string]int
}

func newTreasury() *treasury { return &treasury{reserved: map[string]int{}} }

func (t *treasury) reserve(id string, amount int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reserved[id] = amount
}

func (t *treasury) release(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	amount := t.reserved[id]
	delete(t.reserved, id)
	return amount
}

// snapshot returns the reservations left, in id order.
func (t *treasury) snapshot() []reservation {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]reservation, 0, len(t.reserved))
	for id, amount := range t.reserved {
		out = append(out, reservation{ID: id, Amount: amount})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

type reservation struct {
	ID     string
	Amount int
}

// euros formats an amount: euros(240000) is "€240,000".
func euros(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return "€" + s
}
