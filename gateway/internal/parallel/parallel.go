// Package parallel runs a loop's bodies on every core.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Do calls f(0) … f(n-1) on GOMAXPROCS goroutines and returns when
// all have returned. Building a catalog binds and compiles each tool on its
// own (a tool's binding reads the document and writes only the tool), and a
// 4 MB document has hundreds of them.
func Do(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
