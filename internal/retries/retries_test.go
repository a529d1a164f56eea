package retries

import (
	"sync"
	"testing"
)

// TestTotalSumsEveryShard: counts added under any spread value, from
// many goroutines at once, all reach Total.
func TestTotalSumsEveryShard(t *testing.T) {
	before := Total()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				Add(uint64(g*1000 + i))
			}
		}()
	}
	wg.Wait()
	if got := Total() - before; got != 8000 {
		t.Fatalf("Total grew by %d, want 8000", got)
	}
}
