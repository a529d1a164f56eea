package keyrate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// A job dispatcher: a pool of workers drains per-tenant queues, each
// tenant at its own tier's limit. One dispatching goroutine per tenant
// Waits for the tenant's next token and hands the job to the pool, so a
// tenant over its limit waits its turn rather than being refused, and
// never holds up another tenant's queue. Wait sleeps on the store's clock
// and only when the tenant has no token left.
func Example_dispatcher() {
	free := keyrate.Limit{Rate: 100, Per: time.Second, Burst: 1}
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{{Rate: 1000, Per: time.Second, Burst: 10}}}
	tierOf := func(tenant string) string {
		if tenant == "acme" {
			return "pro"
		}
		return keyrate.DefaultPolicy // free
	}
	began := time.Now() // before the store: its clock starts after this
	store, err := atomicbucket.New(free, keyrate.WithPolicies(pro), keyrate.WithPolicyFunc(tierOf))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	queues := map[string]int{"acme": 50, "globex": 10, "initech": 10} // jobs queued per tenant
	type job struct {
		tenant string
		id     int
	}
	work := make(chan job)
	var (
		mu       sync.Mutex
		done     = map[string]int{}
		finished = map[string]time.Duration{}
		workers  sync.WaitGroup
		dispatch sync.WaitGroup
	)
	for range 4 { // the worker pool
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range work {
				mu.Lock() // the job's work would go here
				done[j.tenant]++
				mu.Unlock()
			}
		}()
	}
	ctx := context.Background()
	for tenant, jobs := range queues { // one dispatcher per tenant queue
		dispatch.Add(1)
		go func() {
			defer dispatch.Done()
			for id := range jobs {
				if err := store.Wait(ctx, tenant, 1); err != nil {
					fmt.Println(tenant, err)
					return
				}
				work <- job{tenant, id}
			}
			mu.Lock()
			finished[tenant] = time.Since(began)
			mu.Unlock()
		}()
	}
	dispatch.Wait()
	close(work)
	workers.Wait()

	// The least time each queue can take at its limit: the burst at once,
	// then one job per token interval. Wait never returns early.
	least := map[string]time.Duration{"acme": 40 * time.Millisecond, "globex": 90 * time.Millisecond, "initech": 90 * time.Millisecond}
	for _, tenant := range slices.Sorted(maps.Keys(queues)) {
		fmt.Printf("%s (%s): %d jobs, at its limit or slower: %v\n", tenant, tierOf(tenant), done[tenant], finished[tenant] >= least[tenant])
	}
	// Output:
	// acme (pro): 50 jobs, at its limit or slower: true
	// globex (default): 10 jobs, at its limit or slower: true
	// initech (default): 10 jobs, at its limit or slower: true
}

// Reserve hands out the earliest slot at which the tokens are there, up to
// a maximum wait, without sleeping: the caller decides what to do with the
// delay. Cancel gives back the tokens of the latest reservation.
func ExampleWaitLimiter_reserve() {
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.Limit{Rate: 1, Per: time.Second, Burst: 2}, keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	for range 4 {
		r, _ := store.Reserve("crawler", 1, 1500*time.Millisecond)
		fmt.Println("reserved:", r.OK(), "delay:", r.Delay())
	}
	r, _ := store.Reserve("crawler", 1, time.Minute)
	fmt.Println("with a minute to wait:", r.OK(), "delay:", r.Delay())
	fmt.Println("cancelled:", r.Cancel(), "again:", r.Cancel())
	// Output:
	// reserved: true delay: 0s
	// reserved: true delay: 0s
	// reserved: true delay: 1s
	// reserved: false delay: 2s
	// with a minute to wait: true delay: 2s
	// cancelled: true again: false
}

// Wait returns at once when the wait would pass the context's deadline,
// with an error that matches context.DeadlineExceeded, spending nothing.
func ExampleWaitLimiter_deadline() {
	store, err := atomicbucket.New(keyrate.PerMinute(1))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(store.Wait(ctx, "job", 1)) // the minute's token
	err = store.Wait(ctx, "job", 1)        // the next is a minute away
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, keyrate.ErrWaitExceedsDeadline))
	// Output:
	// <nil>
	// true true
}
