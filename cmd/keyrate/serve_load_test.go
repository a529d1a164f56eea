package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
)

// do sends method url with body and the header lines hdr (name,
// value...), and returns the status, or an error where the test's
// goroutine is not the caller's (no t.Fatal off the test goroutine).
func do(client *http.Client, method, url string, body io.Reader, hdr ...string) (int, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// metricLines returns the sample lines of GET /metrics.
func metricLines(t *testing.T, client *http.Client, url string) []string {
	t.Helper()
	code, body := getBody(t, client, url+"metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: status %d", code)
	}
	return strings.Split(body, "\n")
}

// TestServeConcurrent: concurrent clients of one key, on a frozen clock,
// with /metrics scraped among them: exactly the burst is admitted (never
// more), every other request gets 429, and /metrics adds up to what the
// clients were answered. A bounded stress run: request counts, no timing.
func TestServeConcurrent(t *testing.T) {
	defer leaktest.Verify(t)
	const (
		burst    = 60
		clients  = 4
		requests = 50
	)
	c, err := parseServe([]string{"-rate", "1", "-per", "1h", "-burst", fmt.Sprint(burst), "-key", "header:X-API-Key"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	url, client, stop := startServe(t, c)
	defer stop()

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[int]int{}
	)
	for i := range clients {
		wg.Go(func() {
			for j := range requests {
				path := url
				if j%10 == 0 && i == 0 {
					path = url + "metrics" // a scrape among the requests
				}
				code, err := do(client, "GET", path, nil, "X-API-Key", "alice")
				if err != nil {
					t.Error(err)
					return
				}
				if path == url {
					mu.Lock()
					got[code]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := clients*requests - requests/10
	if got[200] != burst || got[429] != total-burst || len(got) != 2 {
		t.Errorf("answers %v, want %d of 200 and %d of 429", got, burst, total-burst)
	}
	lines := metricLines(t, client, url)
	for _, want := range []string{
		fmt.Sprintf(`keyrate_decisions_total{decision="allowed",policy="default",store="serve"} %d`, burst),
		fmt.Sprintf(`keyrate_decisions_total{decision="denied",policy="default",store="serve"} %d`, total-burst),
		`keyrate_keys{store="serve"} 1`,
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
}

// TestServeHugeRequests: a key of 900 KiB (a header just under net/http's
// 1 MiB limit) is decided and stored as any other, and a request with a
// 200 KiB body is decided without the body being read; the server goes on
// serving. (Sizes the server reads whole, so that no reset races the
// answer: a header over the limit is net/http's 431, not keyrate's.)
func TestServeHugeRequests(t *testing.T) {
	defer leaktest.Verify(t)
	c, err := parseServe([]string{"-rate", "2", "-per", "1h", "-key", "header:X-API-Key"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	url, client, stop := startServe(t, c)
	defer stop()

	big := strings.Repeat("k", 900<<10)
	for i, want := range []int{200, 200, 429} {
		if code, err := do(client, "GET", url, nil, "X-API-Key", big); err != nil || code != want {
			t.Errorf("900 KiB key, request %d: %d %v, want %d", i, code, err, want)
		}
	}
	for i, want := range []int{200, 200, 429} {
		code, err := do(client, "POST", url, strings.NewReader(strings.Repeat("b", 200<<10)), "X-API-Key", "alice")
		if err != nil || code != want {
			t.Errorf("200 KiB body, request %d: %d %v, want %d", i, code, err, want)
		}
	}
	if lines := metricLines(t, client, url); !slices.Contains(lines, `keyrate_keys{store="serve"} 2`) {
		t.Errorf("GET /metrics: want 2 keys, got\n%s", strings.Join(lines, "\n"))
	}
}

// TestServeTierNamesBounded: a client that names tiers of its own (the
// tier header is the client's here) gets the default policy for each, and
// /metrics gains no policy label per made-up name, nor one for a name
// that is not UTF-8.
func TestServeTierNamesBounded(t *testing.T) {
	defer leaktest.Verify(t)
	path := writeFile(t, "tiers.txt", tiersFile)
	c, err := parseServe([]string{"-rate", "1000", "-per", "1h", "-policies", path, "-tier-header", "X-Plan"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	url, client, stop := startServe(t, c)
	defer stop()
	for i := range 200 {
		tier := fmt.Sprint("made-up-", i)
		if i%50 == 0 {
			tier = "\xff\xfe" + tier
		}
		if code, err := do(client, "GET", url, nil, "X-Plan", tier); err != nil || code != 200 {
			t.Fatalf("tier %q: %d %v, want 200", tier, code, err)
		}
	}
	var policies []string
	for _, l := range metricLines(t, client, url) {
		if rest, ok := strings.CutPrefix(l, `keyrate_decisions_total{decision="allowed",policy="`); ok {
			policies = append(policies, rest[:strings.IndexByte(rest, '"')])
		}
	}
	if !slices.Equal(policies, []string{"default"}) {
		t.Errorf("policy labels %q, want only default", policies)
	}
}
