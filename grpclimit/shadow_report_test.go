package grpclimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// TestShadowDenialReportsNilErr: as ShadowFunc's doc says, a denied call
// is reported with its decision (d.Allowed false) and a nil err, err being
// kept for calls that could not be decided (as httplimit's ShadowFunc
// does), so that a report function can tell a would-be denial from a
// failure by err.
func TestShadowDenialReportsNilErr(t *testing.T) {
	type report struct {
		d   keyrate.Decision
		err error
	}
	var (
		mu      sync.Mutex
		reports []report
	)
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: time.Minute, Burst: 1})
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"),
		grpclimit.WithShadow(func(_ context.Context, _ string, d keyrate.Decision, err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, report{d, err})
		}))
	require.NoError(t, err)
	client := serve(t, in)
	require.Equal(t, codes.OK, check(withKey("alice"), client).Code())
	require.Equal(t, codes.OK, check(withKey("alice"), client).Code(), "shadow mode lets the denial through")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reports, 1)
	assert.False(t, reports[0].d.Allowed)
	assert.Equal(t, time.Minute, reports[0].d.RetryAfter)
	assert.NoError(t, reports[0].err, "a denial is reported with a nil err")
}
