package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdleReleaseLook: a release needs a quiet interval after a first look,
// enough heap held beyond the live heap, and traffic since the last release.
func TestIdleReleaseLook(t *testing.T) {
	const MiB = 1 << 20
	big := heapReading{held: 300 * MiB, live: 80 * MiB}
	small := heapReading{held: 90 * MiB, live: 80 * MiB}
	at := func(h heapReading, allocated uint64) heapReading { h.allocated = allocated; return h }
	tests := []struct {
		name  string
		looks []heapReading
		want  []bool
	}{
		{"the first look only records", []heapReading{at(big, 0)}, []bool{false}},
		{"idle with headroom: once", []heapReading{at(big, 0), at(big, 10), at(big, 20), at(big, 30)}, []bool{false, true, false, false}},
		{"busy: never", []heapReading{at(big, 0), at(big, 2*MiB), at(big, 4*MiB)}, []bool{false, false, false}},
		{"just under the idle bound", []heapReading{at(big, 0), at(big, IdleAllocBytes-1)}, []bool{false, true}},
		{"at the idle bound", []heapReading{at(big, 0), at(big, IdleAllocBytes)}, []bool{false, false}},
		{"idle, little headroom", []heapReading{at(small, 0), at(small, 10)}, []bool{false, false}},
		{"headroom at the bound", []heapReading{at(heapReading{held: 80*MiB + IdleReleaseBytes, live: 80 * MiB}, 0), at(heapReading{held: 80*MiB + IdleReleaseBytes, live: 80 * MiB}, 1)}, []bool{false, true}},
		{"traffic, then idle again: once more", []heapReading{at(big, 0), at(big, 1), at(big, 5*MiB), at(big, 5*MiB+1), at(big, 5*MiB+2)}, []bool{false, true, false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r idleRelease
			for i, h := range tt.looks {
				if got := r.look(h); got != tt.want[i] {
					t.Errorf("look %d (%+v) = %t, want %t", i, h, got, tt.want[i])
				}
			}
		})
	}
}

// TestReadHeap: the runtime has every figure the release reads, and they
// move as they should: a live allocation shows in live and held once
// collected, and in allocated at once.
func TestReadHeap(t *testing.T) {
	before := readHeap()
	keep := make([]byte, 32<<20)
	for i := range keep {
		keep[i] = 1
	}
	runtime.GC()
	after := readHeap()
	runtime.KeepAlive(keep)
	if after.allocated < before.allocated+32<<20 {
		t.Errorf("allocated %d → %d, want 32 MiB more", before.allocated, after.allocated)
	}
	if after.live < 32<<20 || after.held < after.live {
		t.Errorf("live %d, held %d: want live ≥ 32 MiB and held ≥ live", after.live, after.held)
	}
}

// TestReleaseIdleMemory runs the loop on a fake clock (testing/synctest):
// with 64 MiB of garbage held (the collector off) and nothing allocating, the second look
// releases it (the log line says how much the heap held before and after),
// and no later look of the same idle spell releases again.
func TestReleaseIdleMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		// The collector off while the garbage is made, so that none of it
		// is collected (and scavenged) before the loop looks: 64 MiB held
		// beyond what the last collection left live.
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		runtime.GC()
		garbage := make([][]byte, 64)
		for i := range garbage {
			garbage[i] = make([]byte, 1<<20)
			garbage[i][0] = 1
		}
		garbage = nil
		if h := readHeap(); h.held < h.live+IdleReleaseBytes {
			t.Fatalf("held %d, live %d: the garbage is not held, nothing to test", h.held, h.live)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { ReleaseIdleMemory(ctx, logger); close(done) }()
		time.Sleep(2*IdleCheckInterval + time.Second)
		synctest.Wait()
		if n := strings.Count(logs.String(), "heap memory returned"); n != 1 {
			t.Fatalf("%d releases after two looks, want 1: %s", n, logs.String())
		}
		if h := readHeap(); h.held >= h.live+IdleReleaseBytes {
			t.Errorf("after the release: held %d, live %d, want under %d MiB more", h.held, h.live, IdleReleaseBytes>>20)
		}
		time.Sleep(5 * IdleCheckInterval)
		synctest.Wait()
		if n := strings.Count(logs.String(), "heap memory returned"); n != 1 {
			t.Errorf("%d releases in one idle spell, want 1: %s", n, logs.String())
		}
		cancel()
		<-done
	})
}
