package e2e

import (
	"testing"
	"time"
)

// The caches' room: tests of one kind are in it together; one of the other
// kind waits until they have left, and once it waits, a test of the first
// kind that comes after it waits for it in turn.
func TestCachesRoom(t *testing.T) {
	saved := machineTmp
	machineTmp = t.TempDir()
	defer func() { machineTmp = saved }()

	leaveD1 := enterRoom(t, dropper)
	leaveD2 := enterRoom(t, dropper) // droppers together: at once
	keeperIn := make(chan func())
	go func() { keeperIn <- enterRoom(t, keeper) }()
	// The keeper has asked once it is in the room's file as waiting.
	Eventually(t, 10*time.Second, "the keeper to wait", func() (bool, string) {
		waiting := 0
		withRoom(t, func(room *[]cacheEntry, _ *int) {
			for _, e := range *room {
				if e.use == keeper && !e.holding {
					waiting++
				}
			}
		})
		return waiting == 1, ""
	})
	droppperIn := make(chan func())
	go func() { droppperIn <- enterRoom(t, dropper) }() // after the keeper: waits for it
	leaveD1()
	select {
	case <-keeperIn:
		t.Fatal("the keeper entered while a dropper was in")
	case <-time.After(100 * time.Millisecond):
	}
	leaveD2()
	leaveK := <-keeperIn
	select {
	case <-droppperIn:
		t.Fatal("a dropper that came after the waiting keeper entered with it")
	case <-time.After(100 * time.Millisecond):
	}
	leaveK()
	(<-droppperIn)()
	withRoom(t, func(room *[]cacheEntry, _ *int) {
		if len(*room) != 0 {
			t.Errorf("the room still lists %+v", *room)
		}
	})
}

// A test alone in the room waits for every other to leave, and every test
// that comes after it waits for it.
func TestCachesRoomAlone(t *testing.T) {
	saved := machineTmp
	machineTmp = t.TempDir()
	defer func() { machineTmp = saved }()

	leaveD := enterRoom(t, dropper)
	aloneIn := make(chan func())
	go func() { aloneIn <- enterRoom(t, alone) }()
	Eventually(t, 10*time.Second, "the lone test to wait", func() (bool, string) {
		n := 0
		withRoom(t, func(room *[]cacheEntry, _ *int) { n = len(*room) })
		return n == 2, ""
	})
	droppperIn := make(chan func())
	go func() { droppperIn <- enterRoom(t, dropper) }()
	select {
	case <-aloneIn:
		t.Fatal("the lone test entered beside a dropper")
	case <-droppperIn:
		t.Fatal("a dropper that came after the waiting lone test entered")
	case <-time.After(100 * time.Millisecond):
	}
	leaveD()
	leaveA := <-aloneIn
	select {
	case <-droppperIn:
		t.Fatal("a dropper entered beside the lone test")
	case <-time.After(100 * time.Millisecond):
	}
	leaveA()
	(<-droppperIn)()
}
