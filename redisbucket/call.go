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

// call sends args, a buffer from argPool that begins with "evalsha",
// the script's SHA (scriptSHA or logSHA), "1" and the key, through c,
// bounded by ctx; it sends them again as EVAL of the script's source src
// if the server answers NOSCRIPT (which loads the script there). It
// returns the reply's integers, and the buffer to the pool.
//
// With a batcher b (nil: none), the EVALSHA may go in a pipeline with
// other calls' (see batcher), and the EVAL goes on the same turn. If ctx
// ends while the command is in a pipeline, call returns ctx's error at
// once and leaves the buffer to the garbage collector, since the
// pipeline may still be writing it.
func call(ctx context.Context, c redis.UniversalClient, b *batcher, bp *[]any, args []any, src string) ([]int64, error) {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // a Cluster's slot: no parsing of the arguments
	err, reuse := error(nil), true
	if b == nil {
		err = evalsha(ctx, c, cmd, src)
	} else if err, reuse = b.process(ctx, c, cmd, src); !reuse {
		return nil, err
	}
	clear(args) // drops the references the buffer holds
	*bp = args[:0]
	argPool.Put(bp)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// evalsha sends cmd, an EVALSHA, through c, bounded by ctx; if the server
// answers NOSCRIPT, it sends cmd's arguments again as EVAL of the script's
// source src (which loads the script there), with the reply in cmd.
func evalsha(ctx context.Context, c redis.UniversalClient, cmd *redis.IntSliceCmd, src string) error {
	if err := c.Process(ctx, cmd); !noScript(err) {
		return err
	}
	e := asEval(ctx, cmd, src)
	_ = c.Process(ctx, e)
	cmd.SetVal(e.Val())
	cmd.SetErr(e.Err())
	return e.Err()
}

// noScript reports whether err is the server's NOSCRIPT: it lacks the
// script of an EVALSHA.
func noScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// asEval returns cmd, an EVALSHA, as EVAL of src, the script's source,
// on cmd's arguments (which it changes).
func asEval(ctx context.Context, cmd *redis.IntSliceCmd, src string) *redis.IntSliceCmd {
	args := cmd.Args()
	args[0], args[1] = "eval", src
	e := redis.NewIntSliceCmd(ctx, args...)
	e.SetFirstKeyPos(3)
	return e
}
