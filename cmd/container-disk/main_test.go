package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the command itself when a test re-executes the test binary
// with containerDiskMainEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(containerDiskMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

const containerDiskMainEnv = "VMKIT_CONTAINER_DISK_MAIN"

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRun(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"disk/disk.img": "image"})
	never := context.Background()
	// Long enough to serve a small file, the time a test waits.
	soon, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Far off: a --copy-only run that served instead of exiting would
	// say "serving" when this ends.
	later, cancelLater := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelLater()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		args   []string
		code   int
		stderr string
		served bool
	}{
		{name: "no-op", ctx: never, args: []string{"--no-op"}, code: 0},
		{name: "no-op ignores copy path", ctx: never, args: []string{"--no-op", "--copy-path", "P"}, code: 0},
		{name: "no flags", ctx: never, code: 2, stderr: "--copy-path or --no-op is required"},
		{name: "unknown flag", ctx: never, args: []string{"-c", "P"}, code: 2, stderr: "flag provided but not defined: -c"},
		{name: "argument", ctx: never, args: []string{"--copy-path", "P", "extra"}, code: 2, stderr: `unexpected arguments ["extra"]`},
		{name: "missing source", ctx: never, args: []string{"--copy-path", "P", "--root", "EMPTY"}, code: 1, stderr: "neither EMPTY/disk nor EMPTY/boot exists"},
		{name: "serves until stopped", ctx: soon, args: []string{"--copy-path", "P", "--root", root}, code: 0, stderr: "serving", served: true},
		{name: "copy only: copies and exits", ctx: later, args: []string{"--copy-path", "P", "--root", root, "--copy-only"}, code: 0, stderr: "container-disk: copied", served: true},
		{name: "copy only: nothing to copy", ctx: later, args: []string{"--copy-path", "P", "--root", "EMPTY", "--copy-only"}, code: 1, stderr: "neither EMPTY/disk nor EMPTY/boot exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, a := range tc.args {
				switch a {
				case "P":
					tc.args[i] = filepath.Join(dir, "disk_0")
				case "EMPTY":
					tc.args[i] = t.TempDir()
					tc.stderr = strings.ReplaceAll(tc.stderr, "EMPTY", tc.args[i])
				}
			}
			var stderr bytes.Buffer
			if code := run(tc.ctx, tc.args, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, &stderr)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not say %q", &stderr, tc.stderr)
			}
			_, err := os.Stat(filepath.Join(dir, "disk_0", "disk", "disk.img"))
			if served := err == nil; served != tc.served {
				t.Errorf("served: %v, want %v", served, tc.served)
			}
		})
	}
}

// serving starts the command serving files (path: content) of a new root
// at a copy path named name, and waits until the file at want is served.
// It returns the copy path, the command, its exit and its stderr.
func serving(t *testing.T, files map[string]string, name, want string) (string, *exec.Cmd, <-chan error, *bytes.Buffer) {
	t.Helper()
	root, cd := t.TempDir(), t.TempDir()
	writeFiles(t, root, files)
	dst := filepath.Join(cd, name)
	cmd := exec.Command(os.Args[0], "--copy-path", dst, "--root", root)
	cmd.Env = append(os.Environ(), containerDiskMainEnv+"=1")
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dst, want)); err == nil {
			return dst, cmd, exited, stderr
		}
		select {
		case err := <-exited:
			t.Fatalf("exited before serving: %v; stderr: %s", err, stderr)
		case <-deadline:
			t.Fatalf("nothing served at %s; stderr: %s", dst, stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The sidecar is a long-running container: it serves, stays up, and exits
// 0 on SIGTERM.
func TestRunsUntilSIGTERM(t *testing.T) {
	_, cmd, exited, stderr := serving(t, map[string]string{"disk/disk.img": "image"}, "disk_0", "disk/disk.img")
	select {
	case err := <-exited:
		t.Fatalf("exited after serving, before SIGTERM: %v; stderr: %s", err, stderr)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit on SIGTERM: %v, want 0; stderr: %s", err, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after SIGTERM")
	}
}

// Once the launcher removed the copy (its guest ended: shut down or
// migrated away), the sidecar exits 0 by itself so that the pod completes.
func TestExitsWhenCopyRemoved(t *testing.T) {
	dst, _, exited, stderr := serving(t, map[string]string{"boot/vmlinux": "kernel"}, "kernel-boot", "boot/vmlinux")
	select {
	case err := <-exited:
		t.Fatalf("exited while its copy is there: %v; stderr: %s", err, stderr)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit once the copy was removed: %v, want 0; stderr: %s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "was removed") {
			t.Errorf("stderr does not say why it exited: %s", stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after its copy was removed; stderr: %s", stderr)
	}
}
