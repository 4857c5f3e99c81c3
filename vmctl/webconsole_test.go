package vmctl

import (
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/websocket"
)

// browsers is a RunCommand recording the browser commands vmctl runs;
// those named in fail fail.
type browsers struct {
	mu   sync.Mutex
	ran  [][]string
	fail map[string]bool
}

func (b *browsers) run(cmd *exec.Cmd) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ran = append(b.ran, cmd.Args)
	if b.fail[cmd.Args[0]] {
		return errors.New("no display")
	}
	return nil
}

func (b *browsers) commands() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.ran...)
}

var webURL = regexp.MustCompile(`^Web console of (\S+): (http://127\.0\.0\.1:\d+)(/\S*)\n$`)

// startWeb runs vmctl with args (which include --web) in the background
// until it printed the page's URL, and returns what it printed of it: the
// VMI's namespace/name, the proxy's URL and the page's path and fragment.
func startWeb(t *testing.T, api *fakeAPI, b *browsers, args ...string) (vmi, proxy, page string, errOut *syncBuffer, stop func() error) {
	t.Helper()
	out, errOut, stop := api.background(Options{RunCommand: b.run}, args...)
	waitFor(t, "vmctl to print the URL", func() bool { return webURL.MatchString(out.String()) })
	m := webURL.FindStringSubmatch(out.String())
	return m[1], m[2], m[3], errOut, stop
}

// TestWebConsoleURL: console --web and vnc --web print the URL of
// virt-api's page for the VMI and view, open it in a browser, and the
// page's path reaches the API server through the proxy with the
// kubeconfig's token.
func TestWebConsoleURL(t *testing.T) {
	t.Setenv("BROWSER", "")
	for _, tc := range []struct {
		args       []string
		vmi, page  string
		apiRequest string
	}{
		{args: []string{"console", "vmi1", "--web"}, vmi: "ns1/vmi1",
			page: prefix + "ns1/virtualmachineinstances/vmi1/console/web/#console"},
		{args: []string{"vnc", "vmi1", "--web"}, vmi: "ns1/vmi1",
			page: prefix + "ns1/virtualmachineinstances/vmi1/console/web/#vnc"},
		{args: []string{"-n", "default", "console", "myvm", "--web"}, vmi: "default/myvm",
			page: prefix + "default/virtualmachineinstances/myvm/console/web/#console"},
		{args: []string{"vnc", "-n", "other", "_", "--web", "--address", "127.0.0.1"}, vmi: "other/_",
			page: prefix + "other/virtualmachineinstances/_/console/web/#vnc"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			api := newFakeAPI(t)
			api.setAnswer(answerJSON(http.StatusOK, "<html>web console</html>"))
			b := &browsers{}
			vmi, proxy, page, errOut, stop := startWeb(t, api, b, tc.args...)
			if vmi != tc.vmi || page != tc.page {
				t.Errorf("printed the page of %s at %s, want that of %s at %s", vmi, page, tc.vmi, tc.page)
			}
			opener := "xdg-open"
			switch runtime.GOOS {
			case "darwin":
				opener = "open"
			case "windows":
				opener = "rundll32"
			}
			waitFor(t, "the browser to be started", func() bool { return len(b.commands()) > 0 })
			if got := b.commands()[0]; got[0] != opener || got[len(got)-1] != proxy+page {
				t.Errorf("ran %q, want %s with the URL", got, opener)
			}

			resp, err := http.Get(proxy + page)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "<html>web console</html>" {
				t.Errorf("GET the page: %s %q, want the API server's 200 and page", resp.Status, body)
			}
			reqs := api.recorded()
			want := strings.TrimSuffix(page, page[strings.Index(page, "#"):])
			if len(reqs) != 1 || reqs[0].Path != want || reqs[0].Auth != "Bearer "+testToken {
				t.Errorf("the API server saw %+v, want one GET %s with the bearer token", reqs, want)
			}
			if err := stop(); err != nil {
				t.Errorf("interrupted vmctl returned %v, want nil", err)
			}
			if got := errOut.String(); strings.Contains(got, "by hand") {
				t.Errorf("stderr says the browser failed:\n%s", got)
			}
		})
	}
}

// TestWebConsoleBrowser: $BROWSER's commands are tried in order (%s is the
// URL), and when none starts, vmctl says to open the URL by hand and keeps
// serving.
func TestWebConsoleBrowser(t *testing.T) {
	api := newFakeAPI(t)
	t.Setenv("BROWSER", "firefox --new-window %s:chromium")
	b := &browsers{fail: map[string]bool{"firefox": true}}
	_, proxy, page, errOut, _ := startWeb(t, api, b, "console", "vmi1", "--web")
	waitFor(t, "two browser commands", func() bool { return len(b.commands()) == 2 })
	want := [][]string{{"firefox", "--new-window", proxy + page}, {"chromium", proxy + page}}
	if d := cmp.Diff(want, b.commands()); d != "" {
		t.Errorf("browser commands (-want +got):\n%s", d)
	}
	if strings.Contains(errOut.String(), "by hand") {
		t.Errorf("stderr says the browser failed though chromium started:\n%s", errOut)
	}

	t.Setenv("BROWSER", "firefox")
	_, proxy, _, errOut, _ = startWeb(t, api, b, "vnc", "vmi1", "--web")
	waitFor(t, "the failure to be reported", func() bool { return strings.Contains(errOut.String(), "by hand") })
	if want := "Could not open a browser (firefox: no display); open the URL above by hand.\n"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
	resp, err := http.Get(proxy + "/api")
	if err != nil {
		t.Fatalf("the proxy stopped serving when the browser failed: %v", err)
	}
	_ = resp.Body.Close()
}

// serveConsole answers WebSocket requests with a console as virt-api
// serves it: golang.org/x/net/websocket, the plain.kubevirt.io subprotocol,
// a greeting, then an echo. (It does not check the Origin header, as
// virt-api and kube-apiserver do not: the proxy must.) It is a
// fakeAPI.refuse.
func serveConsole(w http.ResponseWriter, r *http.Request) bool {
	websocket.Server{
		Handshake: func(cfg *websocket.Config, _ *http.Request) error {
			for _, p := range cfg.Protocol {
				if p == PlainStreamProtocol {
					cfg.Protocol = []string{p}
					return nil
				}
			}
			return errors.New("no plain.kubevirt.io")
		},
		Handler: func(ws *websocket.Conn) {
			if websocket.Message.Send(ws, []byte("login: ")) != nil {
				return
			}
			for {
				var msg []byte
				if websocket.Message.Receive(ws, &msg) != nil || websocket.Message.Send(ws, msg) != nil {
					return
				}
			}
		},
	}.ServeHTTP(w, r)
	return true
}

// TestWebProxy: plain requests and WebSocket streams go through the proxy
// with the kubeconfig's token; requests for other hosts, from pages of
// other origins, or for other paths are refused and never reach the API
// server.
func TestWebProxy(t *testing.T) {
	api := newFakeAPI(t)
	api.setAnswer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"method":"`+r.Method+`","query":"`+r.URL.RawQuery+`"}`)
	})
	api.refuse = serveConsole
	_, proxy, _, _, _ := startWeb(t, api, &browsers{}, "console", "vmi1", "--web")
	host := strings.TrimPrefix(proxy, "http://")

	t.Run("GET", func(t *testing.T) {
		for _, reqHost := range []string{host, "localhost:" + strings.Split(host, ":")[1], "127.0.0.1"} {
			before := len(api.recorded())
			req, _ := http.NewRequest(http.MethodGet, proxy+"/api/v1/namespaces?limit=1", nil)
			req.Host = reqHost
			req.Header.Set("Origin", "http://"+reqHost)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != `{"method":"GET","query":"limit=1"}` {
				t.Errorf("Host %s: %s %s, want the API server's answer", reqHost, resp.Status, body)
			}
			reqs := api.recorded()[before:]
			if len(reqs) != 1 || reqs[0].Path != "/api/v1/namespaces" || reqs[0].Auth != "Bearer "+testToken {
				t.Errorf("Host %s: the API server saw %+v, want GET /api/v1/namespaces with the bearer token", reqHost, reqs)
			}
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		before := len(api.recorded())
		path := prefix + "ns1/virtualmachineinstances/vmi1/console"
		cfg, err := websocket.NewConfig("ws://"+host+path, proxy)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Protocol = []string{PlainStreamProtocol}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatalf("WebSocket through the proxy: %v", err)
		}
		defer func() { _ = ws.Close() }()
		_ = ws.SetDeadline(time.Now().Add(10 * time.Second))
		if got := ws.Config().Protocol; !cmp.Equal(got, []string{PlainStreamProtocol}) {
			t.Errorf("subprotocol %q, want %s", got, PlainStreamProtocol)
		}
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil || string(msg) != "login: " {
			t.Fatalf("first message %q, %v, want the console's greeting", msg, err)
		}
		for _, sent := range []string{"root\r", strings.Repeat("x", 100000)} {
			if err := websocket.Message.Send(ws, []byte(sent)); err != nil {
				t.Fatal(err)
			}
			if err := websocket.Message.Receive(ws, &msg); err != nil || string(msg) != sent {
				t.Fatalf("echo of %d bytes: %d bytes, %v", len(sent), len(msg), err)
			}
		}
		reqs := api.recorded()[before:]
		if len(reqs) != 1 || reqs[0].Path != path || reqs[0].Auth != "Bearer "+testToken ||
			!cmp.Equal(reqs[0].Subprotocols, []string{PlainStreamProtocol}) {
			t.Errorf("the API server saw %+v, want the console's upgrade with the bearer token and subprotocol", reqs)
		}
	})

	t.Run("refused", func(t *testing.T) {
		before := len(api.recorded())
		for _, tc := range []struct {
			name, path, host, origin string
			code                     int
		}{
			{"DNS rebinding", "/api/v1/secrets", "evil.example", "", http.StatusForbidden},
			{"DNS rebinding, with the port", "/api/v1/secrets", "evil.example:" + strings.Split(host, ":")[1], "", http.StatusForbidden},
			{"another origin", "/api/v1/secrets", host, "https://evil.example", http.StatusForbidden},
			{"another local origin", "/api/v1/secrets", host, "http://localhost:3000", http.StatusForbidden},
			{"not the API", "/healthz", host, "", http.StatusNotFound},
			{"out of the API", "/apis/../debug/pprof/", host, "", http.StatusNotFound},
			{"a prefix of the API", "/apiserver", host, "", http.StatusNotFound},
		} {
			req, _ := http.NewRequest(http.MethodGet, proxy+tc.path, nil)
			req.Host = tc.host
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.code)
			}
		}
		cfg, _ := websocket.NewConfig("ws://"+host+prefix+"ns1/virtualmachineinstances/vmi1/console", "https://evil.example")
		cfg.Protocol = []string{PlainStreamProtocol}
		if ws, err := websocket.DialConfig(cfg); err == nil {
			_ = ws.Close()
			t.Error("a page of https://evil.example opened the console through the proxy")
		}
		if reqs := api.recorded()[before:]; len(reqs) != 0 {
			t.Errorf("refused requests reached the API server: %+v", reqs)
		}
	})
}

// TestWebFlags: --web and --proxy-only exclude each other, and console's
// --address and --port need --web; nothing is sent.
func TestWebFlags(t *testing.T) {
	api := newFakeAPI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vnc", "vmi1", "--web", "--proxy-only"}, "--web and --proxy-only exclude each other"},
		{[]string{"console", "vmi1", "--port", "8001"}, "--address and --port are those of --web's proxy: use them with --web"},
		{[]string{"console", "..", "--web"}, `invalid name or namespace ".."`},
	} {
		b := &browsers{}
		_, _, err := api.run(Options{RunCommand: b.run}, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("vmctl %v: error %v, want %q", tc.args, err, tc.want)
		}
		if len(b.commands()) != 0 {
			t.Errorf("vmctl %v ran %q", tc.args, b.commands())
		}
	}
	if n := len(api.recorded()); n != 0 {
		t.Errorf("refused commands sent %d requests", n)
	}
}
