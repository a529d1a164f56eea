package mutexbucket

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// LockedBucket is a key's bucket whose lock a test holds.
type LockedBucket struct{ b *bucket }

// LockBucket takes the lock of key's bucket, as a spend would, and
// returns it held; ok is false if s holds no bucket for key.
func LockBucket(s *Store, key string) (l LockedBucket, ok bool) {
	b, ok := s.buckets.Load(key)
	if !ok {
		return l, false
	}
	b.mu.Lock()
	return LockedBucket{b}, true
}

// Unlock lets go of the bucket's lock.
func (l LockedBucket) Unlock() { l.b.mu.Unlock() }

// Spend spends cost tokens from the one-window bucket under its held lock,
// at a fresh reading of its clock, as another request holding the lock
// would, and reports whether it did.
func (l LockedBucket) Spend(cost int) bool {
	r := l.b.b.Rules.Rule(0)
	next, ok := r.Reserve(l.b.b.First(), r.Now(), cost, 0)
	if ok {
		l.b.b.SetFirst(next)
	}
	return ok
}

// MutexLayoutOK reports whether sync.Mutex is laid out as Waiters reads it:
// a 32-bit state word first, whose bits from 3 up count the goroutines
// blocked on it (internal/sync's mutexWaiterShift).
func MutexLayoutOK() bool { return unsafe.Sizeof(sync.Mutex{}) == 8 }

// Waiters returns the number of goroutines blocked on the bucket's lock,
// read from the mutex's state word (see MutexLayoutOK): a test waits for
// a spender to queue on the lock it holds, with no sleep.
func (l LockedBucket) Waiters() int32 {
	return atomic.LoadInt32((*int32)(unsafe.Pointer(&l.b.mu))) >> 3
}
