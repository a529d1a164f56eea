package rules

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/handle"
)

// TestTierLayout: slotOf and tierOf convert between keyrate.Tier and
// handle.Tier, and between a *handle.Slot and its *tierSlot, by
// unsafe.Pointer; that is sound only while keyrate.Tier is exactly one
// *handle.Slot and a tierSlot starts with its handle.Slot. A change to
// either layout fails here rather than corrupting a Tier.
func TestTierLayout(t *testing.T) {
	kt, ht := reflect.TypeFor[keyrate.Tier](), reflect.TypeFor[handle.Tier]()
	if kt.Size() != ht.Size() || kt.NumField() != 1 || ht.NumField() != 1 ||
		kt.Field(0).Type != ht.Field(0).Type || kt.Field(0).Offset != 0 {
		t.Fatalf("keyrate.Tier (%d bytes, %d fields) is not laid out as handle.Tier (%d bytes: one %v)",
			kt.Size(), kt.NumField(), ht.Size(), ht.Field(0).Type)
	}
	if off := unsafe.Offsetof(tierSlot{}.Slot); off != 0 {
		t.Fatalf("tierSlot's handle.Slot is at offset %d, want 0", off)
	}
	slot := &tierSlot{Slot: handle.Slot{Name: "pro"}}
	tier := tierOf(slot)
	if got := slotOf(tier); got != slot {
		t.Fatalf("slotOf(tierOf(slot)) = %p, want %p", got, slot)
	}
	if tier.Name() != "pro" {
		t.Fatalf("tierOf(slot).Name() = %q, want %q", tier.Name(), "pro")
	}
	if got := slotOf(keyrate.Tier{}); got != nil {
		t.Fatalf("slotOf(the zero Tier) = %p, want nil", got)
	}
}
