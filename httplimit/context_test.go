package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
)

// ctxStore is an in-process store that also takes contexts, as
// redisbucket.Store does, and records the context of each call.
type ctxStore struct {
	*atomicbucket.Store
	seen []context.Context
}

func (s *ctxStore) AllowNContext(ctx context.Context, key string, cost int) (keyrate.Decision, error) {
	s.seen = append(s.seen, ctx)
	return s.AllowN(key, cost)
}

func (s *ctxStore) AllowTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	s.seen = append(s.seen, ctx)
	return s.AllowTier(key, tier, cost)
}

func (s *ctxStore) RefundContext(ctx context.Context, key string, cost int) error {
	s.seen = append(s.seen, ctx)
	return s.Refund(key, cost)
}

func (s *ctxStore) RefundTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) error {
	s.seen = append(s.seen, ctx)
	return s.RefundTier(key, tier, cost)
}

type ctxMark struct{}

// TestRequestContextReachesStore: a store that takes a context gets the
// request's, for the decision (with and without a tier) and for a refund.
func TestRequestContextReachesStore(t *testing.T) {
	for _, tiered := range []bool{false, true} {
		inner, err := atomicbucket.New(keyrate.PerMinute(10), keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(20)}}))
		if err != nil {
			t.Fatal(err)
		}
		defer inner.Close()
		store := &ctxStore{Store: inner}
		opts := []Option{ByHeader("X-Key"), WithRefunds()}
		if tiered {
			opts = append(opts, WithTier(func(*http.Request) string { return "pro" }))
		}
		mw, err := New(store, opts...)
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := Refund(r, 1); err != nil {
				t.Errorf("Refund: %v", err)
			}
		}))
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Key", "k")
		req = req.WithContext(context.WithValue(req.Context(), ctxMark{}, "request"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("tiered %v: status %d, want 200", tiered, rec.Code)
		}
		if len(store.seen) != 2 {
			t.Fatalf("tiered %v: the store took %d contexts, want 2 (the decision and the refund)", tiered, len(store.seen))
		}
		for i, ctx := range store.seen {
			if ctx.Value(ctxMark{}) != "request" {
				t.Errorf("tiered %v: call %d got a context that is not the request's", tiered, i)
			}
		}
		if d := inner.Peek("k"); d.Remaining != d.Limit.Burst {
			t.Errorf("tiered %v: after the refund Peek = %+v, want a full bucket", tiered, d)
		}
	}
}

// TestNoKeyHandler: WithNoKeyHandler answers a request without a key.
func TestNoKeyHandler(t *testing.T) {
	store, err := atomicbucket.New(keyrate.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mw, err := New(store, ByHeader("X-Key"), WithNoKeyHandler(func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusUnauthorized || store.Len() != 0 {
		t.Fatalf("a request without X-Key: status %d, %d keys stored; want 401, none", rec.Code, store.Len())
	}
}
