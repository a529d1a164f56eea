package grpclimit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// TestByMetadataInvalidName: a name no metadata key can have (gRPC keys
// are [0-9a-z-_.], lowered, or a pseudo-header such as ":authority") can
// never be found, so every call would end InvalidArgument: a silent deny
// of all traffic from a typo. New refuses it with ErrInvalidOption, as
// httplimit.ByHeader refuses a name that is not a header field name; so
// too a non-ASCII name that strings.ToLower would lower to ASCII (the
// Kelvin sign).
func TestByMetadataInvalidName(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(10))
	for _, name := range []string{"x api key", "x-api-key\n", "x-api-key:", "ключ", "x\x00key", " x-api-key", "\u212a-key"} {
		in, err := grpclimit.New(store, grpclimit.ByMetadata(name))
		assert.ErrorIs(t, err, keyrate.ErrInvalidOption, "ByMetadata(%q)", name)
		assert.Nil(t, in, "ByMetadata(%q)", name)
	}
	for _, name := range []string{"X-Api-Key", "x.api_key-1", ":authority"} {
		_, err := grpclimit.New(store, grpclimit.ByMetadata(name))
		assert.NoError(t, err, "ByMetadata(%q)", name)
	}
}

// TestByMetadataLowersName: as ByMetadata's doc says, the name is lowered
// as grpc/metadata lowers keys. Not lowered, it would miss the direct map
// lookup, and grpc/metadata would fall back to scanning every entry for
// one equal in any case, picking among case variants (metadata an earlier
// interceptor built by hand) in map order: a different key from call to
// call.
func TestByMetadataLowersName(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(1000))
	in, err := grpclimit.New(store, grpclimit.ByMetadata("X-API-Key"))
	require.NoError(t, err)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{
		"x-api-key": {"alice"},
		"X-Api-Key": {"mallory"},
		"X-API-KEY": {"mallory"},
	})
	for range 64 {
		_, err := in.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
			func(context.Context, any) (any, error) { return nil, nil })
		require.NoError(t, err)
	}
	assert.Equal(t, 1, store.Len(), "one key")
	assert.Equal(t, 1000-64, store.Peek("alice").Remaining, "the lower-case entry's, every call")
}
