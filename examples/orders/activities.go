package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/chronicleflow/chronicle"
)

// This file holds the activities and the fake outside world they talk to:
// a warehouse, a payment gateway that is flaky, a carrier and the shop's
// back office. Each activity is safe to run twice: ids derive from the
// order, so a repeated call finds its own earlier work.

// StockRequest is the input of reserve-stock.
type StockRequest struct {
	Order string
	Items []Item
}

// PaymentRequest is the input of charge-payment.
type PaymentRequest struct {
	Order    string
	Customer string
	Amount   int
}

// Notice is the input of notify: a message to a person.
type Notice struct {
	Order   string
	To      string
	Subject string
	TaskID  string `msgpack:",omitempty"`
}

// ShipRequest is the input of ship-order.
type ShipRequest struct {
	Order   string
	Address string
	Items   []Item
}

// SettleRequest is the input of settle-order.
type SettleRequest struct {
	Order   string
	Payment string
	Amount  int
}

// shop is the outside world of the demo.
type shop struct {
	say func(who, format string, args ...any)
	// backOffice receives the notices people get.
	backOffice chan<- Notice
	// failFirst counts the payment attempts to fail per customer before
	// the gateway answers.
	failFirst map[string]int

	mu       sync.Mutex
	attempts map[string]int
	reserved map[string]bool // reservation -> held
	charged  map[string]int  // payment -> amount, while not refunded
	settled  []string
}

func newShop(say func(who, format string, args ...any), backOffice chan<- Notice, failFirst map[string]int) *shop {
	return &shop{say: say, backOffice: backOffice, failFirst: failFirst,
		attempts: map[string]int{}, reserved: map[string]bool{}, charged: map[string]int{}}
}

// register registers the activities and the workflow.
func register(e *chronicle.Engine, s *shop, w *workflows) error {
	return errors.Join(
		chronicle.RegisterActivity(e, reserveStockActivity, s.reserveStock),
		chronicle.RegisterActivity(e, releaseStockActivity, s.releaseStock),
		chronicle.RegisterActivity(e, chargePaymentActivity, s.chargePayment),
		chronicle.RegisterActivity(e, refundPaymentActivity, s.refundPayment),
		chronicle.RegisterActivity(e, notifyActivity, s.notify),
		chronicle.RegisterActivity(e, shipOrderActivity, s.shipOrder),
		chronicle.RegisterActivity(e, settleOrderActivity, s.settleOrder),
		orderWorkflow.Register(e, w.order),
	)
}

func (s *shop) reserveStock(_ context.Context, r StockRequest) (string, error) {
	id := "STK-" + r.Order
	s.mu.Lock()
	s.reserved[id] = true
	s.mu.Unlock()
	s.say("warehouse", "reserved %d line(s) for %s (%s)", len(r.Items), r.Order, id)
	return id, nil
}

func (s *shop) releaseStock(_ context.Context, reservation string) (string, error) {
	s.mu.Lock()
	delete(s.reserved, reservation)
	s.mu.Unlock()
	s.say("warehouse", "released %s", reservation)
	return reservation, nil
}

// chargePayment fails the first attempts of customers listed in
// failFirst: the gateway times out and the retry policy tries again.
func (s *shop) chargePayment(ctx context.Context, r PaymentRequest) (string, error) {
	info, _ := chronicle.ActivityInfoFrom(ctx)
	s.mu.Lock()
	s.attempts[r.Customer]++
	failing := s.attempts[r.Customer] <= s.failFirst[r.Customer]
	s.mu.Unlock()
	if failing {
		s.say("gateway", "attempt %d to charge %s for %s: timeout", info.Attempt, cents(r.Amount), r.Order)
		return "", errors.New("payment gateway timeout")
	}
	id := "PAY-" + r.Order
	s.mu.Lock()
	s.charged[id] = r.Amount
	s.mu.Unlock()
	s.say("gateway", "attempt %d: charged %s %s for %s (%s)", info.Attempt, r.Customer, cents(r.Amount), r.Order, id)
	return id, nil
}

func (s *shop) refundPayment(_ context.Context, payment string) (string, error) {
	s.mu.Lock()
	amount := s.charged[payment]
	delete(s.charged, payment)
	s.mu.Unlock()
	s.say("gateway", "refunded %s (%s)", payment, cents(amount))
	return payment, nil
}

// notify hands a notice to the back office, giving up when the activity's
// context ends.
func (s *shop) notify(ctx context.Context, n Notice) (string, error) {
	s.say("mail", "to %s about %s: %s", n.To, n.Order, n.Subject)
	select {
	case s.backOffice <- n:
		return "sent", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (s *shop) shipOrder(_ context.Context, r ShipRequest) (string, error) {
	tracking := "TRK-" + r.Order
	s.say("carrier", "picked up %s for %s (%s)", r.Order, r.Address, tracking)
	return tracking, nil
}

func (s *shop) settleOrder(_ context.Context, r SettleRequest) (string, error) {
	s.mu.Lock()
	s.settled = append(s.settled, r.Order)
	s.mu.Unlock()
	s.say("ledger", "return window over: %s settled with the seller (%s)", r.Order, cents(r.Amount))
	return "settled", nil
}

// books is what the shop holds at the end: reservations and payments not
// undone, and the orders settled, each sorted.
type books struct {
	Reserved []string
	Charged  []string
	Settled  []string
}

func (s *shop) books() books {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b books
	for id := range s.reserved {
		b.Reserved = append(b.Reserved, id)
	}
	for id := range s.charged {
		b.Charged = append(b.Charged, id)
	}
	b.Settled = append(b.Settled, s.settled...)
	sort.Strings(b.Reserved)
	sort.Strings(b.Charged)
	sort.Strings(b.Settled)
	return b
}

// cents formats an amount in cents: cents(129900) is "€1,299.00".
func cents(n int) string {
	euros := fmt.Sprint(n / 100)
	for i := len(euros) - 3; i > 0; i -= 3 {
		euros = euros[:i] + "," + euros[i:]
	}
	return fmt.Sprintf("€%s.%02d", euros, n%100)
}
