package vmctl

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vmkit/vmkit/vmctl/internal/webproxy"
)

// webConsole is what "console --web" and "vnc --web" serve: the proxy
// virt-api's web console page is opened through, and the page.
type webConsole struct {
	// namespace and name are the VMI's; the name "_" opens the page with
	// the namespace's VM list only.
	namespace, name string
	// view is the page's fragment: "console" (serial console) or "vnc".
	view string
	// address and port are where the proxy listens (port 0: any free
	// port).
	address string
	port    int
}

// webConsolePath is the path of virt-api's web console page of VMI
// namespace/name, with the fragment that opens view.
func webConsolePath(namespace, name, view string) string {
	return SubresourcesPrefix + "/namespaces/" + url.PathEscape(namespace) +
		"/virtualmachineinstances/" + url.PathEscape(name) + "/console/web/#" + view
}

// urlHost is the host the page's URL names for a proxy listening on
// address: the address itself, or the loopback address when it listens
// on every address.
func urlHost(address string) string {
	ip := net.ParseIP(address)
	switch {
	case address == "" || (ip != nil && ip.Equal(net.IPv4zero)):
		return "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		return "::1"
	}
	return address
}

// serveWebConsole serves the proxy, prints the page's URL, opens it in a
// browser, and serves until ctx ends.
func (c *cli) serveWebConsole(ctx context.Context, out, errOut io.Writer, w webConsole) error {
	if err := checkNames([]string{w.namespace, w.name}); err != nil {
		return err
	}
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	host := urlHost(w.address)
	logf := func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) }
	handler, err := webproxy.New(cfg, []string{host}, logf)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(w.address, strconv.Itoa(w.port)))
	if err != nil {
		return fmt.Errorf("can't listen on %s: %w", net.JoinHostPort(w.address, strconv.Itoa(w.port)), err)
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()
	defer func() { _ = server.Close() }()

	port := ln.Addr().(*net.TCPAddr).Port
	page := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + webConsolePath(w.namespace, w.name, w.view)
	fmt.Fprintf(out, "Web console of %s/%s: %s\n", w.namespace, w.name, page)
	if ip := net.ParseIP(w.address); w.address != "localhost" && (ip == nil || !ip.IsLoopback()) {
		fmt.Fprintf(errOut, "Warning: the proxy listens on %s: whoever reaches it there acts on the cluster with your credentials.\n", ln.Addr())
	}
	fmt.Fprintln(errOut, "Serving the web console until interrupted (Ctrl+C).")
	go c.openBrowser(page, errOut)

	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		return fmt.Errorf("serving the web console: %w", err)
	}
}

// openBrowser opens page in a browser, with the first of browserCommands
// that succeeds; when none does, it says the page can be opened by hand.
// It returns when the browser command does (a browser started by $BROWSER
// may run until it is closed).
func (c *cli) openBrowser(page string, errOut io.Writer) {
	var failures []string
	for _, args := range browserCommands(page) {
		cmd := exec.Command(args[0], args[1:]...)
		if err := c.opts.RunCommand(cmd); err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", args[0], err))
			continue
		}
		return
	}
	fmt.Fprintf(errOut, "Could not open a browser (%s); open the URL above by hand.\n", strings.Join(failures, "; "))
}

// browserCommands are the commands that may open page in a browser, to
// try in order: those of $BROWSER when it is set (a list separated like
// PATH's, each a command with arguments in which %s stands for the page,
// else the page is the last argument), else the desktop's opener
// (xdg-open; open on macOS).
func browserCommands(page string) [][]string {
	var cmds [][]string
	for _, command := range strings.Split(os.Getenv("BROWSER"), string(os.PathListSeparator)) {
		args := strings.Fields(command)
		if len(args) == 0 {
			continue
		}
		replaced := false
		for i, a := range args {
			if strings.Contains(a, "%s") {
				args[i] = strings.ReplaceAll(a, "%s", page)
				replaced = true
			}
		}
		if !replaced {
			args = append(args, page)
		}
		cmds = append(cmds, args)
	}
	if len(cmds) > 0 {
		return cmds
	}
	switch runtime.GOOS {
	case "darwin":
		return [][]string{{"open", page}}
	case "windows":
		return [][]string{{"rundll32", "url.dll,FileProtocolHandler", page}}
	}
	return [][]string{{"xdg-open", page}}
}
