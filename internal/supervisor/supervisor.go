// Package supervisor runs a daemon as the child of a child subreaper: it
// restarts the daemon when it exits unasked (Run), or only reaps what ends
// below it (Reap). virt-launcher uses it to keep libvirtd and virtlogd
// running inside the launcher pod (virt-launcher --supervise) and to reap
// the QEMU processes libvirtd leaves behind, where nothing else would
// (virt-launcher --reap).
//
// Run and Reap take over their process: they make it a child subreaper,
// handle SIGTERM and SIGINT, and wait for every child it has. Call them
// from main, in a process of their own, and exit with what they return.
package supervisor

import (
	"errors"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure Run and Reap. The zero value logs to standard error
// and uses the default back-off and stop timeout.
type Options struct {
	// Log receives the supervisor's own messages: a daemon that exited and
	// its restarts, a command that could not start. Default: standard
	// error, prefixed with the program's name and ": ".
	Log *log.Logger
	// RestartMin is the wait before the first restart (default 200 ms). It
	// doubles after each exit up to RestartMax (default 5 s), and is back
	// to RestartMin once the daemon stayed up for RestartReset (default
	// 30 s). Run only.
	RestartMin, RestartMax, RestartReset time.Duration
	// StopWait is how long a stopping daemon may take before SIGKILL, and
	// how long Run then waits for the processes left below it to die
	// (default 10 s). Run only.
	StopWait time.Duration
}

// The defaults of Options.
const (
	defaultRestartMin   = 200 * time.Millisecond
	defaultRestartMax   = 5 * time.Second
	defaultRestartReset = 30 * time.Second
	defaultStopWait     = 10 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = log.New(os.Stderr, filepath.Base(os.Args[0])+": ", 0)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.RestartMin, defaultRestartMin}, {&o.RestartMax, defaultRestartMax}, {&o.RestartReset, defaultRestartReset}, {&o.StopWait, defaultStopWait}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return o
}

type exit struct {
	pid int
	ws  syscall.WaitStatus
}

// Run runs argv as a child, restarts it when it exits (with a bounded
// back-off, see Options), and reaps every process that ends below it. The
// child shares the process's standard output and error and gets SIGTERM
// when the supervisor dies.
//
// SIGTERM or SIGINT stops it: the signal goes to the daemon; once the
// daemon has exited (SIGKILL after Options.StopWait), the processes still
// below the supervisor are killed, and Run returns the daemon's exit
// status (128 + the signal's number when a signal ended it). When the
// daemon cannot be started at all, Run returns 1.
//
// A daemon that dies does not take the processes it started with it: a
// daemonized one (libvirtd's QEMU) becomes the supervisor's child and
// keeps running, for the restarted daemon to find again. Only stopping the
// supervisor kills it.
func Run(argv []string, opts Options) int {
	opts = opts.withDefaults()
	becomeSubreaper(opts.Log)
	name := filepath.Base(argv[0])
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	exits := make(chan exit, 16)
	go waitAll(exits)

	child, err := start(argv)
	if err != nil {
		opts.Log.Println(err)
		return 1
	}
	started := time.Now()
	backoff := opts.RestartMin
	var (
		restart  <-chan time.Time
		kill     <-chan time.Time
		stopping bool
		status   = 1
	)
	for {
		select {
		case s := <-sigs:
			stopping = true
			if child == nil {
				killChildren(opts.StopWait)
				return status
			}
			_ = child.Process.Signal(s)
			if kill == nil {
				kill = time.After(opts.StopWait)
			}
		case <-kill:
			if child != nil {
				_ = child.Process.Kill()
			}
		case ex := <-exits:
			if child == nil || ex.pid != child.Process.Pid {
				continue // a QEMU or helper, reaped
			}
			child, status = nil, exitStatus(ex.ws)
			if stopping {
				killChildren(opts.StopWait)
				return status
			}
			if time.Since(started) >= opts.RestartReset {
				backoff = opts.RestartMin
			}
			opts.Log.Printf("%s exited (%s); restarting it in %v", name, describe(ex.ws), backoff)
			restart = time.After(backoff)
			backoff = min(2*backoff, opts.RestartMax)
		case <-restart:
			restart = nil
			c, err := start(argv)
			if err != nil {
				opts.Log.Printf("restarting %s: %v; again in %v", name, err, backoff)
				restart = time.After(backoff)
				backoff = min(2*backoff, opts.RestartMax)
				continue
			}
			child, started = c, time.Now()
			opts.Log.Printf("restarted %s (pid %d)", name, c.Process.Pid)
		}
	}
}

// Reap runs argv as a child and reaps every process that ends below it: as
// a child subreaper it inherits the processes its descendants leave behind.
// libvirtd starts QEMU processes (capability probes, guests) that outlive
// their parent; in a launcher container nothing else reaps them, and
// libvirt waits up to half a minute for a zombie to disappear before each
// guest can start. It forwards SIGTERM and SIGINT to the child and returns
// the child's exit status (128 + the signal's number when a signal ended
// it), or 1 when the child cannot be started. Of opts, it uses Log only.
func Reap(argv []string, opts Options) int {
	opts = opts.withDefaults()
	becomeSubreaper(opts.Log)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	cmd, err := start(argv)
	if err != nil {
		opts.Log.Println(err)
		return 1
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	// Not cmd.Wait: every child is collected here, the command included.
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 1
		}
		if pid == cmd.Process.Pid {
			return exitStatus(ws)
		}
	}
}

// Children lists the live (not yet exited) children of the process ppid,
// from /proc: zombies are left out. It is empty when /proc cannot be read.
func Children(ppid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if p, err := strconv.Atoi(f[1]); err == nil && p == ppid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// becomeSubreaper makes this process inherit the orphans of its
// descendants; it logs when it cannot (the supervisor still runs).
func becomeSubreaper(l *log.Logger) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		l.Println("becoming a child subreaper:", err)
	}
}

// start starts argv with the process's standard output and error; the
// child gets SIGTERM when its parent dies.
func start(argv []string) (*exec.Cmd, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd, cmd.Start()
}

// waitAll reaps every child of this process, forever.
func waitAll(exits chan<- exit) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // no children right now (between restarts)
			time.Sleep(20 * time.Millisecond)
		default:
			exits <- exit{pid, ws}
		}
	}
}

// killChildren SIGKILLs the processes left below the supervisor and waits
// (up to wait) until they are gone: waitAll reaps them.
func killChildren(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		pids := Children(os.Getpid())
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitStatus is a shell's $? for ws: 128 + the signal's number when a
// signal ended the process.
func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "status " + strconv.Itoa(ws.ExitStatus())
}
