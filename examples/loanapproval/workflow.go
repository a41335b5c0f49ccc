package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle"
)

// This file is the workflow code: what you write when you build a product
// on Chronicle. It reads like ordinary Go, but every step that touches the
// outside world goes through ctx, so Chronicle records it in the instance's
// history and can resume the code after a restart — minutes or weeks later,
// on any node — by replaying that history.

// Application is the input of the loan-approval workflow: what the
// applicant filled in, and the terms the bank gave them.
type Application struct {
	ID        string // business reference, also used as the instance id
	Applicant string
	Email     string
	Amount    int    // euros
	Property  string // address of the house the loan pays for
	// DocumentWindow is how long the applicant has to upload documents
	// once asked. A bank would give 14 days; the demo gives 2 seconds.
	DocumentWindow time.Duration
	// OfferWindow is how long an offer stays open for signature.
	OfferWindow time.Duration
}

// Decision is the result of the loan-approval workflow. A rejection is a
// business outcome, not an error: the workflow completes with
// Approved false and a reason.
type Decision struct {
	Approved      bool
	Reason        string
	CreditScore   int
	PropertyValue int
	Offer         *Offer `msgpack:",omitempty"`
}

// Valuation is the result of the property-valuation sub-workflow.
type Valuation struct {
	Property  string
	Value     int // euros
	Appraiser string
}

// Offer is what the bank proposes once the application passes.
type Offer struct {
	Application string
	Amount      int
	RatePercent float64
	Years       int
}

// Documents is the payload of the "documents-uploaded" signal.
type Documents struct {
	Files []string
}

// Signature is the payload of the "offer-signed" signal.
type Signature struct {
	By     string
	Method string
}

// The bank's rules.
const (
	minCreditScore    = 650
	maxLoanToValuePct = 80
)

// Names under which the workflows, activities and signals are registered
// and recorded in history. History stores names, not Go functions, so
// renaming a Go function never breaks a running instance.
const (
	loanApprovalWorkflow      = "loan-approval"
	propertyValuationWorkflow = "property-valuation"

	creditCheckActivity      = "credit-check"
	reserveFundsActivity     = "reserve-funds"
	releaseFundsActivity     = "release-funds"
	appraisePropertyActivity = "appraise-property"
	requestDocumentsActivity = "request-documents"
	issueOfferActivity       = "issue-offer"

	documentsSignal   = "documents-uploaded"
	offerSignedSignal = "offer-signed"
)

// creditCheckRetry is the retry policy of the credit check: three attempts,
// the first retry after about 100ms (the engine adds jitter: 50–100ms),
// doubling after that. Production values would be seconds to minutes; the
// demo keeps them short so it finishes at once.
var creditCheckRetry = chronicle.RetryPolicy{
	MaxAttempts:     3,
	InitialInterval: 100 * time.Millisecond,
	Multiplier:      2,
	MaxInterval:     time.Second,
}

// workflows holds the workflow functions. out is only for the demo's
// narration; workflow code normally has no side channel at all.
type workflows struct {
	out *console
}

// say narrates a step of workflow code. Workflow code runs again every
// time Chronicle replays its history (after a restart, say), so it prints
// only when the code is not replaying — otherwise each line would appear
// once per replay. ctx.Logger() does the same for structured logs.
func (w *workflows) say(ctx *chronicle.Context, format string, args ...any) {
	if !ctx.IsReplaying() {
		w.out.log("workflow", ctx.InstanceID()+": "+format, args...)
	}
}

// loanApproval is the "loan-approval" workflow. Read it top to bottom: the
// engine runs it up to the first step that must wait (an activity, a
// timer, a signal), records what it asked for, and resumes it when the
// answer arrives. Between two steps the instance exists only as history in
// the store.
func (w *workflows) loanApproval(ctx *chronicle.Context, app Application) (Decision, error) {
	d := Decision{}

	// 1. Credit check. The bureau is flaky: the activity returns an error
	// and the engine retries it by the policy above. Retries are not
	// recorded one by one; history keeps the outcome and its attempt count.
	score, err := chronicle.CallActivity[int](ctx, creditCheckActivity, CreditRequest{Application: app.ID, Applicant: app.Applicant},
		&chronicle.ActivityOptions{Retry: creditCheckRetry})
	if err != nil {
		// Attempts exhausted: the workflow fails and the instance shows
		// the error. Nothing was reserved yet, so there is nothing to undo.
		return Decision{}, err
	}
	d.CreditScore = score

	// 2. Reserve the funds. From here on, a rejection must give them back:
	// the saga remembers how to undo each step and runs the undo steps in
	// reverse order when asked to compensate.
	saga := ctx.NewSaga()
	reservation, err := chronicle.CallActivity[string](ctx, reserveFundsActivity, FundsRequest{Application: app.ID, Amount: app.Amount}, nil)
	if err != nil {
		return Decision{}, err
	}
	saga.AddCompensation(releaseFundsActivity, func(ctx *chronicle.Context) error {
		_, err := chronicle.CallActivity[string](ctx, releaseFundsActivity, reservation, nil)
		return err
	})
	reject := func(reason string) (Decision, error) {
		w.say(ctx, "rejected (%s); compensating", reason)
		if err := ctx.SetCustomStatus("rejected"); err != nil {
			return Decision{}, err
		}
		if err := saga.Compensate(reason); err != nil {
			return Decision{}, fmt.Errorf("reject %s: %w", app.ID, err)
		}
		d.Reason = reason
		return d, nil
	}

	// 3. Value the property in a sub-workflow: a child instance with its
	// own history, here "<parent id>/<seq>".
	valuation, err := chronicle.CallSubWorkflow[Valuation](ctx, propertyValuationWorkflow, app.Property, nil)
	if err != nil {
		return reject("the property could not be valued: " + err.Error())
	}
	d.PropertyValue = valuation.Value

	// 4. Ask for documents and wait for them, with a deadline. The wait
	// starts before the link is sent, so its durable timer covers the whole
	// time the applicant has the link — and a signal that arrives while
	// the email is still being sent is not missed (signals are buffered
	// anyway). The timer lives in the store: had this process stopped, the
	// deadline would still fire on whichever node runs next.
	if err := ctx.SetCustomStatus("waiting for documents"); err != nil {
		return Decision{}, err
	}
	docsArrived := ctx.WaitEvent(documentsSignal, &chronicle.WaitOptions{Timeout: app.DocumentWindow})
	deadline := ctx.Now().Add(app.DocumentWindow)
	if _, err := chronicle.CallActivity[string](ctx, requestDocumentsActivity, DocumentRequest{
		Application: app.ID, Applicant: app.Applicant, Email: app.Email, Deadline: deadline,
	}, nil); err != nil {
		return Decision{}, err
	}
	var docs Documents
	switch err := docsArrived.Get(&docs); {
	case errors.Is(err, chronicle.ErrTimeout):
		return reject(fmt.Sprintf("no documents within %s", app.DocumentWindow))
	case err != nil:
		return Decision{}, err
	}
	w.say(ctx, "received %d documents", len(docs.Files))

	// 5. Decide by the bank's rules. Only data from history is used:
	// workflow code must be deterministic, so no time.Now, no randomness,
	// no reading files or the network here.
	if score < minCreditScore {
		return reject(fmt.Sprintf("credit score %d below %d", score, minCreditScore))
	}
	if ltv := app.Amount * 100 / max(valuation.Value, 1); ltv > maxLoanToValuePct {
		return reject(fmt.Sprintf("loan-to-value %d%% above %d%%", ltv, maxLoanToValuePct))
	}

	// 6. Send the offer and wait for the signature, the same way as the
	// documents.
	if err := ctx.SetCustomStatus("waiting for signature"); err != nil {
		return Decision{}, err
	}
	signed := ctx.WaitEvent(offerSignedSignal, &chronicle.WaitOptions{Timeout: app.OfferWindow})
	offer, err := chronicle.CallActivity[Offer](ctx, issueOfferActivity, OfferRequest{
		Application: app.ID, Applicant: app.Applicant, Amount: app.Amount, CreditScore: score,
	}, nil)
	if err != nil {
		return reject("the offer could not be issued: " + err.Error())
	}
	var sig Signature
	switch err := signed.Get(&sig); {
	case errors.Is(err, chronicle.ErrTimeout):
		return reject("the offer expired unsigned")
	case err != nil:
		return Decision{}, err
	}

	// Approved: the reservation stays; paying out is another workflow's
	// job. Nothing to compensate.
	w.say(ctx, "offer signed by %s: approved", sig.By)
	if err := ctx.SetCustomStatus("approved"); err != nil {
		return Decision{}, err
	}
	d.Approved = true
	d.Reason = fmt.Sprintf("offer signed by %s (%s)", sig.By, sig.Method)
	d.Offer = &offer
	return d, nil
}

// propertyValuation is the "property-valuation" workflow, run as a child
// of loan-approval. It could as well be started on its own.
func (w *workflows) propertyValuation(ctx *chronicle.Context, property string) (Valuation, error) {
	value, err := chronicle.CallActivity[int](ctx, appraisePropertyActivity, property, nil)
	if err != nil {
		return Valuation{}, err
	}
	return Valuation{Property: property, Value: value, Appraiser: "Hopper & Co Surveyors"}, nil
}
