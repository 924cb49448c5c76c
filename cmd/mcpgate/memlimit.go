package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Memory limit by default (serve): unless GOMEMLIMIT is set, the soft
// limit (runtime/debug.SetMemoryLimit) is memLimitShare of the container's
// cgroup memory limit, so that the collector works harder as the heap nears
// what the kernel would kill the process at, rather than letting GOGC=400
// (TuneGC) grow the heap past it; the rest is left for what is not Go heap
// (stacks, the runtime, the binary). Without a cgroup limit it is
// defaultMemLimit. Either way it is soft: a catalog or a burst that needs
// more still gets it, at the cost of more collections.
const (
	memLimitShare   = 0.9
	defaultMemLimit = 1 << 30
)

// cgroupFiles are where the memory limit is read: cgroup v2, then v1.
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

func setMemoryLimit(logger *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, source := memoryLimit(cgroupFiles)
	debug.SetMemoryLimit(limit)
	logger.Debug("memory limit", "bytes", limit, "from", source)
}

// memoryLimit returns the soft memory limit to set and where it came from.
func memoryLimit(files []string) (int64, string) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		n, err := strconv.ParseInt(s, 10, 64)
		// "max" (v2) and a v1 "no limit" (a page-rounded 2^63-1) mean none.
		if err != nil || n <= 0 || n >= 1<<62 {
			continue
		}
		return int64(float64(n) * memLimitShare), f
	}
	return defaultMemLimit, "default"
}
