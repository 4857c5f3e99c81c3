// Package webconsole is virt-api's web console: a small page, served by
// virt-api under a VMI's console subresource, that lists the VMs of a
// namespace with their state and start, stop, restart, pause and unpause
// buttons, and opens a VMI's serial console in a terminal (xterm.js) and its
// graphical console (noVNC) over virt-api's own WebSockets.
//
// The page lives at
//
//	/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}/console/web/
//
// so kube-apiserver and virt-api authorize it exactly as the serial
// console: get on virtualmachineinstances/console in the namespace (the
// kubevirt.io:view role does not give it; kubevirt.io:edit and admin do).
// `_` as the name, which no VMI can have, opens the namespace's list alone;
// the fragment #console or #vnc opens the named VMI's consoles. The page
// calls the API server with the user's own credentials through the same
// origin: `kubectl proxy` or `vmctl console --web` (docs/console.md). No
// Service is exposed for it.
//
// Only vmkit's own page code (ui/) is in the repository. The libraries it
// loads are dependencies, pinned by package-lock.json and fetched by
// hack/build-webconsole.sh with `npm ci` into third_party/, which the build
// embeds; nothing is loaded from elsewhere at run time, as the page's
// Content-Security-Policy says.
package webconsole

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed ui
var ui embed.FS

//go:embed third_party
var thirdParty embed.FS

// Libraries is the browser libraries this build embeds (xterm/, novnc/):
// empty when hack/build-webconsole.sh did not run before `go build`.
func Libraries() fs.FS {
	sub, err := fs.Sub(thirdParty, "third_party")
	if err != nil {
		panic(err) // a literal directory of this package
	}
	return sub
}

// required are the library files the page cannot work without.
var required = []string{"xterm/xterm.mjs", "xterm/addon-fit.mjs", "xterm/xterm.css", "novnc/core/rfb.js"}

// Check says whether libs hold what the page loads, naming what is missing
// and the command that fetches it.
func Check(libs fs.FS) error {
	var missing []string
	for _, f := range required {
		if _, err := fs.Stat(libs, f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return errors.New("the web console's libraries are not in this build (missing " + strings.Join(missing, ", ") +
			"): run hack/build-webconsole.sh before go build")
	}
	return nil
}

// contentSecurityPolicy keeps the page to its own origin: its scripts,
// styles and the libraries come from virt-api, its requests and WebSockets
// go to the API server it was loaded through. xterm.js sets inline styles
// (its DOM renderer), noVNC draws into a canvas.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page and libs (normally Libraries()) for requests
// routed to it with the path value "file" set to the path below
// .../console/web/ (empty for the page itself). It answers GET and HEAD
// only; authorization is the caller's.
func Handler(libs fs.FS) http.Handler {
	page, err := fs.Sub(ui, "ui")
	if err != nil {
		panic(err)
	}
	missing := Check(libs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file := r.PathValue("file")
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if file == "" {
			file = "index.html"
		}
		fsys, name := page, file
		if rest, ok := strings.CutPrefix(file, "lib/"); ok {
			if missing != nil && !strings.HasSuffix(rest, "LICENSE") {
				http.Error(w, missing.Error(), http.StatusServiceUnavailable)
				return
			}
			fsys, name = libs, rest
		}
		if !fs.ValidPath(name) || strings.HasSuffix(file, "/") {
			http.NotFound(w, r)
			return
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", contentType(name))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(data)
	})
}

// contentType is a file's media type by its extension: Go's table depends
// on the machine's mime files, the browser's module loader needs
// JavaScript's.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	default:
		return "text/plain; charset=utf-8"
	}
}
