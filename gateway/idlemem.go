package gateway

import (
	"context"
	"log/slog"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// Returning the collector's headroom once the process is idle.
//
// [TuneGC]'s GC target of 400 lets the heap grow to 5× what the last
// collection left live, and the runtime's scavenger returns to the OS only
// the memory above that goal: RSS stays near 5× the live heap for as long as
// the process lives, traffic or not. With 10,000 idle stateful sessions,
// each holding 6.8 KB live, that was 31 KB of RSS per session
// (docs/performance.md, every mode). Once the process has allocated almost
// nothing for a while, the headroom serves no one: [ReleaseIdleMemory]
// collects and returns it (debug.FreeOSMemory), once per idle spell.
const (
	// IdleCheckInterval is how often ReleaseIdleMemory looks: a process is
	// idle when it allocated less than IdleAllocBytes between two looks.
	IdleCheckInterval = 5 * time.Second
	// IdleAllocBytes is the allocation of one IdleCheckInterval under which
	// the process counts as idle: 1 MiB in 5 s is a few calls a second on
	// the fast path (11 KB each), fewer through go-sdk (200–320 KB each).
	IdleAllocBytes = 1 << 20
	// IdleReleaseBytes is the least heap memory held beyond the live heap
	// that is worth a release: a release is a full collection, so it is
	// not made for a few MiB.
	IdleReleaseBytes = 16 << 20
)

// heapReading is what the idle release reads of the runtime.
type heapReading struct {
	allocated uint64 // bytes allocated since the process started
	held      uint64 // heap memory held from the OS: objects, free and unused spans
	live      uint64 // the heap the last collection left live
}

// heapSamples are the runtime/metrics read for a heapReading.
var heapSamples = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/gc/heap/live:bytes",
}

// readHeap reads the runtime's figures.
func readHeap() heapReading {
	s := make([]rtmetrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	rtmetrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0 // not in this Go version: never idle-released
		}
		return s[i].Value.Uint64()
	}
	return heapReading{allocated: v(0), held: v(1) + v(2) + v(3), live: v(4)}
}

// idleRelease decides, one look at a time, when to release.
type idleRelease struct {
	primed bool
	last   uint64 // allocated at the last look
	spent  bool   // released in this idle spell
}

// look takes one reading and reports whether to release now: the process
// allocated less than IdleAllocBytes since the last look, holds at least
// IdleReleaseBytes of heap beyond the live heap, and has not released since
// it last saw traffic (what a release cannot return, such as the unused
// part of spans in use, is not released again at every look). The first
// look only records.
func (r *idleRelease) look(h heapReading) bool {
	idle := r.primed && h.allocated-r.last < IdleAllocBytes
	r.primed, r.last = true, h.allocated
	switch {
	case !idle:
		r.spent = false
		return false
	case r.spent || h.held < h.live+IdleReleaseBytes:
		return false
	}
	r.spent = true
	return true
}

// ReleaseIdleMemory looks every IdleCheckInterval until ctx is done, and
// returns the heap's free memory to the OS (a full collection, then every
// free page) when the process has gone idle holding IdleReleaseBytes or more
// beyond its live heap: once per idle spell; traffic that grows the heap
// again makes the next idle spell release again. mcpgate serve
// runs it; an embedding service decides for itself, as for [TuneGC].
// logger (nil: none) gets a debug line per release.
func ReleaseIdleMemory(ctx context.Context, logger *slog.Logger) {
	t := time.NewTicker(IdleCheckInterval)
	defer t.Stop()
	var r idleRelease
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h := readHeap()
		if !r.look(h) {
			continue
		}
		debug.FreeOSMemory()
		after := readHeap()
		r.last = after.allocated // the collection's own allocation is not traffic
		if logger != nil {
			logger.Debug("idle: heap memory returned to the OS", slog.Uint64("held_before", h.held), slog.Uint64("held_after", after.held), slog.Uint64("live", after.live))
		}
	}
}
