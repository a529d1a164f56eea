package grpclimit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestObserver: over a real gRPC server, one event per call: allowed,
// denied, and a call without a key (ErrNoKey, which is
// keyrate.ErrInvalidKey); under WithShadow the denial is marked Shadow and
// the call goes through.
func TestObserver(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		store, _ := newStore(t, keyrate.PerMinute(1))
		var log conformance.Recorder
		opts := []grpclimit.Option{grpclimit.ByMetadata("x-api-key"), grpclimit.WithObserver(&log)}
		if shadow {
			opts = append(opts, grpclimit.WithShadow(nil))
		}
		in, err := grpclimit.New(store, opts...)
		require.NoError(t, err)
		c := serve(t, in)
		codesGot := []codes.Code{
			check(withKey("alice"), c).Code(),
			check(withKey("alice"), c).Code(),
			check(context.Background(), c).Code(),
		}
		want := []codes.Code{codes.OK, codes.ResourceExhausted, codes.InvalidArgument}
		if shadow {
			want = []codes.Code{codes.OK, codes.OK, codes.OK}
		}
		assert.Equal(t, want, codesGot, "shadow=%v", shadow)

		events := log.Take()
		require.Len(t, events, 3, "shadow=%v", shadow)
		def := keyrate.DefaultPolicy
		for i, w := range []keyrate.Event{
			{Key: "alice", Policy: def, Cost: 1, Allowed: true, Shadow: shadow},
			{Key: "alice", Policy: def, Cost: 1, Shadow: shadow},
			{Policy: def, Shadow: shadow},
		} {
			e := events[i]
			err := e.Err
			e.Err = nil
			assert.Equal(t, w, e, "shadow=%v event %d", shadow, i)
			if i == 2 {
				assert.ErrorIs(t, err, grpclimit.ErrNoKey)
				assert.ErrorIs(t, err, keyrate.ErrInvalidKey)
			} else {
				assert.NoError(t, err)
			}
		}
	}
}

func TestObserverTypedNil(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(1))
	var l *conformance.Recorder
	_, err := grpclimit.New(store, grpclimit.WithObserver(l))
	require.ErrorIs(t, err, keyrate.ErrInvalidOption)
}

// TestObserverKeyFailure: a call the key function fails on (a ByFunc
// error) is reported as a key failure, with Err wrapping
// keyrate.ErrInvalidKey as well as the key function's error, so that an
// observer (keyrateprom) does not count it as a store's failure.
func TestObserverKeyFailure(t *testing.T) {
	errLookup := errors.New("lookup failed")
	store, _ := newStore(t, keyrate.PerMinute(1))
	var log conformance.Recorder
	in, err := grpclimit.New(store, grpclimit.WithObserver(&log),
		grpclimit.ByFunc(func(context.Context, string) (string, error) { return "", errLookup }))
	require.NoError(t, err)
	assert.Equal(t, codes.Internal, check(context.Background(), serve(t, in)).Code())
	events := log.Take()
	require.Len(t, events, 1)
	assert.ErrorIs(t, events[0].Err, keyrate.ErrInvalidKey)
	assert.ErrorIs(t, events[0].Err, errLookup)
}
