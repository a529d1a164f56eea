package ratelimitsvc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/ratelimitsvc"
)

func userConfig(perMinute int, extra string) string {
	return fmt.Sprintf(`
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: %d
%s`, perMinute, extra)
}

func mustParse(t *testing.T, yaml string) *ratelimitsvc.Config {
	t.Helper()
	c, err := ratelimitsvc.ParseConfig("api.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// remaining spends one request of user and returns what is left.
func (r *rig) remaining(t *testing.T, user string) (uint32, bool) {
	t.Helper()
	resp := r.call(t, "api", desc("user="+user))
	return resp.Statuses[0].LimitRemaining, resp.OverallCode == ok
}

// TestReloadCarries changes a rule's limit: a key keeps what it spent,
// carried to the new limit by SetPolicy, and a key moved to another rule
// (a new, more specific one) keeps it too: nothing is forgotten or
// minted.
func TestReloadCarries(t *testing.T) {
	r := newRig(t, "api.yaml", userConfig(10, ""))
	for range 6 {
		r.remaining(t, "alice")
		r.remaining(t, "bob")
	}
	if err := r.svc.Reload(mustParse(t, userConfig(8, ""))); err != nil {
		t.Fatal(err)
	}
	if left, allowed := r.remaining(t, "alice"); !allowed || left != 1 {
		t.Fatalf("alice after 6 of 10, moved to 8: %d left (allowed %v), want 1", left, allowed)
	}
	if err := r.svc.Reload(mustParse(t, userConfig(20, ""))); err != nil {
		t.Fatal(err)
	}
	if left, _ := r.remaining(t, "alice"); left != 12 {
		t.Fatalf("alice after 7, moved to 20: %d left, want 12", left)
	}
	// bob gets a rule of his own, of 7 a minute: he has spent 6.
	if err := r.svc.Reload(mustParse(t, userConfig(20, "  - key: user\n    value: bob\n    rate_limit: {unit: minute, requests_per_unit: 7}\n"))); err != nil {
		t.Fatal(err)
	}
	if left, allowed := r.remaining(t, "bob"); !allowed || left != 0 {
		t.Fatalf("bob after 6, moved to a rule of 7: %d left (allowed %v), want 0", left, allowed)
	}
	if _, allowed := r.remaining(t, "bob"); allowed {
		t.Fatal("bob was minted a token by his move")
	}
	// The next minute, each rule counts afresh.
	r.clock.Advance(time.Minute)
	if left, _ := r.remaining(t, "bob"); left != 6 {
		t.Fatalf("bob the next minute: %d left, want 6", left)
	}
}

// TestReloadKeepsLastGood: a config that cannot be read, or that the
// store refuses, changes nothing, and the outcome is counted.
func TestReloadKeepsLastGood(t *testing.T) {
	refuse := errors.New("the store refuses a limit of 13")
	r := newRig(t, "api.yaml", userConfig(10, ""), ratelimitsvc.WithValidate(func(ps []keyrate.Policy) error {
		for _, p := range ps {
			if p.Limits[0].Rate == 13 {
				return refuse
			}
		}
		return nil
	}))
	dir := t.TempDir()
	bad := writeFile(t, dir, "api.yaml", "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	err := r.svc.ReloadFiles(bad)
	if !errors.Is(err, ratelimitsvc.ErrInvalidConfig) || !strings.Contains(err.Error(), "api.yaml:4:24: invalid rate limit unit \"fortnight\"") {
		t.Fatalf("a bad file: %v", err)
	}
	if err := r.svc.Reload(mustParse(t, userConfig(13, ""))); !errors.Is(err, refuse) {
		t.Fatalf("a refused config: %v", err)
	}
	if left, _ := r.remaining(t, "alice"); left != 9 {
		t.Fatalf("after failed reloads, 10 a minute gives %d left, want 9", left)
	}
	good := writeFile(t, dir, "api.yaml", userConfig(3, ""))
	if err := r.svc.ReloadFiles(good); err != nil {
		t.Fatal(err)
	}
	if left, _ := r.remaining(t, "alice"); left != 1 {
		t.Fatalf("after 3 a minute: %d left, want 1", left)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.svc.Collector())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_rls_config_reloads_total Config loads, by result (success, or error: the last good config stays).
# TYPE keyrate_rls_config_reloads_total counter
keyrate_rls_config_reloads_total{result="error"} 2
keyrate_rls_config_reloads_total{result="success"} 2
# HELP keyrate_rls_config_rules Rules (rate_limit blocks) in the config in force.
# TYPE keyrate_rls_config_rules gauge
keyrate_rls_config_rules 1
`), "keyrate_rls_config_reloads_total", "keyrate_rls_config_rules"); err != nil {
		t.Fatal(err)
	}
}

// TestReloadUndoesHalfApplied: a store that refuses a policy half-way
// through a reload gets back the policies the reload had changed.
func TestReloadUndoesHalfApplied(t *testing.T) {
	two := func(a, b int) string {
		return fmt.Sprintf("domain: api\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: %d}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: %d}\n", a, b)
	}
	r := newRig(t, "api.yaml", two(5, 5))
	// api.a changes, then api.c's sliding log, which atomicbucket cannot
	// carry, makes SetPolicy fail.
	cfg := mustParse(t, two(6, 5)+"  - key: c\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding-log}\n")
	err := r.svc.Reload(cfg)
	if !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		t.Fatalf("a sliding log on atomicbucket: %v", err)
	}
	for _, p := range r.store.Policies() {
		if p.Name == "api.a" && p.Limits[0].Rate != 5 {
			t.Fatalf("api.a was left at %v", p)
		}
	}
	if got := r.svc.Config(); len(got.Rules()) != 2 {
		t.Fatalf("the config in force changed: %v", got.Rules())
	}
}

// TestReloadUnderLoad reloads while clients are deciding (run it with
// -race): every request is answered under one config or the other, and
// none fails.
func TestReloadUnderLoad(t *testing.T) {
	r := newRig(t, "api.yaml", userConfig(1000, ""))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := r.try("api", 0, desc(fmt.Sprintf("user=u%d", g)), desc("user=shared"))
				if err != nil {
					errs <- err
					return
				}
				if l := resp.Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 1000 && l != 2000 {
					errs <- fmt.Errorf("limit %d", l)
					return
				}
			}
		})
	}
	for i := range 50 {
		if err := r.svc.Reload(mustParse(t, userConfig(1000*(1+i%2), ""))); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestWatch reloads on a trigger (as SIGHUP sends one) and on a file
// change, reporting each outcome, and keeps the last good config after a
// bad file.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "api.yaml", userConfig(10, ""))
	r, trigger, reports := watchRig(t, path)
	limit := func() uint32 {
		return r.call(t, "api", desc("user=w")).Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}

	// A trigger: the file was rewritten without the watcher seeing it
	// yet; the trigger reloads at once.
	writeFile(t, dir, "api.yaml", userConfig(20, ""))
	trigger <- struct{}{}
	if err := waitReport(t, reports); err != nil {
		t.Fatal(err)
	}
	if l := limit(); l != 20 {
		t.Fatalf("after the trigger, limit %d", l)
	}

	// A bad file: reported, and the config stays. (The successes of the
	// rewrite's own events may still be on their way: the first error is
	// the bad file's.)
	writeFile(t, dir, "api.yaml", "domain: api\ndescriptors: [\n")
	err := waitReport(t, reports)
	for err == nil {
		err = waitReport(t, reports)
	}
	if !errors.Is(err, ratelimitsvc.ErrInvalidConfig) {
		t.Fatalf("a bad file reported %v", err)
	}
	if l := limit(); l != 20 {
		t.Fatalf("after a bad file, limit %d", l)
	}
	// A good one, written as editors and ConfigMaps do: a new file renamed
	// over the old.
	tmp := writeFile(t, dir, ".api.yaml.tmp", userConfig(30, ""))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for limit() != 30 {
		if time.Now().After(deadline) {
			t.Fatal("the renamed file was not reloaded within 30s")
		}
		select {
		case <-reports:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// watchRig loads the config at path into a rig and runs its service's
// Watch on path until the test ends (its error, if any, failing the
// test), with a trigger (SIGHUP's) and the channel of its reports.
func watchRig(t *testing.T, path string) (*rig, chan<- struct{}, <-chan error) {
	t.Helper()
	cfg, err := ratelimitsvc.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	r := newRigConfig(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan error, 64)
	done := make(chan error, 1)
	trigger := make(chan struct{})
	go func() { done <- r.svc.Watch(ctx, []string{path}, trigger, func(err error) { reports <- err }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return r, trigger, reports
}

// waitReport waits (up to 30s: the file system's events are the one
// thing a test must wait for) for the next report.
func waitReport(t *testing.T, reports <-chan error) error {
	t.Helper()
	select {
	case err := <-reports:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("no reload reported within 30s")
		return nil
	}
}

// TestReloadReorderedRules reloads a config whose two rules have paths
// that read alike (a key "a.b", and a key "a" with a child "b": both
// "api.a.b") in the other order. The rules did not change, so neither
// may lend the other its limits: a request that the Service decides
// while the reload is setting policies (the hook, after the first) is
// decided under its own rule's limits, and the descriptor of 2 a minute
// gets 2 in the minute.
func TestReloadReorderedRules(t *testing.T) {
	top := "  - key: a.b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	nested := "  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1000}\n"
	c := func(n int) string {
		return fmt.Sprintf("  - key: c\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", n)
	}
	r, h := newHookRig(t, "domain: api\ndescriptors:\n"+top+nested+c(5))
	admitted := 0
	spend := func() {
		resp, err := r.svc.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{desc("a.b=x")}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode == ok {
			admitted++
		}
	}
	spend()
	spend()
	hooked := false
	h.afterSetPolicy = func(keyrate.Policy) {
		hooked = true
		for range 5 {
			spend()
		}
	}
	// The same two rules, the other way round; c changes, so that the
	// reload sets a policy whatever it names the two.
	if err := r.svc.Reload(mustParse(t, "domain: api\ndescriptors:\n"+nested+top+c(6))); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		spend()
	}
	if !hooked {
		t.Fatal("the reload set no policy")
	}
	if admitted != 2 {
		t.Fatalf("a.b=x, 2 a minute, admitted %d times in the minute of a reload that reordered the rules", admitted)
	}
}

// TestReloadRenamedRulesBounded reloads, again and again, a config whose
// one rule changes its path each time (a value renamed, as a generated
// config does): the store may keep the policies of rules gone (a key
// counted under one is carried from it), but not without bound. A rule
// kept by every reload keeps its count throughout: nothing forgotten,
// nothing minted.
func TestReloadRenamedRulesBounded(t *testing.T) {
	cfg := func(i int) string {
		return userConfig(5, fmt.Sprintf("  - key: tenant\n    value: t%d\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", i, 1+i%3))
	}
	r := newRigConfig(t, mustParse(t, cfg(0)))
	for range 3 {
		r.remaining(t, "a")
	}
	for range 5 {
		r.remaining(t, "b")
	}
	n := ratelimitsvc.MaxRetiredPolicies + 40
	for i := 1; i <= n; i++ {
		if err := r.svc.Reload(mustParse(t, cfg(i))); err != nil {
			t.Fatal(err)
		}
		tenant := fmt.Sprintf("tenant=t%d", i)
		for j := range 4 {
			resp := r.call(t, "api", desc(tenant))
			if want := j < 1+i%3; (resp.OverallCode == ok) != want {
				t.Fatalf("reload %d: request %d of %s: %v, want admitted %v", i, j, tenant, resp.OverallCode, want)
			}
		}
	}
	// the default, the two rules in force and the retired ones
	if got, most := len(r.store.Policies()), 3+ratelimitsvc.MaxRetiredPolicies; got > most {
		t.Fatalf("after %d reloads renaming a rule, the store holds %d policies, more than %d", n, got, most)
	}
	if left, admitted := r.remaining(t, "a"); left != 1 || !admitted {
		t.Fatalf("user=a, 5 a minute, 3 spent before %d reloads: the 4th request left %d (admitted %v), want 1", n, left, admitted)
	}
	// user=b, spent in full, moves to a rule of its own, which takes a
	// retired policy over (the tenant's rule retires too): it carries
	// what it spent there.
	if err := r.svc.Reload(mustParse(t, userConfig(5, "  - key: user\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"))); err != nil {
		t.Fatal(err)
	}
	if got, most := len(r.store.Policies()), 3+ratelimitsvc.MaxRetiredPolicies; got > most {
		t.Fatalf("a new rule past MaxRetiredPolicies added a policy: %d, more than %d", got, most)
	}
	if resp := r.call(t, "api", desc("user=b")); resp.OverallCode != over {
		t.Fatalf("user=b, 5 spent of 5 a minute, moved to a rule of its own: %v, want OVER_LIMIT", resp)
	}
	// A rule retired and back, its policy taken over meanwhile (by
	// user=b's rule, if it took the first retired name): decided under
	// its own limit, user=b's rule keeping its count.
	userB := "  - key: user\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	if err := r.svc.Reload(mustParse(t, userConfig(5, userB+"  - key: tenant\n    value: t0\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"))); err != nil {
		t.Fatal(err)
	}
	for j, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		if resp := r.call(t, "api", desc("tenant=t0"), desc("user=b")); resp.Statuses[0].Code != want || resp.Statuses[1].Code != over {
			t.Fatalf("request %d of tenant=t0 (2 a minute) and user=b (spent): %v, want %v and OVER_LIMIT", j, resp, want)
		}
	}
	if got, most := len(r.store.Policies()), 4+ratelimitsvc.MaxRetiredPolicies; got > most {
		t.Fatalf("the store holds %d policies, more than %d", got, most)
	}
}

// TestReloadTakesNoPolicyInFlight reloads, while a request is on its way
// to the store, a config that drops the request's rule and adds one,
// with MaxRetiredPolicies retired already: the new rule takes a retired
// policy over, but not the dropped rule's, which the request in flight
// still decides with, under the config it started with.
func TestReloadTakesNoPolicyInFlight(t *testing.T) {
	tenant := func(v string, n int) string {
		return fmt.Sprintf("  - key: tenant\n    value: %s\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", v, n)
	}
	r, h := newHookRig(t, userConfig(5, ""))
	for i := range ratelimitsvc.MaxRetiredPolicies + 1 {
		if err := r.svc.Reload(mustParse(t, userConfig(5, tenant(fmt.Sprintf("t%d", i), 1)))); err != nil {
			t.Fatal(err)
		}
	}
	// tenant=a sorts before every retired rule's name.
	if err := r.svc.Reload(mustParse(t, userConfig(5, tenant("a", 1)))); err != nil {
		t.Fatal(err)
	}
	if resp := r.call(t, "api", desc("tenant=a")); resp.OverallCode != ok {
		t.Fatalf("tenant=a's first request: %v", resp)
	}
	h.beforeAllow = func() {
		if err := r.svc.Reload(mustParse(t, userConfig(5, tenant("z", 100)))); err != nil {
			t.Error(err)
		}
	}
	if resp := r.call(t, "api", desc("tenant=a")); resp.OverallCode != over {
		t.Fatalf("tenant=a's second request, 1 a minute, in flight across a reload adding a rule of 100: %v, want OVER_LIMIT", resp)
	}
	if resp := r.call(t, "api", desc("tenant=z")); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 99 {
		t.Fatalf("tenant=z, 100 a minute: %v", resp)
	}
	// tenant=z took a retired rule's policy over; that rule comes back
	// while a request of tenant=z, whose rule goes, is in flight: it
	// takes another policy, not its own while tenant=z decides with it.
	if err := r.svc.Reload(mustParse(t, userConfig(5, tenant("z", 7)))); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		r.call(t, "api", desc("tenant=z"))
	}
	back := ""
	for _, p := range r.store.Policies() {
		if p.Limits[0].Rate == 7 && strings.HasPrefix(p.Name, "api.tenant_t") {
			back = strings.TrimPrefix(p.Name, "api.tenant_")
		}
	}
	if back == "" {
		t.Fatal("tenant=z took no retired policy over")
	}
	h.beforeAllow = func() {
		if err := r.svc.Reload(mustParse(t, userConfig(5, tenant(back, 100)))); err != nil {
			t.Error(err)
		}
	}
	if resp := r.call(t, "api", desc("tenant=z")); resp.OverallCode != over {
		t.Fatalf("tenant=z's request, 7 a minute, spent, in flight across a reload bringing back %s, whose policy it took: %v, want OVER_LIMIT", back, resp)
	}
	if resp := r.call(t, "api", desc("tenant="+back)); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 99 {
		t.Fatalf("tenant=%s, 100 a minute: %v", back, resp)
	}
}

// TestWatchDirectoryRecreated removes the watched directory (the config
// given as a directory, or as a file in it) and makes it again, as
// `rm -rf conf && cp -r new conf` does: the watcher must see the new
// files, though the directory it watched is gone.
func TestWatchDirectoryRecreated(t *testing.T) {
	for _, asDir := range []bool{true, false} {
		t.Run(fmt.Sprintf("dir=%v", asDir), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "conf")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, dir, "api.yaml", userConfig(10, ""))
			if asDir {
				path = dir
			}
			r, trigger, reports := watchRig(t, path)
			trigger <- struct{}{} // taken once Watch watches
			if err := waitReport(t, reports); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			// The reload the removal causes fails: the directory is gone.
			for waitReport(t, reports) == nil {
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "api.yaml", userConfig(20, ""))
			deadline := time.Now().Add(30 * time.Second)
			for r.call(t, "api", desc("user=w")).Statuses[0].CurrentLimit.GetRequestsPerUnit() != 20 {
				if time.Now().After(deadline) {
					t.Fatal("the recreated directory's file was not reloaded within 30s")
				}
				select {
				case <-reports:
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}

// TestReloadRefusalNamesTheRule: a rule the store refuses (a sliding log
// on atomicbucket), or the WithValidate function refuses among the
// others, fails the reload with an error naming the rule's file and line,
// as every other config error does, and still wrapping the store's.
func TestReloadRefusalNamesTheRule(t *testing.T) {
	base := "domain: api\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	c := "  - key: c\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding-log}\n"
	r := newRig(t, "api.yaml", base)
	err := r.svc.Reload(mustParse(t, base+c))
	if !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) || !errors.Is(err, ratelimitsvc.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "api.yaml:6: rule api.c: ") {
		t.Errorf("a sliding log on atomicbucket: %v, want api.yaml:6: rule api.c: …, wrapping ErrUnsupportedAlgorithm and ErrInvalidConfig", err)
	}
	refuse := ratelimitsvc.WithValidate(func(ps []keyrate.Policy) error {
		for _, p := range ps {
			if p.Limits[0].Rate == 7 {
				return fmt.Errorf("%w: %q: 7 is unlucky", keyrate.ErrInvalidPolicy, p.Name)
			}
		}
		return nil
	})
	r = newRig(t, "api.yaml", base, refuse)
	c = "  - key: c\n    rate_limit: {unit: second, requests_per_unit: 7}\n"
	err = r.svc.Reload(mustParse(t, base+c))
	if !errors.Is(err, keyrate.ErrInvalidPolicy) || !strings.HasPrefix(err.Error(), "api.yaml:6: rule api.c: ") {
		t.Errorf("a rule WithValidate refuses: %v, want api.yaml:6: rule api.c: …", err)
	}
}

// TestWatchConfigMapSwap updates the config as the kubelet updates a
// mounted ConfigMap: the files live in a timestamped directory, "..data"
// links to it and each file links through "..data"; an update writes a
// new directory, swaps "..data" by a rename and removes the old one. The
// config given as the directory or as the file link is reloaded.
func TestWatchConfigMapSwap(t *testing.T) {
	swap := func(t *testing.T, dir, ts, content string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, ts), "api.yaml", content)
		if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	for _, asDir := range []bool{true, false} {
		t.Run(fmt.Sprintf("dir=%v", asDir), func(t *testing.T) {
			dir := t.TempDir()
			swap(t, dir, "..2026_11_29_01", userConfig(10, ""))
			if err := os.Symlink("..data/api.yaml", filepath.Join(dir, "api.yaml")); err != nil {
				t.Fatal(err)
			}
			path := dir
			if !asDir {
				path = filepath.Join(dir, "api.yaml")
			}
			r, trigger, reports := watchRig(t, path)
			trigger <- struct{}{} // taken once Watch watches
			if err := waitReport(t, reports); err != nil {
				t.Fatal(err)
			}
			swap(t, dir, "..2026_11_29_02", userConfig(20, ""))
			if err := os.RemoveAll(filepath.Join(dir, "..2026_11_29_01")); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for r.call(t, "api", desc("user=w")).Statuses[0].CurrentLimit.GetRequestsPerUnit() != 20 {
				if time.Now().After(deadline) {
					t.Fatal("the swapped ConfigMap was not reloaded within 30s")
				}
				select {
				case <-reports:
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}
