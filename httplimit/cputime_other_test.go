//go:build !unix

package httplimit

import "time"

// processCPU returns 0: CPU time is not read on this platform.
func processCPU() time.Duration { return 0 }
