package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one running control plane component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
	err     error         // cmd.Wait's result; read only after done is closed
}

func (e *Env) startProcess(name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(e.Dir, name+".log")
	// Appending keeps the log of an earlier run of the same component (see RestartAPIServer).
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	// The child keeps its own descriptor of the log file.
	defer logFile.Close()

	cmd := exec.Command(bin, args...)
	cmd.Dir = e.Dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = killWithParent()
	if err := e.launcher.start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	e.procsMu.Lock() // nodes start side by side
	e.procs = append(e.procs, p)
	e.procsMu.Unlock()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL if the process outlives grace, and waits
// for it to exit.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return
	case <-timer.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (e *Env) readLogTails() string {
	var b strings.Builder
	for _, p := range e.procs {
		fmt.Fprintf(&b, "==> %s.log <==\n%s\n", p.name, tail(p.logPath, logTailLines))
	}
	return b.String()
}

// tail returns the last n lines of the file at path, or why it cannot.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	offset := max(fi.Size()-logTailWindow, 0)
	buf := make([]byte, fi.Size()-offset)
	if _, err := f.ReadAt(buf, offset); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if offset > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// launcher starts processes from one goroutine locked to its OS thread until
// the Env stops. Linux sends the parent-death signal when the *thread* that
// forked the child exits, and the Go runtime may end a thread while the test
// binary lives on (when a goroutine exits while locked to it); a dedicated
// locked thread keeps the children alive exactly as long as the Env.
type launcher struct {
	mu     sync.Mutex
	closed bool
	reqs   chan launchRequest
}

type launchRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

func newLauncher() *launcher {
	l := &launcher{reqs: make(chan launchRequest)}
	go l.run()
	return l
}

func (l *launcher) run() {
	// Never unlocked: when run returns, its thread exits, and any child that
	// somehow survived Stop receives its parent-death signal.
	runtime.LockOSThread()
	for r := range l.reqs {
		r.errc <- r.cmd.Start()
	}
}

func (l *launcher) start(cmd *exec.Cmd) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("environment stopped")
	}
	errc := make(chan error, 1)
	l.reqs <- launchRequest{cmd: cmd, errc: errc}
	return <-errc
}

func (l *launcher) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.reqs)
	}
}
