// A Go program whose function work is called a known number of times from
// many goroutines at once, and whose function nap sleeps a known time
// (its goroutine parks and may wake on another thread): ufunc's probes on
// a Go function must count and time every call and leave the program
// running as it would.
package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

var total atomic.Int64

//go:noinline
func work(n int) int {
	s := 0
	for i := range n {
		s += i
	}
	total.Add(1)
	return s
}

//go:noinline
func nap() { time.Sleep(2 * time.Millisecond) }

func main() {
	const goroutines, calls = 200, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				work(1000)
			}
		}()
	}
	wg.Wait() // the naps on idle processors: their wake-ups not late
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nap()
			nap()
		}()
	}
	wg.Wait()
	if total.Load() != goroutines*calls {
		fmt.Println("lost calls:", total.Load())
		os.Exit(1)
	}
	fmt.Println("calls:", total.Load())
}
