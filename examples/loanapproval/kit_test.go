package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/chronicleflow/chronicle"
	"github.com/chronicleflow/chronicle/chronicletest"
	"github.com/chronicleflow/chronicle/history"
)

// These tests run the loan-approval workflow with the chronicletest kit:
// the real workflow code on a real engine, with the activities mocked and
// a virtual clock, so a bank's 14-day document window takes milliseconds.
// main_test.go runs the whole demo on the wall clock instead.

const day = 24 * time.Hour

// bankApplication is an application with a bank's real windows.
var bankApplication = Application{
	ID: "APP-2001", Applicant: "Grace Hopper", Email: "grace@example.org", Amount: 200000,
	Property: "7 Compiler Close, Arlington", DocumentWindow: 14 * day, OfferWindow: 30 * day,
}

// newLoanEnv returns an environment with the loan workflows registered
// and the activities every path calls mocked: the credit check (failing
// once, then 742), the reservation and the valuation.
func newLoanEnv(t *testing.T) *chronicletest.Env {
	t.Helper()
	env := chronicletest.New(t)
	w := &workflows{out: newConsole(io.Discard)}
	for _, err := range []error{
		chronicle.RegisterWorkflow(env.Engine(), loanApprovalWorkflow, w.loanApproval),
		chronicle.RegisterWorkflow(env.Engine(), propertyValuationWorkflow, w.propertyValuation),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	chronicletest.MockActivity[CreditRequest, int](env, creditCheckActivity).ReturnError(errors.New("credit bureau timeout")).Once()
	chronicletest.MockActivity[CreditRequest, int](env, creditCheckActivity).
		WithInput(CreditRequest{Application: bankApplication.ID, Applicant: bankApplication.Applicant}).
		Return(742).Once()
	chronicletest.MockActivity[FundsRequest, string](env, reserveFundsActivity).Return("RES-" + bankApplication.ID).Once()
	chronicletest.MockActivity[string, int](env, appraisePropertyActivity).WithInput(bankApplication.Property).Return(400000).Once()
	return env
}

func start(t *testing.T, env *chronicletest.Env) string {
	t.Helper()
	return env.Start(loanApprovalWorkflow, bankApplication, &chronicle.StartOptions{
		InstanceID: bankApplication.ID, BusinessKey: bankApplication.ID, Version: "1", Actor: "clerk.ines",
	})
}

// TestKitDocumentsNeverArrive covers the 14-day wait and the compensation:
// the applicant never uploads, the deadline fires exactly 14 days after
// the documents were requested, and the saga releases the funds.
func TestKitDocumentsNeverArrive(t *testing.T) {
	t.Parallel()
	wall := time.Now()
	env := newLoanEnv(t)
	chronicletest.MockActivity[DocumentRequest, string](env, requestDocumentsActivity).Return("sent").Once()
	release := chronicletest.MockActivity[string, string](env, releaseFundsActivity).WithInput("RES-" + bankApplication.ID).Return("released").Once()
	offer := chronicletest.MockActivity[OfferRequest, Offer](env, issueOfferActivity).Maybe()

	id := start(t, env)
	inst := env.Wait(id)
	t.Logf("14-day document window: %s of virtual time in %s", env.Elapsed(), time.Since(wall))

	d := chronicletest.Result[Decision](env, id)
	if d.Approved || d.Reason != "no documents within 336h0m0s" {
		t.Fatalf("decision %+v, want rejected for missing documents", d)
	}
	// The credit check's retry took 100ms; the window began after it.
	if want := env.StartTime().Add(100*time.Millisecond + 14*day); !inst.CompletedAt.Equal(want) {
		t.Fatalf("rejected at %s, want %s", inst.CompletedAt, want)
	}
	env.AssertCustomStatus(id, "rejected")
	if release.Calls() != 1 || offer.Calls() != 0 {
		t.Fatalf("release-funds called %d times, issue-offer %d", release.Calls(), offer.Calls())
	}
	env.AssertHistoryContains(id,
		history.KindTimerCreated, history.KindTimerFired, // the 14 days
		history.KindCompensationStarted, history.KindActivityScheduled, history.KindActivityCompleted, history.KindCompensationCompleted,
		history.KindExecutionCompleted)
	if n := countKind(env.History(id), history.KindEventRaised); n != 0 {
		t.Fatalf("%d signals recorded, want none", n)
	}
}

// TestKitApproved covers the retry sequence of the credit check and the
// signals of the happy path, at the virtual times the applicant sends them.
func TestKitApproved(t *testing.T) {
	t.Parallel()
	wall := time.Now()
	env := newLoanEnv(t)
	var requested DocumentRequest
	chronicletest.MockActivity[DocumentRequest, string](env, requestDocumentsActivity).
		Do(func(_ context.Context, r DocumentRequest) (string, error) {
			requested = r
			return "sent", nil
		}).Once()
	chronicletest.MockActivity[OfferRequest, Offer](env, issueOfferActivity).
		With(func(r OfferRequest) bool { return r.CreditScore == 742 && r.Amount == bankApplication.Amount }).
		Return(Offer{Application: bankApplication.ID, Amount: bankApplication.Amount, RatePercent: 3.9, Years: 25}).Once()
	release := chronicletest.MockActivity[string, string](env, releaseFundsActivity).Maybe()

	id := start(t, env)
	upload := &chronicle.RaiseOptions{IdempotencyKey: "upload-" + id, Sender: "portal", Actor: "grace.hopper"}
	docs := Documents{Files: []string{"payslips.pdf", "id-card.png"}}
	// Day 3: the upload, sent twice with one key (a double click).
	env.RaiseEventAt(3*day, id, documentsSignal, docs, upload)
	env.RaiseEventAt(3*day+time.Second, id, documentsSignal, docs, upload)
	// Day 10: the signature.
	env.RaiseEventAt(10*day, id, offerSignedSignal, Signature{By: "Grace Hopper", Method: "e-signature"}, nil)
	env.RunFor(5 * day)
	env.AssertCustomStatus(id, "waiting for signature")
	inst := env.Wait(id)
	t.Logf("approval path: %s of virtual time in %s", env.Elapsed(), time.Since(wall))

	d := chronicletest.Result[Decision](env, id)
	if !d.Approved || d.CreditScore != 742 || d.PropertyValue != 400000 || d.Offer == nil || d.Offer.RatePercent != 3.9 {
		t.Fatalf("decision %+v", d)
	}
	if !inst.CompletedAt.Equal(env.StartTime().Add(10 * day)) {
		t.Fatalf("approved at %s, want day 10", inst.CompletedAt)
	}
	// The deadline the email names is 14 days after the request, which
	// came right after the credit check's retry (100ms, its policy's
	// nominal first delay).
	if want := env.StartTime().Add(100*time.Millisecond + 14*day); !requested.Deadline.Equal(want) {
		t.Fatalf("documents due %s, want %s", requested.Deadline, want)
	}
	if release.Calls() != 0 {
		t.Fatalf("funds released on an approved loan")
	}
	events := env.History(id)
	if n := countKind(events, history.KindEventRaised); n != 2 {
		t.Fatalf("%d signals recorded, want 2 (the double upload once)", n)
	}
	if n := countKind(events, history.KindTimerCancelled); n != 2 {
		t.Fatalf("%d deadlines cancelled, want both", n)
	}
	if got := completedAttempts(t, events, creditCheckActivity); got != 2 {
		t.Fatalf("credit check took %d attempts, want 2", got)
	}
	env.AssertGolden(id, "testdata/kit-approved.golden")
}

// TestKitCreditBureauDown covers a retry sequence that runs out: three
// attempts 100ms and 200ms apart, then the workflow fails with nothing to
// compensate.
func TestKitCreditBureauDown(t *testing.T) {
	t.Parallel()
	env := chronicletest.New(t)
	w := &workflows{out: newConsole(io.Discard)}
	if err := chronicle.RegisterWorkflow(env.Engine(), loanApprovalWorkflow, w.loanApproval); err != nil {
		t.Fatal(err)
	}
	var at []time.Duration
	chronicletest.MockActivity[CreditRequest, int](env, creditCheckActivity).
		Do(func(context.Context, CreditRequest) (int, error) {
			at = append(at, env.Elapsed())
			return 0, errors.New("credit bureau timeout")
		}).Times(3)
	reserve := chronicletest.MockActivity[FundsRequest, string](env, reserveFundsActivity).Maybe()

	id := start(t, env)
	env.Wait(id)
	env.AssertStatus(id, chronicle.StatusFailed)
	want := []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond}
	if len(at) != 3 || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
		t.Fatalf("attempts at %v, want %v", at, want)
	}
	if reserve.Calls() != 0 {
		t.Fatalf("funds reserved after a failed credit check")
	}
	env.AssertHistory(id, history.KindExecutionStarted, history.KindActivityScheduled, history.KindActivityFailed, history.KindExecutionFailed)
}

func countKind(events []history.Event, k history.Kind) int {
	n := 0
	for _, e := range events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// completedAttempts returns the attempts the completion of the activity
// name records.
func completedAttempts(t *testing.T, events []history.Event, name string) int {
	t.Helper()
	seq := activitySeq(t, events, name)
	for _, e := range events {
		if e.Kind == history.KindActivityCompleted && e.CorrelationID == history.SeqCorrelation(seq) {
			a, err := e.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			return a.(*history.ActivityCompleted).Attempts
		}
	}
	t.Fatalf("%s never completed", name)
	return 0
}
