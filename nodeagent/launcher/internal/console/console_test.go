package console

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestConsoleBurst: a client that reads slowly while the guest prints a
// burst of short lines (a Linux boot: one console read per line) gets every
// byte in order, and the end of the console.
func TestConsoleBurst(t *testing.T) {
	h := New(64 << 10)
	_, sub, cancel := h.Subscribe(false)
	defer cancel()
	var want bytes.Buffer
	for i := range 20000 {
		line := fmt.Appendf(nil, "[%8.6f] a line of the kernel's boot log\n", float64(i)/1000)
		want.Write(line)
		h.publish(line)
	}
	h.Close()
	var got bytes.Buffer
	for {
		time.Sleep(time.Millisecond) // a slow client
		p, ok := sub.Next()
		if !ok {
			break
		}
		got.Write(p)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("the client got %d bytes, want all %d in order", got.Len(), want.Len())
	}
}

// TestConsoleSlowClientDropped: a client more than maxPending bytes behind
// is dropped: it gets what was kept for it, then the end, while the hub
// goes on serving others and keeping its history.
func TestConsoleSlowClientDropped(t *testing.T) {
	h := New(1 << 10)
	_, stuck, cancel := h.Subscribe(false)
	defer cancel()
	chunk := bytes.Repeat([]byte("x"), 4096)
	for range h.maxPending()/len(chunk) + 1 {
		h.publish(chunk)
	}
	p, ok := stuck.Next()
	if !ok || len(p) != h.maxPending() {
		t.Fatalf("dropped client: first next() = %d bytes, %v; want the %d bytes kept for it", len(p), ok, h.maxPending())
	}
	if _, ok := stuck.Next(); ok {
		t.Error("dropped client: next() after its output = ok, want the end")
	}
	past, fresh, cancel2 := h.Subscribe(true)
	defer cancel2()
	h.publish([]byte("still here\n"))
	if len(past) != 1<<10 {
		t.Errorf("history %d bytes, want 1024", len(past))
	}
	if p, ok := fresh.Next(); !ok || string(p) != "still here\n" {
		t.Errorf("a new client got %q, %v", p, ok)
	}
}

// TestConsoleCancel: cancel and close end a client's stream.
func TestConsoleCancel(t *testing.T) {
	h := New(1 << 10)
	_, a, cancelA := h.Subscribe(false)
	_, b, cancelB := h.Subscribe(false)
	defer cancelB()
	cancelA()
	if _, ok := a.Next(); ok {
		t.Error("cancelled client: next() = ok")
	}
	done := make(chan bool)
	go func() { _, ok := b.Next(); done <- ok }()
	h.Close()
	select {
	case ok := <-done:
		if ok {
			t.Error("after close: next() = ok")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("next() still waits after close")
	}
	if _, closedSub, _ := h.Subscribe(true); closedSub != nil {
		if _, ok := closedSub.Next(); ok {
			t.Error("subscribing to a closed console: next() = ok")
		}
	}
}

// TestConsoleLive: a session is live while it reads from the guest; when
// the guest's side goes away (a failed migration's incoming QEMU) it is not,
// and a new session (the next attempt's domain) is live again and delivers
// to the clients that stayed subscribed.
func TestConsoleLive(t *testing.T) {
	h := New(64 << 10)
	defer h.Close()
	if h.Live() {
		t.Fatal("live before any session")
	}
	first, guest := net.Pipe()
	h.Attach(first)
	if !h.Live() {
		t.Fatal("not live with a session")
	}
	_, sub, cancel := h.Subscribe(false)
	defer cancel()
	guest.Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.Live() {
		if time.Now().After(deadline) {
			t.Fatal("still live 5 s after the guest's side closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	second, guest2 := net.Pipe()
	defer guest2.Close()
	h.Attach(second)
	if !h.Live() {
		t.Fatal("a new session is not live")
	}
	go func() { _, _ = guest2.Write([]byte("TICK 1\n")) }()
	got := make(chan string, 1)
	go func() {
		p, _ := sub.Next()
		got <- string(p)
	}()
	select {
	case p := <-got:
		if p != "TICK 1\n" {
			t.Errorf("the client got %q, want the new session's output", p)
		}
	case <-time.After(5 * time.Second):
		t.Error("the subscribed client got nothing from the new session within 5 s")
	}
}
