package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// endlessLauncher answers every request on a new socket with status code
// and a JSON string that never ends, as a launcher the tenant controls
// may; it returns the socket.
func endlessLauncher(t *testing.T, code int) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "l.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("A", 64<<10))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":"`))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return sock
}

// allocated runs f and returns how long it took and how many bytes the
// process allocated meanwhile (runtime.MemStats.TotalAlloc: every
// allocation counts, however short-lived, so no peak is missed).
func allocated(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return took, after.TotalAlloc - before.TotalAlloc
}

// A launcher answering with an endless body (the review's N4: before, the
// node agent buffered 1.8 GiB of one /v1/state answer until the call's 5 s
// deadline) makes every call fail within a second with ErrAnswerTooLarge,
// or for an error answer an *Error saying so, having allocated no more
// than a few times the route's bound.
func TestEndlessAnswersFailFast(t *testing.T) {
	ctx := context.Background()
	calls := []struct {
		name string
		call func(*Client) error
		// bound is the route's limit: what the client may buffer.
		bound int64
	}{
		{"State", func(c *Client) error { _, err := c.State(ctx); return err }, MaxAnswerBytes},
		{"Ping", func(c *Client) error { _, err := c.Ping(ctx); return err }, MaxAnswerBytes},
		{"Kill", func(c *Client) error { _, err := c.Kill(ctx); return err }, MaxAnswerBytes},
		{"MigrationInfo", func(c *Client) error { _, err := c.MigrationInfo(ctx); return err }, MaxAnswerBytes},
		{"Stats", func(c *Client) error { _, err := c.Stats(ctx); return err }, MaxAnswerBytes},
		{"Probe", func(c *Client) error { _, err := c.Probe(ctx, ProbeReadiness, time.Second); return err }, MaxAnswerBytes},
		{"GuestAgentCommand", func(c *Client) error { _, err := c.GuestAgentCommand(ctx, "guest-info"); return err }, MaxGuestAgentAnswerBytes},
	}
	for _, code := range []int{http.StatusOK, http.StatusInternalServerError} {
		c := New(endlessLauncher(t, code))
		defer c.Close()
		for _, tc := range calls {
			t.Run(tc.name+"/"+http.StatusText(code), func(t *testing.T) {
				var err error
				took, alloc := allocated(func() { err = tc.call(c) })
				t.Logf("%v after %v, %d KiB allocated", err, took.Round(time.Millisecond), alloc>>10)
				var le *Error
				switch {
				case code == http.StatusOK && tc.bound == MaxAnswerBytes && !errors.Is(err, ErrAnswerTooLarge):
					t.Errorf("error %v, want ErrAnswerTooLarge", err)
				case code == http.StatusOK && tc.bound != MaxAnswerBytes && (err == nil || !strings.Contains(err.Error(), ErrAnswerTooLarge.Error())):
					t.Errorf("error %v, want it to say %q", err, ErrAnswerTooLarge)
				case code != http.StatusOK && (!errors.As(err, &le) || le.Code != code || !strings.Contains(le.Message, ErrAnswerTooLarge.Error())):
					t.Errorf("error %#v, want an *Error %d saying %q", err, code, ErrAnswerTooLarge)
				}
				if took > time.Second {
					t.Errorf("the call took %v, want under 1s", took)
				}
				if limit := uint64(4*tc.bound) + 8<<20; alloc > limit {
					t.Errorf("the call allocated %d MiB, want at most %d MiB", alloc>>20, limit>>20)
				}
			})
		}
	}
}

// The review's scratch TestAuditUnboundedStateDecode, inverted: the heap
// stays under 16 MiB while State reads an endless answer, and the call
// fails in under a second.
func TestStateOfEndlessAnswerStaysSmall(t *testing.T) {
	sock := endlessLauncher(t, http.StatusOK)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	_, err := New(sock).State(context.Background())
	took := time.Since(start)
	close(done)
	<-sampled
	t.Logf("State returned after %v: %v; heap before %d MiB, peak %d MiB", took.Round(time.Millisecond), err, before.HeapAlloc>>20, peak>>20)
	if !errors.Is(err, ErrAnswerTooLarge) {
		t.Errorf("State: %v, want ErrAnswerTooLarge", err)
	}
	if took > time.Second {
		t.Errorf("State took %v, want under 1s", took)
	}
	if peak > 16<<20 {
		t.Errorf("peak heap %d MiB, want under 16 MiB", peak>>20)
	}
}

// An answer within the bound decodes, however close to it.
func TestDecodeAnswerAtTheBound(t *testing.T) {
	body := `"` + strings.Repeat("a", 98) + `"`
	var s string
	if err := decodeAnswer(strings.NewReader(body), 100, &s); err != nil || len(s) != 98 {
		t.Errorf("100 bytes with a bound of 100: %q, %v", s, err)
	}
	if err := decodeAnswer(strings.NewReader(body+" "), 100, &s); err != nil {
		t.Errorf("100 bytes and a trailing space with a bound of 100: %v", err)
	}
	long := `"` + strings.Repeat("a", 99) + `"`
	if err := decodeAnswer(strings.NewReader(long), 100, &s); !errors.Is(err, ErrAnswerTooLarge) {
		t.Errorf("101 bytes with a bound of 100: %v, want ErrAnswerTooLarge", err)
	}
	if err := decodeAnswer(strings.NewReader(`{"a":`), 100, &s); err == nil || errors.Is(err, ErrAnswerTooLarge) {
		t.Errorf("a short, truncated answer: %v, want a decoding error", err)
	}
}

// A launcher whose answer's header never ends: calls and streams fail at
// once instead of reading it all.
func TestEndlessHeaderFailsFast(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "l.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		chunk := []byte(strings.Repeat("A", 64<<10))
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nX-Endless: "))
				for {
					if _, err := conn.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	c := New(sock)
	defer c.Close()
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"State":   func() error { _, err := c.State(ctx); return err },
		"Console": func() error { _, err := c.Console(ctx, false); return err },
	} {
		var err error
		took, alloc := allocated(func() { err = call() })
		t.Logf("%s: %v after %v, %d KiB allocated", name, err, took.Round(time.Millisecond), alloc>>10)
		if err == nil || took > time.Second || alloc > 8<<20 {
			t.Errorf("%s: %v after %v, %d KiB allocated; want an error within 1s and 8 MiB", name, err, took, alloc>>10)
		}
	}
}
