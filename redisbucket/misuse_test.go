package redisbucket_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/redisbucket"
)

// This file calls a store on a real redis-server the way a careless user
// might, and checks each documented answer: bad keys and costs refused
// without a round trip, a caller's done context that is not an outage, a
// nil context, another store's reservation, and Close twice, concurrently
// with use.

// AllowNContext: "keyrate.ErrInvalidCost for cost < 1,
// keyrate.ErrCostExceedsBurst for cost above the smallest Burst ... and
// keyrate.ErrInvalidKey for an empty key or one over MaxKeyLen bytes,
// sending nothing"; Allow is "false for an invalid key".
func TestMisuseRefusedWithoutRoundTrip(t *testing.T) {
	srv := server(t)
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(3),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	long := strings.Repeat("k", redisbucket.MaxKeyLen+1)
	for _, c := range []struct {
		key  string
		cost int
		want error
	}{
		{"", 1, keyrate.ErrInvalidKey},
		{long, 1, keyrate.ErrInvalidKey},
		{"k", 0, keyrate.ErrInvalidCost},
		{"k", -7, keyrate.ErrInvalidCost},
		{"k", 4, keyrate.ErrCostExceedsBurst},
	} {
		d, err := s.AllowN(c.key, c.cost)
		if !errors.Is(err, c.want) || d.Allowed {
			t.Errorf("AllowN(%.10q, %d) = %+v, %v; want %v", c.key, c.cost, d, err, c.want)
		}
		if _, err := s.Reserve(c.key, c.cost, time.Second); !errors.Is(err, c.want) {
			t.Errorf("Reserve(%.10q, %d) = %v; want %v", c.key, c.cost, err, c.want)
		}
		if err := s.Refund(c.key, c.cost); c.cost != 1 && !errors.Is(err, c.want) {
			t.Errorf("Refund(%.10q, %d) = %v; want %v", c.key, c.cost, err, c.want)
		}
	}
	if s.Allow("") || s.Allow(long) {
		t.Error("Allow of an invalid key = true")
	}
	if st := s.Stats(); st.Calls != 0 || st.Errors != 0 || st.Degraded != 0 {
		t.Errorf("Stats after refused calls = %+v, want no calls, errors or degraded answers", st)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("Len() = %d after refused calls, want 0", n)
	}
	if !strings.Contains(func() string { _, err := s.AllowN(long, 1); return err.Error() }(), "512") {
		t.Error("the error for a long key does not name the bound 512")
	}
}

// "If ctx is done before Redis answers, it returns a zero Decision and an
// error wrapping ctx.Err(): the caller gave up, which is not an outage";
// "A nil context is context.Background(), for every method that takes
// one".
func TestMisuseContexts(t *testing.T) {
	srv := server(t)
	var failures []error
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(3),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout),
		redisbucket.WithFailurePolicy(redisbucket.FailOpen),
		redisbucket.WithOnError(func(err error) { failures = append(failures, err) }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := s.AllowNContext(ctx, "k", 1)
	if !errors.Is(err, context.Canceled) || errors.Is(err, redisbucket.ErrUnavailable) || d != (keyrate.Decision{}) {
		t.Errorf("AllowNContext(done ctx) = %+v, %v; want a zero Decision and context.Canceled, not an outage (FailOpen's pass)", d, err)
	}
	if st := s.Stats(); st.Degraded != 0 || st.Errors != 0 {
		t.Errorf("a caller's done context counted as an outage: %+v", st)
	}
	//nolint:staticcheck // a nil context is the documented case under test
	if d, err := s.AllowNContext(nil, "k", 1); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Errorf("AllowNContext(nil ctx) = %+v, %v; want allowed, 2 left", d, err)
	}
	//nolint:staticcheck // a nil context is the documented case under test
	if n, err := s.LenContext(nil); err != nil || n != 1 {
		t.Errorf("LenContext(nil) = %d, %v; want 1", n, err)
	}
	if len(failures) != 0 {
		t.Errorf("WithOnError told of %v", failures)
	}
}

// CancelContext "gives nothing back, sending nothing, for a reservation
// ... made ... by another store"; a reservation that is not OK or had no
// delay gives nothing back either.
func TestMisuseCancelOtherStores(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	prefix := uniquePrefix(t)
	a := mustNew(t, client, keyrate.PerMinute(1), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	b := mustNew(t, client, keyrate.PerMinute(1), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	local, err := mutexbucket.New(keyrate.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if !a.Allow("k") {
		t.Fatal("first request denied")
	}
	r, err := a.Reserve("k", 1, time.Hour)
	if err != nil || !r.OK() || r.Delay() <= 0 {
		t.Fatalf("Reserve = %+v, %v; want a delayed slot", r, err)
	}
	local.Allow("k")
	lr, _ := local.Reserve("k", 1, time.Hour)
	calls := a.Stats().Calls + b.Stats().Calls
	if b.Cancel(r) {
		t.Error("b.Cancel of a's reservation gave tokens back")
	}
	if a.Cancel(lr) {
		t.Error("a.Cancel of an in-process store's reservation gave tokens back")
	}
	if local.Cancel(r) {
		t.Error("an in-process store's Cancel of a's reservation gave tokens back")
	}
	if got := a.Stats().Calls + b.Stats().Calls; got != calls {
		t.Errorf("cancels of other stores' reservations made %d calls, want none", got-calls)
	}
	if !r.Cancel() {
		t.Error("a's own Cancel of its latest reservation gave nothing back")
	}
}

// Close: "It is a no-op without WithNodeCount, and after the first call";
// "The store still answers after Close". Close from several goroutines at
// once, while others call the store, neither races nor panics (run under
// -race).
func TestMisuseCloseConcurrent(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	for _, opts := range [][]keyrate.Option{nil, {redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithNodeCount(redisbucket.NodeCount{})}} {
		s := mustNew(t, client, keyrate.PerSecond(1000), append([]keyrate.Option{redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout)}, opts...)...)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				if err := s.Close(); err != nil {
					t.Errorf("Close() = %v", err)
				}
			}()
			go func() {
				defer wg.Done()
				if _, err := s.AllowN("k"+string(rune('a'+i)), 1); err != nil {
					t.Errorf("AllowN during Close = %v", err)
				}
			}()
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Errorf("a later Close() = %v", err)
		}
		if d, err := s.AllowN("after", 1); err != nil || !d.Allowed {
			t.Errorf("AllowN after Close = %+v, %v; want allowed", d, err)
		}
	}
}
