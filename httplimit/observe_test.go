package httplimit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestObserverServer: over a real server, the observer gets one event per
// request: allowed, denied, and a request without a key, which carries
// ErrNoKey (and keyrate.ErrInvalidKey); in shadow mode the denial is
// marked Shadow and served.
func TestObserverServer(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		var log conformance.Recorder
		opts := []Option{ByHeader("X-Key"), WithObserver(&log)}
		if shadow {
			opts = append(opts, WithShadow(nil))
		}
		h, _, served := newLimited(t, keyrate.PerMinute(1), opts...)
		url, client := startServer(t, h, 1)
		get := func(key string) int {
			req, _ := http.NewRequest("GET", url, nil)
			if key != "" {
				req.Header.Set("X-Key", key)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		codes := []int{get("alice"), get("alice"), get("")}
		want := []int{200, 429, 400}
		if shadow {
			want = []int{200, 200, 200}
		}
		if !slices.Equal(codes, want) {
			t.Errorf("shadow=%v: status codes %v, want %v", shadow, codes, want)
		}
		events := log.Take()
		if len(events) != 3 {
			t.Fatalf("shadow=%v: %d events, want 3: %+v", shadow, len(events), events)
		}
		def := keyrate.DefaultPolicy
		for i, w := range []keyrate.Event{
			{Key: "alice", Policy: def, Cost: 1, Allowed: true, Shadow: shadow},
			{Key: "alice", Policy: def, Cost: 1, Shadow: shadow},
			{Policy: def, Shadow: shadow},
		} {
			e := events[i]
			err := e.Err
			e.Err = nil
			if e != w {
				t.Errorf("shadow=%v: event %d %+v, want %+v", shadow, i, e, w)
			}
			if wantErr := i == 2; (err != nil) != wantErr || wantErr && !(errors.Is(err, ErrNoKey) && errors.Is(err, keyrate.ErrInvalidKey)) {
				t.Errorf("shadow=%v: event %d error %v", shadow, i, err)
			}
		}
		if want := map[bool]int{false: 1, true: 3}[shadow]; *served != want {
			t.Errorf("shadow=%v: served %d, want %d", shadow, *served, want)
		}
	}
}

func TestObserverTypedNil(t *testing.T) {
	lim, err := atomicbucket.New(keyrate.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(lim, WithObserver(&conformance.Recorder{})); err != nil {
		t.Fatalf("WithObserver(an observer): %v", err)
	}
	var l *conformance.Recorder
	if _, err := New(lim, WithObserver(l)); !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Fatalf("WithObserver(a nil *conformance.Recorder): New returned %v, want ErrInvalidOption", err)
	}
}

// TestObserverKeyFailure: a request the key function fails on (here a
// client address that does not parse, and a ByFunc error) is reported as a
// key failure, with Err wrapping keyrate.ErrInvalidKey as well as the
// key function's error, so that an observer (keyrateprom) does not count
// it as a store's failure; the response is the key failure's 500.
func TestObserverKeyFailure(t *testing.T) {
	errLookup := errors.New("lookup failed")
	for name, tc := range map[string]struct {
		opt  Option
		want error
	}{
		"ByIP":   {nil, ErrBadAddress},
		"ByFunc": {ByFunc(func(*http.Request) (string, error) { return "", errLookup }), errLookup},
	} {
		var log conformance.Recorder
		h, _, served := newLimited(t, keyrate.PerMinute(1), tc.opt, WithObserver(&log))
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "not an address"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusInternalServerError || *served != 0 {
			t.Errorf("%s: status %d, served %d; want 500, not served", name, w.Code, *served)
		}
		events := log.Take()
		if len(events) != 1 {
			t.Fatalf("%s: %d events, want 1: %+v", name, len(events), events)
		}
		if err := events[0].Err; !errors.Is(err, keyrate.ErrInvalidKey) || !errors.Is(err, tc.want) {
			t.Errorf("%s: event error %v; want one wrapping keyrate.ErrInvalidKey and %v", name, err, tc.want)
		}
	}
}
