package fuseconn

import (
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
)

func fuseMount(conn uint32, at string) MountInfo {
	return MountInfo{Minor: conn, MountPoint: at, FSType: "fuse.bindfs", Source: "src"}
}

// A traced mount's number taken by the next FUSE mount once it is gone
// (the kernel gives out the lowest free one) is not the traced mount: the
// book says it went. A second place of the same mount going is not.
func TestBookNumberReused(t *testing.T) {
	live := map[uint32]bool{5: true}
	b := &Book{traced: []uint32{5}, named: map[uint32]string{5: "/mnt/a"}, known: map[uint32]profile.Mount{}}
	b.refresh([]MountInfo{fuseMount(5, "/mnt/a"), fuseMount(5, "/mnt/a-bind")}, live)
	if gone, _ := b.Gone(); gone != "" {
		t.Fatalf("mounted, gone: %q", gone)
	}
	b.refresh([]MountInfo{fuseMount(5, "/mnt/a-bind"), fuseMount(5, "/mnt/a")}, live)
	if gone, _ := b.Gone(); gone != "" {
		t.Errorf("still mounted where it was: gone %q", gone)
	}
	// Unmounted, and another test's mount took number 5.
	b.refresh([]MountInfo{fuseMount(5, "/tmp/other-test/mnt")}, live)
	gone, _ := b.Gone()
	if !strings.Contains(gone, "/mnt/a (conn 5)") {
		t.Errorf("a new mount with the traced mount's number passed for it: gone %q", gone)
	}
	if b.MountPoint(5) != "/mnt/a" {
		t.Errorf("the traced mount's label became %q", b.MountPoint(5))
	}
	// Unmounted, its connection still alive (another mount namespace holds
	// it): gone from here.
	b2 := &Book{traced: []uint32{7}, named: map[uint32]string{}, known: map[uint32]profile.Mount{}}
	b2.refresh([]MountInfo{fuseMount(7, "/mnt/b")}, map[uint32]bool{7: true})
	b2.refresh(nil, map[uint32]bool{7: true})
	if gone, _ := b2.Gone(); !strings.Contains(gone, "/mnt/b") {
		t.Errorf("unmounted here: gone %q", gone)
	}
}
