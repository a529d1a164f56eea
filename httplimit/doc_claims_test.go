package httplimit_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/httplimit"
)

// The README and package documentation on failures: "A request without a
// key (a ByHeader header missing, an empty key) gets a 400 ..., a key
// function that fails gets a 500 — never an unlimited pass — and a store
// error (a full store, an unreachable Redis) gets a 503 with Retry-After";
// "a cost the limiter rejects ... goes to the error handler: 500". Checked on
// a real HTTP server; none of them reaches the handler.
func TestClaimFailuresNeverAdmit(t *testing.T) {
	store := newStore(t, keyrate.PerSecond(3))
	full := newStoreOpts(t, keyrate.PerSecond(3), keyrate.WithMaxKeys(1))
	reached := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++; io.WriteString(w, "ok") })
	byKey := func(r *http.Request) (string, error) {
		switch k := r.Header.Get("X-Key"); k {
		case "fail":
			return "", errors.New("lookup failed")
		default:
			return k, nil
		}
	}
	cost := func(r *http.Request) int {
		if r.Header.Get("X-Cost") == "big" {
			return 4
		}
		return 1
	}
	mux := http.NewServeMux()
	for path, l := range map[string]keyrate.Limiter{"/": store, "/full/": full} {
		mw, err := httplimit.New(l, httplimit.ByFunc(byKey), httplimit.WithCost(cost))
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle(path, mw(next))
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct {
		path, key, cost string
		code            int
		retryAfter      string
	}{
		{"/", "", "", http.StatusBadRequest, ""},
		{"/", "fail", "", http.StatusInternalServerError, ""},
		{"/", "alice", "big", http.StatusInternalServerError, ""},
		{"/full/", "alice", "", http.StatusOK, ""},
		{"/full/", "bob", "", http.StatusServiceUnavailable, "1"},
	} {
		req, _ := http.NewRequest("GET", srv.URL+c.path, nil)
		req.Header.Set("X-Key", c.key)
		req.Header.Set("X-Cost", c.cost)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get("Retry-After") != c.retryAfter {
			t.Errorf("%s key %q cost %q: %d, Retry-After %q; want %d, %q", c.path, c.key, c.cost, resp.StatusCode, resp.Header.Get("Retry-After"), c.code, c.retryAfter)
		}
	}
	if reached != 1 {
		t.Errorf("the handler was reached %d times, want once (alice on /full/)", reached)
	}
	if store.Len() != 0 {
		t.Errorf("refused requests stored %d keys", store.Len())
	}
}
