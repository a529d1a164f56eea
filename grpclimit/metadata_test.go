package grpclimit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// TestMetadataClientChoices: what a client can put in its metadata, over
// a real server: several values of the key (the first is the key; the
// others spend nothing), the key's name in another case (grpc lowers it:
// the same bucket), a binary "-bin" key of the same stem (not the key), a
// large value (its own bucket, no panic) and many other entries. None
// lets a client escape its bucket, and none panics.
func TestMetadataClientChoices(t *testing.T) {
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: 1 << 40, Burst: 2})
	in, err := grpclimit.New(store, grpclimit.ByMetadata("X-Api-Key"))
	require.NoError(t, err)
	client := serve(t, in)
	md := func(kv ...string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), kv...)
	}

	require.Equal(t, codes.OK, check(md("x-api-key", "alice", "x-api-key", "bob"), client).Code())
	assert.Equal(t, 1, store.Peek("alice").Remaining, "the first value is the key")
	assert.Equal(t, 1, store.Len(), "the second value spends nothing")

	require.Equal(t, codes.OK, check(md("X-API-KEY", "alice"), client).Code())
	require.Equal(t, codes.ResourceExhausted, check(md("x-Api-key", "alice"), client).Code(),
		"the key's name in any case is the same key")
	require.Equal(t, codes.ResourceExhausted, check(md("x-api-key", "alice", "x-api-key", "carol"), client).Code(),
		"a second value does not escape the first's bucket")

	assert.Equal(t, codes.InvalidArgument, check(md("x-api-key-bin", "alice"), client).Code(),
		"a binary entry of the same stem is not the key")

	big := strings.Repeat("k", 64<<10)
	require.Equal(t, codes.OK, check(md("x-api-key", big), client).Code(), "a 64 KiB key")
	assert.Equal(t, 1, store.Peek(big).Remaining)

	many := []string{"x-api-key", "dave"}
	for i := range 500 {
		many = append(many, "x-other", strings.Repeat("v", i%50+1))
	}
	require.Equal(t, codes.OK, check(md(many...), client).Code(), "500 other entries")
	assert.Equal(t, 1, store.Peek("dave").Remaining)
	assert.Equal(t, 3, store.Len(), "alice, the 64 KiB key and dave")
}
