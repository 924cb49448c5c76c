package main

import (
	"bufio"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The mcpgate-redis target: mcpgate with the same config as the mcpgate
// target plus `state: {backend: redis}` against a redis-server the bench
// starts (Debian's /usr/bin/redis-server, no persistence, a free loopback
// port). Its req/s over mcpgate's is the shared-state cost on a REST
// tools/call (issue 24: at least redisRateTarget).

// redisServerBin is the redis-server the bench starts.
const redisServerBin = "/usr/bin/redis-server"

// redisRateTarget is the least mcpgate-redis/mcpgate req/s allowed.
const redisRateTarget = 0.95

// startRedis starts a redis-server on a free loopback port and waits for its
// PONG.
func startRedis(dir string) (*proc, error) {
	if _, err := os.Stat(redisServerBin); err != nil {
		return nil, fmt.Errorf("the mcpgate-redis target needs %s (apt-get install redis-server)", redisServerBin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	cmd := exec.Command(redisServerBin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: "redis", cmd: cmd, url: "redis://" + addr + "/0"}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			fmt.Fprint(c, "PING\r\n")
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return p, nil
			}
		}
	}
	p.stop()
	return nil, fmt.Errorf("redis-server did not answer on %s within 10s", addr)
}

// startMcpgateRedis starts the mcpgate-redis target's mcpgate: cfg (the
// mcpgate target's) with shared state in redis r.
func startMcpgateRedis(s *servers, o setupOptions, cfg string) (*proc, error) {
	r, err := startRedis(s.dir)
	if err != nil {
		return nil, err
	}
	s.redis = r
	// state.backend redis needs a task key (the replicas key their caller
	// digests with it); the process inherits this one.
	if err := os.Setenv(benchTaskKeyEnv, strings.Repeat("b", 32)); err != nil {
		return nil, err
	}
	cfg += fmt.Sprintf("state:\n  backend: redis\n  redis: {url: %q}\ntasks: {key_env: %s}\n", r.url, benchTaskKeyEnv)
	path := filepath.Join(s.dir, "mcpgate-redis.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"--config", path, "--log-level", o.mcpgateLog}, o.extraArgs...)
	return startMcpgate(s.bin, s.dir, args...)
}

// benchTaskKeyEnv holds the mcpgate-redis target's task key.
const benchTaskKeyEnv = "MCPGATE_BENCH_TASK_KEY"

// redisRatios are mcpgate-redis's req/s over mcpgate's at each concurrency,
// each against redisRateTarget.
func redisRatios(results map[string]map[int]*result, cs []int) []ratio {
	g, r := results["mcpgate"], results["mcpgate-redis"]
	if g == nil || r == nil {
		return []ratio{{value: math.NaN(), line: "redis ratios: not computed (they need both the mcpgate and mcpgate-redis targets)"}}
	}
	var rs []ratio
	for _, c := range cs {
		if g[c] != nil && r[c] != nil && g[c].rate() > 0 {
			v := r[c].rate() / g[c].rate()
			x := ratio{name: fmt.Sprintf("ratio mcpgate-redis/mcpgate req/s c=%d", c), value: v, target: fmt.Sprintf("target ≥ %.2f", redisRateTarget)}
			x.line = fmt.Sprintf("%s: %.2f (%s: %s)", x.name, v, x.target, meets(v >= redisRateTarget))
			rs = append(rs, x)
		}
	}
	return rs
}
