package federation

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine bounds a logged stderr line of a stdio child.
const maxStderrLine = 2048

// child is a running stdio server process.
type child struct {
	cmd   *exec.Cmd
	since time.Time
	begun chan struct{} // closed once started or given up
	once  sync.Once
	kills sync.Once
}

// command builds the transport that starts the stdio child: its own
// process group, an environment of PATH and HOME plus Config.Env, and its
// stderr logged at Debug.
func (u *Upstream) command() (mcp.Transport, *child, error) {
	argv := u.cfg.Command
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = u.childEnv()
	cmd.SysProcAttr = procAttr()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("stderr pipe: %w", err)
	}
	// Given an *os.File, exec hands it to the child as is: the parent's
	// copy is closed once the child started (see started), and the
	// reader ends when the last process of the group holding it exits.
	cmd.Stderr = w
	ch := &child{cmd: cmd, begun: make(chan struct{})}
	log := u.log
	go func() {
		defer r.Close()
		boundedLines(r, maxStderrLine, func(line string, cut bool) {
			log.Debug("upstream stderr", "line", line, "cut", cut)
		})
	}()
	go func() {
		// Close the parent's write end once Start has run (or never
		// will): until then exec needs it.
		<-ch.begun
		w.Close()
	}()
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: u.terminate}, ch, nil
}

func (u *Upstream) childEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v := u.getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range u.cfg.Env {
		env = append(env, k+"="+v)
	}
	return env
}

func (c *child) signal() { c.once.Do(func() { close(c.begun) }) }

// started notes that the child runs.
func (c *child) started() {
	c.since = time.Now()
	c.signal()
}

// ran is how long the child has been running.
func (c *child) ran() time.Duration {
	if c.since.IsZero() {
		return 0
	}
	return time.Since(c.since)
}

// kill kills the child's whole process group: a server that forked
// helpers must not leave them behind.
func (c *child) kill() {
	c.signal()
	c.kills.Do(func() {
		if p := c.cmd.Process; p != nil {
			killGroup(p)
		}
	})
}
