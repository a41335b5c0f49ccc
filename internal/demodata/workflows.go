package demodata

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronicleflow/chronicle"
)

// Names under which the demo's workflows and activities are registered and
// recorded in history.
const (
	ClaimWorkflow  = "claim"
	LoanWorkflow   = "loan-application"
	KYCWorkflow    = "kyc-check"
	RefundWorkflow = "refund"

	AssessDamageActivity   = "assess-damage"
	PayClaimActivity       = "pay-claim"
	CreditCheckActivity    = "credit-check"
	DisburseLoanActivity   = "disburse-loan"
	VerifyIdentityActivity = "verify-identity"
	// IssueRefundActivity is not registered while the refund runs: its task
	// is dead-lettered. Seed registers it afterwards, as a deploy would, so
	// that redriving the dead letter succeeds.
	IssueRefundActivity = "issue-refund"

	// ReviewTaskName names the human task of a claim.
	ReviewTaskName = "review-claim"
	// CoolingOff is how long a loan waits between approval and payout.
	CoolingOff = 24 * time.Hour
)

// reviewRoles may work on a claim's review task.
var reviewRoles = []string{"adjuster", "supervisor"}

// Claim is the input of the claim workflow.
type Claim struct {
	Number       string `msgpack:"number" json:"number"`
	Policy       string `msgpack:"policy" json:"policy"`
	Policyholder string `msgpack:"policyholder" json:"policyholder"`
	Amount       int    `msgpack:"amount" json:"amount"` // euros claimed
	Damage       string `msgpack:"damage" json:"damage"`
}

// ReviewRequest is the payload of a claim's review task: what the adjuster
// sees.
type ReviewRequest struct {
	Claim    string `msgpack:"claim" json:"claim"`
	Claimed  int    `msgpack:"claimed" json:"claimed"`
	Estimate int    `msgpack:"estimate" json:"estimate"`
}

// Review is the result of a claim's review task, given by the user who
// completes it: {"approved": true, "amount": 1200, "note": "..."}.
type Review struct {
	Approved bool   `msgpack:"approved" json:"approved"`
	Amount   int    `msgpack:"amount" json:"amount"`
	Note     string `msgpack:"note" json:"note"`
}

// Settlement is the result of the claim workflow.
type Settlement struct {
	Claim    string `msgpack:"claim" json:"claim"`
	Approved bool   `msgpack:"approved" json:"approved"`
	Paid     int    `msgpack:"paid" json:"paid"`
	Payment  string `msgpack:"payment,omitempty" json:"payment,omitempty"`
	Note     string `msgpack:"note,omitempty" json:"note,omitempty"`
}

// Payment is the input of the pay-claim activity.
type Payment struct {
	Claim  string `msgpack:"claim" json:"claim"`
	Amount int    `msgpack:"amount" json:"amount"`
}

// LoanApplication is the input of the loan-application workflow.
type LoanApplication struct {
	Number    string `msgpack:"number" json:"number"`
	Applicant string `msgpack:"applicant" json:"applicant"`
	Amount    int    `msgpack:"amount" json:"amount"`
}

// LoanDecision is the result of the loan-application workflow.
type LoanDecision struct {
	Approved     bool   `msgpack:"approved" json:"approved"`
	CreditScore  int    `msgpack:"credit_score" json:"credit_score"`
	Disbursement string `msgpack:"disbursement,omitempty" json:"disbursement,omitempty"`
}

// Person is the input of the kyc-check workflow.
type Person struct {
	Customer string `msgpack:"customer" json:"customer"`
	Name     string `msgpack:"name" json:"name"`
	Passport string `msgpack:"passport" json:"passport"`
}

// RefundRequest is the input of the refund workflow.
type RefundRequest struct {
	Order  string `msgpack:"order" json:"order"`
	Amount int    `msgpack:"amount" json:"amount"`
}

// register registers every workflow and every activity but issue-refund.
func register(e *chronicle.Engine) error {
	return errors.Join(
		chronicle.RegisterWorkflow(e, ClaimWorkflow, claimWorkflow),
		chronicle.RegisterWorkflow(e, LoanWorkflow, loanWorkflow),
		chronicle.RegisterWorkflow(e, KYCWorkflow, kycWorkflow),
		chronicle.RegisterWorkflow(e, RefundWorkflow, refundWorkflow),
		chronicle.RegisterActivity(e, AssessDamageActivity, assessDamage),
		chronicle.RegisterActivity(e, PayClaimActivity, payClaim),
		chronicle.RegisterActivity(e, CreditCheckActivity, creditCheck),
		chronicle.RegisterActivity(e, DisburseLoanActivity, disburseLoan),
		chronicle.RegisterActivity(e, VerifyIdentityActivity, verifyIdentity),
	)
}

// registerFix registers issue-refund: the fix deployed after its task was
// dead-lettered.
func registerFix(e *chronicle.Engine) error {
	return chronicle.RegisterActivity(e, IssueRefundActivity, issueRefund)
}

// ReviewTaskID is the id of a claim's review task.
func ReviewTaskID(claim string) string { return "review-" + claim }

// claimWorkflow assesses the damage, asks an adjuster to review the claim
// and pays what they approved.
func claimWorkflow(ctx *chronicle.Context, c Claim) (Settlement, error) {
	if err := ctx.SetCustomStatus("assessing damage"); err != nil {
		return Settlement{}, err
	}
	estimate, err := chronicle.CallActivity[int](ctx, AssessDamageActivity, c, nil)
	if err != nil {
		return Settlement{}, err
	}
	if err := ctx.SetCustomStatus("awaiting review"); err != nil {
		return Settlement{}, err
	}
	task := ctx.CreateTask(ReviewTaskName, ReviewRequest{Claim: c.Number, Claimed: c.Amount, Estimate: estimate},
		&chronicle.TaskOptions{TaskID: ReviewTaskID(c.Number), Roles: reviewRoles, Due: ctx.Now().Add(72 * time.Hour)})
	review, err := chronicle.WaitTask[Review](ctx, task)
	if err != nil {
		return Settlement{}, err
	}
	s := Settlement{Claim: c.Number, Approved: review.Approved, Note: review.Note}
	if err := ctx.UpsertSearchAttributes(map[string]any{"approved": review.Approved && review.Amount > 0}); err != nil {
		return Settlement{}, err
	}
	if !review.Approved || review.Amount <= 0 {
		s.Approved = false
		return s, ctx.SetCustomStatus("rejected")
	}
	if err := ctx.SetCustomStatus("paying"); err != nil {
		return Settlement{}, err
	}
	s.Payment, err = chronicle.CallActivity[string](ctx, PayClaimActivity, Payment{Claim: c.Number, Amount: review.Amount}, nil)
	if err != nil {
		return Settlement{}, err
	}
	s.Paid = review.Amount
	return s, ctx.SetCustomStatus("paid")
}

// loanWorkflow checks the applicant's credit, waits out a cooling-off
// period on a durable timer and pays the loan out.
func loanWorkflow(ctx *chronicle.Context, app LoanApplication) (LoanDecision, error) {
	score, err := chronicle.CallActivity[int](ctx, CreditCheckActivity, app.Applicant, nil)
	if err != nil {
		return LoanDecision{}, err
	}
	d := LoanDecision{CreditScore: score}
	if score < 650 {
		return d, ctx.SetCustomStatus("rejected")
	}
	if err := ctx.SetCustomStatus("cooling-off period"); err != nil {
		return LoanDecision{}, err
	}
	if err := ctx.Timer(CoolingOff, &chronicle.TimerOptions{Name: "cooling-off"}).Get(nil); err != nil {
		return LoanDecision{}, err
	}
	d.Disbursement, err = chronicle.CallActivity[string](ctx, DisburseLoanActivity, app, nil)
	if err != nil {
		return LoanDecision{}, err
	}
	d.Approved = true
	return d, ctx.SetCustomStatus("disbursed")
}

// kycWorkflow verifies a customer's identity; it fails when the identity
// cannot be verified.
func kycWorkflow(ctx *chronicle.Context, p Person) (string, error) {
	return chronicle.CallActivity[string](ctx, VerifyIdentityActivity, p, &chronicle.ActivityOptions{
		Retry: chronicle.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Minute, Multiplier: 2, MaxInterval: time.Minute},
	})
}

// refundWorkflow issues a refund.
func refundWorkflow(ctx *chronicle.Context, r RefundRequest) (string, error) {
	return chronicle.CallActivity[string](ctx, IssueRefundActivity, r, nil)
}

// The activities are deterministic so that the demo data is the same on
// every run.

func assessDamage(_ context.Context, c Claim) (int, error) { return c.Amount * 9 / 10, nil }

func payClaim(_ context.Context, p Payment) (string, error) { return "PAY-" + p.Claim, nil }

func creditCheck(_ context.Context, applicant string) (int, error) {
	score := 600
	for _, r := range applicant {
		score += int(r) % 17
	}
	return min(score, 850), nil
}

func disburseLoan(_ context.Context, app LoanApplication) (string, error) {
	return "DSB-" + app.Number, nil
}

// verifyIdentity refuses the expired passport of KYC-3001; rerunning its
// activity with another passport (chronicle instance rerun) verifies it.
func verifyIdentity(_ context.Context, p Person) (string, error) {
	if p.Passport == "P1234567" {
		return "", chronicle.ErrorWithType("DocumentExpired", fmt.Errorf("passport %s expired on 2026-03-31", p.Passport))
	}
	return "verified " + p.Customer + " by passport " + p.Passport, nil
}

func issueRefund(_ context.Context, r RefundRequest) (string, error) { return "RFD-" + r.Order, nil }
