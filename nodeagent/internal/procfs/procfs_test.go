package procfs

import (
	"os"
	"syscall"
	"testing"
)

func TestUser(t *testing.T) {
	uid, gid, err := User(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if uid != os.Getuid() || gid != os.Getgid() {
		t.Errorf("User(self) = %d:%d, want %d:%d", uid, gid, os.Getuid(), os.Getgid())
	}
	if _, _, err := User(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestOpenFileLimit(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	got, err := OpenFileLimit(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := lim.Max
	if lim.Max == ^uint64(0) { // RLIM_INFINITY
		want = 0
	}
	if got != want {
		t.Errorf("OpenFileLimit = %d, want the hard limit %d", got, want)
	}
	if _, err := OpenFileLimit(-1); err == nil {
		t.Error("OpenFileLimit of no process: no error")
	}
}
