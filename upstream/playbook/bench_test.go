package playbook

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/upstream"
)

// BenchmarkWaitingRuns measures what 1000 runs cost while they wait: each
// has its caller's goroutine, its run's goroutine and timers, polling a
// real HTTP engine (in this process, so its records count too) at the
// default 1.5s interval. The figure is the growth of heap and stacks in
// use, reported as MiB/1000runs; the bound is 50 MiB.
func BenchmarkWaitingRuns(b *testing.B) {
	const runs = 1000
	for b.Loop() {
		e := engine.New(&engine.Options{Step: time.Hour})
		srv := httptest.NewServer(e.Handler())
		c, err := upstream.NewRemote(srv.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		r, err := New(c, &Options{Routes: noetl, Linger: -1})
		if err != nil {
			b.Fatal(err)
		}
		before := inUse()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		// Measured once every run has polled twice: waiting, not starting.
		polled := make(chan struct{}, runs)
		for i := range runs {
			wg.Go(func() {
				var once sync.Once
				r.Run(ctx, Request{Tool: "t", Path: "demo/slow", Workload: map[string]any{"i": i},
					Progress: func(p Progress) {
						if p.Polls >= 2 {
							once.Do(func() { polled <- struct{}{} })
						}
					}})
			})
		}
		for range runs {
			<-polled
		}
		during := inUse()
		mib := float64(during-before) / (1 << 20)
		b.ReportMetric(mib, "MiB/1000runs")
		if mib > 50 {
			b.Errorf("1000 waiting runs cost %.1f MiB, over 50 MiB", mib)
		}
		cancel()
		wg.Wait()
		for e.Counts().Cancelled < runs {
			time.Sleep(10 * time.Millisecond)
		}
		srv.Close()
		fmt.Fprintf(b.Output(), "1000 waiting runs: %.1f MiB of heap and stacks\n", mib)
	}
}

func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
