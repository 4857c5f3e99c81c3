package supervisor_test

import (
	"bytes"
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/internal/supervisor"
)

// Run and Reap take over their process (a child subreaper waiting for every
// child), so the tests run them in a copy of the test binary: TestMain runs
// supervisor.Run or supervisor.Reap on the arguments when helperEnv says so.
const helperEnv = "VMKIT_SUPERVISOR_TEST"

// testOptions make the back-off and the stop short enough for a test.
var testOptions = supervisor.Options{
	Log:          log.New(os.Stderr, "supervisor: ", 0),
	RestartMin:   20 * time.Millisecond,
	RestartMax:   80 * time.Millisecond,
	RestartReset: 2 * time.Second,
	StopWait:     500 * time.Millisecond,
}

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "run":
		os.Exit(supervisor.Run(os.Args[1:], testOptions))
	case "reap":
		os.Exit(supervisor.Reap(os.Args[1:], testOptions))
	}
	os.Exit(m.Run())
}

// helper is a test binary running supervisor.Run or Reap (mode) on the
// shell script in the directory dir.
type helper struct {
	cmd    *exec.Cmd
	dir    string
	stderr *bytes.Buffer // the supervisor's and the script's; read after exited
	exited chan int      // the exit status, once
}

func startHelper(t *testing.T, mode, script string) *helper {
	t.Helper()
	h := &helper{dir: t.TempDir(), stderr: &bytes.Buffer{}, exited: make(chan int, 1)}
	h.cmd = exec.Command(os.Args[0], "sh", "-c", script)
	h.cmd.Dir = h.dir
	h.cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	h.cmd.Stderr = h.stderr
	h.cmd.WaitDelay = time.Second // a process left running may hold stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := h.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			h.exited <- 0
		case errors.As(err, &ee):
			h.exited <- ee.ExitCode()
		default:
			h.exited <- -1
		}
	}()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		if t.Failed() {
			// Only once it exited: the buffer is written until then.
			select {
			case <-h.exited:
				t.Logf("stderr:\n%s", h.stderr)
			case <-time.After(5 * time.Second):
			}
		}
	})
	return h
}

// wait returns the helper's exit status, failing the test when it runs on
// for 10 s.
func (h *helper) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-h.exited:
		h.exited <- code
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor still runs 10 s later")
		return 0
	}
}

// signal sends sig to the supervisor.
func (h *helper) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// pidFile waits until the script wrote a pid to the file name and returns it.
func (h *helper) pidFile(t *testing.T, name string) int {
	t.Helper()
	var pid int
	eventually(t, "a pid in "+name, func() bool {
		b, err := os.ReadFile(filepath.Join(h.dir, name))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// eventually polls cond for 5 s and fails the test if it never holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5 s", what)
		}
	}
}

// stat is the state and the parent of a process, from /proc; ok is false
// when it is gone (exited and reaped).
func stat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// TestRunRestartsWithBackOff: a daemon that exits is restarted after 20,
// 40, 80 and again 80 ms (RestartMin doubling up to RestartMax); one that
// stayed up for RestartReset is restarted after RestartMin again. SIGTERM
// then stops the running daemon, and Run returns its status.
func TestRunRestartsWithBackOff(t *testing.T) {
	// Runs 1 to 4 exit at once, run 5 after 2.5 s, run 6 stays.
	h := startHelper(t, "run", `n=$(( $(cat runs 2>/dev/null || echo 0) + 1 )); echo $n > runs
case $n in
1|2|3|4) exit 3 ;;
5) sleep 2.5; exit 4 ;;
esac
echo $$ > daemon
exec sleep 1000`)
	daemon := h.pidFile(t, "daemon")
	if _, ppid, _ := stat(daemon); ppid != h.cmd.Process.Pid {
		t.Errorf("the daemon's parent is %d, want the supervisor %d", ppid, h.cmd.Process.Pid)
	}
	h.signal(t, syscall.SIGTERM)
	if code := h.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want %d (the daemon's: SIGTERM)", code, 128+int(syscall.SIGTERM))
	}
	exits := regexp.MustCompile(`(?m)^supervisor: sh exited \((.*)\); restarting it in (.*)$`).FindAllStringSubmatch(h.stderr.String(), -1)
	var got []string
	for _, m := range exits {
		got = append(got, m[1]+", "+m[2])
	}
	want := []string{"status 3, 20ms", "status 3, 40ms", "status 3, 80ms", "status 3, 80ms", "status 4, 20ms"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exits and restart delays (-want +got):\n%s", diff)
	}
	if n := strings.Count(h.stderr.String(), "supervisor: restarted sh (pid "); n != 5 {
		t.Errorf("%d restarts logged, want 5", n)
	}
	if _, _, ok := stat(daemon); ok {
		t.Errorf("the daemon %d is still there after the supervisor ended", daemon)
	}
}

// TestRunKillsWhatIsLeft: once the daemon stopped, the processes it left
// below the supervisor (a daemonized QEMU) are killed too.
func TestRunKillsWhatIsLeft(t *testing.T) {
	h := startHelper(t, "run", `sleep 1000 & echo $! > left; exec sleep 1000`)
	left := h.pidFile(t, "left")
	t.Cleanup(func() { // if the test failed, it may run on: the one started here
		if cwd, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(left), "cwd")); cwd == h.dir {
			_ = syscall.Kill(left, syscall.SIGKILL)
		}
	})
	h.signal(t, syscall.SIGINT)
	if code := h.wait(t); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit status %d, want %d (the daemon's: SIGINT forwarded)", code, 128+int(syscall.SIGINT))
	}
	if state, _, ok := stat(left); ok && state != "Z" {
		t.Errorf("the process the daemon left runs on (state %s) after the supervisor ended", state)
	}
}

// TestRunKillsAStuckDaemon: a daemon that ignores SIGTERM gets SIGKILL
// after StopWait.
func TestRunKillsAStuckDaemon(t *testing.T) {
	h := startHelper(t, "run", `trap '' TERM; echo $$ > daemon; exec sleep 1000`)
	h.pidFile(t, "daemon")
	stopped := time.Now()
	h.signal(t, syscall.SIGTERM)
	if code := h.wait(t); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit status %d, want %d (SIGKILL)", code, 128+int(syscall.SIGKILL))
	}
	if took := time.Since(stopped); took < testOptions.StopWait {
		t.Errorf("killed after %v, before StopWait (%v)", took, testOptions.StopWait)
	}
}

// TestRunReapsOrphans: a process orphaned below the daemon becomes the
// supervisor's child (a child subreaper), which reaps it when it ends:
// no zombie stays behind while the daemon runs.
func TestRunReapsOrphans(t *testing.T) {
	h := startHelper(t, "run", `(sleep 0.5 & echo $! > orphan); exec sleep 1000`)
	orphan := h.pidFile(t, "orphan")
	eventually(t, "orphan adopted by the supervisor", func() bool {
		_, ppid, ok := stat(orphan)
		return ok && ppid == h.cmd.Process.Pid
	})
	eventually(t, "orphan reaped", func() bool {
		_, _, ok := stat(orphan)
		return !ok
	})
	h.signal(t, syscall.SIGTERM)
	if code := h.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}

// TestRunCannotStart: a daemon that cannot be started ends Run with 1,
// naming why.
func TestRunCannotStart(t *testing.T) {
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "/nonexistent/daemon")
	cmd.Env = append(os.Environ(), helperEnv+"=run")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit %v, want status 1", err)
	}
	if want := "supervisor: fork/exec /nonexistent/daemon: no such file or directory"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", &stderr, want)
	}
}

// TestReap: Reap returns the command's status, adopts and reaps the
// processes orphaned below it, and forwards SIGTERM.
func TestReap(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		h := startHelper(t, "reap", `exit 7`)
		if code := h.wait(t); code != 7 {
			t.Errorf("exit status %d, want 7", code)
		}
	})
	t.Run("orphans and SIGTERM", func(t *testing.T) {
		h := startHelper(t, "reap", `(sleep 0.5 & echo $! > orphan); exec sleep 1000`)
		orphan := h.pidFile(t, "orphan")
		eventually(t, "orphan adopted by the reaper", func() bool {
			_, ppid, ok := stat(orphan)
			return ok && ppid == h.cmd.Process.Pid
		})
		eventually(t, "orphan reaped", func() bool {
			_, _, ok := stat(orphan)
			return !ok
		})
		select {
		case code := <-h.exited:
			t.Fatalf("the reaper exited (%d) with its command running", code)
		default:
		}
		h.signal(t, syscall.SIGTERM)
		if code := h.wait(t); code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit status %d, want %d (SIGTERM forwarded)", code, 128+int(syscall.SIGTERM))
		}
	})
}

// TestChildren lists a running child and, once it died, not its zombie.
func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if got := supervisor.Children(os.Getpid()); !slices.Contains(got, pid) {
		t.Errorf("Children %v: no running child %d", got, pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "dead child left out", func() bool {
		return !slices.Contains(supervisor.Children(os.Getpid()), pid)
	})
	if state, _, _ := stat(pid); state != "Z" {
		t.Errorf("child %d in state %q, want a zombie (not yet waited for)", pid, state)
	}
	_ = cmd.Wait()
	if got := supervisor.Children(os.Getpid()); slices.Contains(got, pid) {
		t.Errorf("Children %v: lists the reaped %d", got, pid)
	}
}
