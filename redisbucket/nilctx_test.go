package redisbucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestNilContext: a nil context is context.Background() for every
// method that takes one (AllowNContext, AllowTierContext, PeekContext,
// RefundContext, RefundTierContext, ReserveContext, ReserveTierContext,
// LenContext), as it is for Wait and Reservation.Wait: never a panic.
func TestNilContext(t *testing.T) {
	s := mustNew(t, newClient(t, server(t).Addr()), keyrate.PerHour(100), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout))
	var nilCtx context.Context
	calls := []struct {
		name string
		f    func() error
	}{
		{"AllowNContext", func() error { _, err := s.AllowNContext(nilCtx, "k", 1); return err }},
		{"AllowTierContext", func() error { _, err := s.AllowTierContext(nilCtx, "k", keyrate.Tier{}, 1); return err }},
		{"PeekContext", func() error { _, err := s.PeekContext(nilCtx, "k"); return err }},
		{"RefundContext", func() error { return s.RefundContext(nilCtx, "k", 1) }},
		{"RefundTierContext", func() error { return s.RefundTierContext(nilCtx, "k", keyrate.Tier{}, 1) }},
		{"ReserveContext", func() error { _, err := s.ReserveContext(nilCtx, "k", 1, time.Second); return err }},
		{"ReserveTierContext", func() error {
			_, err := s.ReserveTierContext(nilCtx, "k", keyrate.Tier{}, 1, time.Second)
			return err
		}},
		{"LenContext", func() error { _, err := s.LenContext(nilCtx); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil context, ...) panicked: %v", c.name, r)
				}
			}()
			if err := c.f(); err != nil {
				t.Errorf("%s(nil context, ...) = %v; want it served as with context.Background()", c.name, err)
			}
		})
	}
	if err := s.Wait(nilCtx, "k", 1); err != nil { // as documented
		t.Errorf("Wait(nil context) = %v", err)
	}
}
