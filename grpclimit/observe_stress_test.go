package grpclimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestObserverConcurrentCalls: concurrent clients of one key on a frozen
// clock, over a real server: exactly Burst calls are admitted, and the
// observer hears of every call once, its Allowed matching what the client
// was answered, no event lost or doubled. A bounded stress run: call
// counts, no timing.
func TestObserverConcurrentCalls(t *testing.T) {
	const (
		burst   = 60
		clients = 4
		calls   = 50
	)
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: time.Hour, Burst: burst})
	var log conformance.Recorder
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"), grpclimit.WithObserver(&log))
	require.NoError(t, err)
	client := serve(t, in)

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[codes.Code]int{}
	)
	for range clients {
		wg.Go(func() {
			for range calls {
				c := check(withKey("alice"), client).Code()
				mu.Lock()
				got[c]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	events := log.Take()
	require.Len(t, events, clients*calls, "one event per call")
	allowed := 0
	for _, e := range events {
		if e.Allowed {
			allowed++
		}
		assert.NoError(t, e.Err)
		assert.Equal(t, "alice", e.Key)
	}
	assert.Equal(t, burst, allowed, "allowed events")
	assert.Equal(t, burst, got[codes.OK], "OK answers: never more than the burst")
	assert.Equal(t, clients*calls-burst, got[codes.ResourceExhausted], "ResourceExhausted answers")
	assert.Len(t, got, 2, "no other code: %v", got)
}
