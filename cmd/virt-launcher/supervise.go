package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// superviseFlag runs virt-launcher as the supervisor of the daemon that
// follows (libvirtd, virtlogd): a reaper (see reap) that also restarts
// the daemon when it exits without being told to.
//
// libvirtd dying does not take the guest with it: QEMU is daemonized, so
// it is the supervisor's child, not libvirtd's, and keeps running; the
// restarted libvirtd re-attaches to it from its state files (the domain's
// <name>.xml and <name>.pid under libvirt's run directory), and the
// launcher's connection reconnects on its next call.
const superviseFlag = "--supervise"

// The restart back-off: restartMin after the first exit, doubled after
// each exit up to restartMax, back to restartMin once the daemon stayed up
// for restartReset.
const (
	restartMin   = 200 * time.Millisecond
	restartMax   = 5 * time.Second
	restartReset = 30 * time.Second
	// stopWait is how long a stopping daemon may take before SIGKILL.
	stopWait = 10 * time.Second
)

type exit struct {
	pid int
	ws  syscall.WaitStatus
}

// supervise runs argv as a child, restarts it when it exits (with a
// bounded back-off), and reaps every process that ends below it. SIGTERM
// or SIGINT stops it: the signal goes to the daemon; once the daemon has
// exited (SIGKILL after stopWait), the processes still below the
// supervisor (a QEMU libvirtd left running, when the launcher gives up a
// domain whose libvirt did not come back) are killed, and it returns the
// daemon's exit status.
func supervise(argv []string) int {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "virt-launcher: becoming a child subreaper:", errno)
	}
	name := filepath.Base(argv[0])
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	exits := make(chan exit, 16)
	go waitAll(exits)

	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		return cmd, cmd.Start()
	}
	child, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "virt-launcher:", err)
		return 1
	}
	started := time.Now()
	backoff := restartMin
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
				killChildren()
				return status
			}
			_ = child.Process.Signal(s)
			if kill == nil {
				kill = time.After(stopWait)
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
				killChildren()
				return status
			}
			if time.Since(started) >= restartReset {
				backoff = restartMin
			}
			fmt.Fprintf(os.Stderr, "virt-launcher: %s exited (%s); restarting it in %v\n", name, describe(ex.ws), backoff)
			restart = time.After(backoff)
			backoff = min(2*backoff, restartMax)
		case <-restart:
			restart = nil
			c, err := start()
			if err != nil {
				fmt.Fprintf(os.Stderr, "virt-launcher: restarting %s: %v; again in %v\n", name, err, backoff)
				restart = time.After(backoff)
				backoff = min(2*backoff, restartMax)
				continue
			}
			child, started = c, time.Now()
			fmt.Fprintf(os.Stderr, "virt-launcher: restarted %s (pid %d)\n", name, c.Process.Pid)
		}
	}
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
// (up to stopWait) until they are gone: waitAll reaps them.
func killChildren() {
	deadline := time.Now().Add(stopWait)
	for {
		pids := childrenOf(os.Getpid())
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childrenOf lists the live (not yet reaped) children of ppid from /proc.
func childrenOf(ppid int) []int {
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
