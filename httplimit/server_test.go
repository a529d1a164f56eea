package httplimit

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// startServer serves h on a fresh loopback port and returns its base URL
// and a client for it. Both are shut down when the test ends.
func startServer(t *testing.T, h http.Handler, clients int) (string, *http.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
		if err := <-done; err != http.ErrServerClosed {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return "http://" + ln.Addr().String(), &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestServerHeaders checks the fields as a real client receives them.
func TestServerHeaders(t *testing.T) {
	h, clk, _ := newLimited(t, keyrate.PerMinute(3), WithLegacyHeaders())
	url, client := startServer(t, h, 1)
	steps := []struct {
		advance time.Duration
		status  int
		fields  map[string]string
	}{
		{0, 200, map[string]string{"RateLimit-Policy": `"default";q=3;w=60`, "RateLimit": `"default";r=2;t=20`, "X-RateLimit-Remaining": "2", "Retry-After": ""}},
		{0, 200, map[string]string{"RateLimit": `"default";r=1;t=40`}},
		{0, 200, map[string]string{"RateLimit": `"default";r=0;t=60`, "X-RateLimit-Reset": "60"}},
		{0, 429, map[string]string{"RateLimit": `"default";r=0;t=20`, "Retry-After": "20", "X-RateLimit-Limit": "3", "X-RateLimit-Reset": "20", "Content-Type": "text/plain; charset=utf-8"}},
		{19*time.Second + 1, 429, map[string]string{"Retry-After": "1"}},
		{time.Second, 200, map[string]string{"RateLimit": `"default";r=0;t=60`, "Retry-After": ""}},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("step %d: GET: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.status {
			t.Errorf("step %d: status %d, want %d", i, resp.StatusCode, s.status)
		}
		for name, want := range s.fields {
			if got := resp.Header.Get(name); got != want {
				t.Errorf("step %d: %s %q, want %q", i, name, got, want)
			}
		}
	}
}

// TestLoad sends clients×perClient concurrent requests on one key over
// loopback at one frozen instant, for each store: exactly Burst are
// allowed, each seeing a different Remaining, and every deny says
// Retry-After 1.
func TestLoad(t *testing.T) {
	const clients, perClient, burst = 32, 4, 20
	limit := keyrate.Limit{Rate: 1, Per: time.Second, Burst: burst}
	stores := []struct {
		name string
		new  func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error)
	}{
		{"atomic", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return atomicbucket.New(l, o...) }},
		{"mutex", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return mutexbucket.New(l, o...) }},
		{"striped", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return striped.New(l, o...) }},
	}
	for _, st := range stores {
		t.Run("store="+st.name, func(t *testing.T) {
			lim, err := st.new(limit, keyrate.WithClock(clock.NewManual(time.Hour)))
			if err != nil {
				t.Fatal(err)
			}
			mw, err := New(lim)
			if err != nil {
				t.Fatal(err)
			}
			url, client := startServer(t, mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, "ok")
			})), clients)

			var (
				mu        sync.Mutex
				remaining []int
				denied    int
				failures  []string
				start     = make(chan struct{})
				wg        sync.WaitGroup
			)
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for range perClient {
						resp, err := client.Get(url)
						if err != nil {
							mu.Lock()
							failures = append(failures, err.Error())
							mu.Unlock()
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						mu.Lock()
						switch ra := resp.Header.Get("Retry-After"); {
						case resp.StatusCode == 200 && ra == "":
							var r, tt int
							if _, err := fmt.Sscanf(resp.Header.Get("RateLimit"), `"default";r=%d;t=%d`, &r, &tt); err != nil {
								failures = append(failures, "RateLimit "+strconv.Quote(resp.Header.Get("RateLimit")))
							}
							remaining = append(remaining, r)
						case resp.StatusCode == 429 && ra == "1":
							denied++
						default:
							failures = append(failures, fmt.Sprintf("status %d with Retry-After %q", resp.StatusCode, ra))
						}
						mu.Unlock()
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(failures) > 0 {
				t.Fatalf("%d bad responses, first: %s", len(failures), failures[0])
			}
			if len(remaining) != burst || denied != clients*perClient-burst {
				t.Errorf("%d allowed and %d denied, want exactly %d and %d", len(remaining), denied, burst, clients*perClient-burst)
			}
			slices.Sort(remaining)
			for i, r := range remaining {
				if r != i {
					t.Fatalf("allowed responses' Remaining values %v, want each of 0..%d once", remaining, burst-1)
				}
			}
		})
	}
}
