package redisbucket

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
)

// A call is one EVALSHA of gcraScript (logScript for a log policy), sent as a redis.IntSliceCmd through
// the client's Process: the reply's integers are read straight into an
// []int64, with none of redis.Script.Run's boxing of each one into an
// interface, and the arguments are built in a reused buffer of
// pre-converted values (the script's SHA, each plan's descriptor and
// windows), so that a call allocates little beyond what go-redis itself
// does (see BenchmarkRedis).

// scriptSHA is the script's SHA1, boxed once for every call.
var scriptSHA any = gcraScript.Hash()

// maxArgs is the most arguments a call sends: EVALSHA, the SHA, the number
// of keys, the key, six fixed arguments and four per window.
const maxArgs = 4 + 6 + 4*keyrate.MaxLimits

// argPool holds argument buffers of capacity maxArgs. A buffer goes back
// once Process has returned: go-redis reads a command's arguments only
// while it sends it (a hook that keeps a command past its return, to read
// its arguments later, would read another call's).
var argPool = sync.Pool{New: func() any {
	b := make([]any, 0, maxArgs)
	return &b
}}

// process sends cmd through c, bounded by ctx: straight out without a
// batcher b, else through b (see batcher.process, whose results it
// returns).
func process(ctx context.Context, c redis.UniversalClient, b *batcher, cmd *redis.IntSliceCmd) (err error, reuse bool) {
	if b == nil {
		return c.Process(ctx, cmd), true
	}
	return b.process(ctx, c, cmd)
}

// call sends args, a buffer from argPool that begins with "evalsha",
// the script's SHA (scriptSHA or logSHA), "1" and the key, through c,
// bounded by ctx; it sends them again as EVAL of the script's source src
// (through b too, within its turns) if the server answers NOSCRIPT
// (which loads the script there). It
// returns the reply's integers, and the buffer to the pool.
//
// With a batcher b (nil: none), the EVALSHA may go in a pipeline with
// other calls' (see batcher). If ctx ends while the command is in
// a pipeline, call returns ctx's error at once and leaves the buffer to
// the garbage collector, since the pipeline may still be writing it.
func call(ctx context.Context, c redis.UniversalClient, b *batcher, bp *[]any, args []any, src string) ([]int64, error) {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // a Cluster's slot: no parsing of the arguments
	err, reuse := process(ctx, c, b, cmd)
	if !reuse {
		return nil, err
	}
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		// Through the batcher too: after a SCRIPT FLUSH or a restart,
		// every call of a pipeline gets NOSCRIPT, and their EVALs (each
		// the script's whole source) stay within its turns.
		args[0], args[1] = "eval", src
		cmd = redis.NewIntSliceCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		if err, reuse = process(ctx, c, b, cmd); !reuse {
			return nil, err
		}
	}
	clear(args) // drops the references the buffer holds
	*bp = args[:0]
	argPool.Put(bp)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}
