package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// chromiumPaths are where Debian's packages put headless Chromium
// (hack/setup-browser.sh installs chromium-headless-shell).
var chromiumPaths = []string{"/usr/bin/chromium-headless-shell", "/usr/bin/chromium", "/usr/lib/chromium/headless_shell"}

// TestWebConsole drives virt-api's web console in headless Chromium as a
// user with kubevirt.io:edit in one namespace, through kubectl proxy with
// that user's token (docs/console.md): the VM list, start, the serial
// console (the guest's boot line from its history, a command typed and
// its answer), the graphical console (a screenshot that is not blank), and
// the refusals: the same user in another namespace and a kubevirt.io:view
// user. The screenshots are the test's artifacts.
func TestWebConsole(t *testing.T) {
	c := suite.Need(t)
	browser := ""
	for _, p := range chromiumPaths {
		if _, err := os.Stat(p); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Fatalf("no headless Chromium (looked at %v): install it with hack/setup-browser.sh (part of make test-deps)", chromiumPaths)
	}
	ctx := t.Context()
	const ns, vmName = "e2e-web", "web"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	editor := webUser(t, c, ns, "web-editor", "kubevirt.io:edit")
	viewer := webUser(t, c, ns, "web-viewer", "kubevirt.io:view")

	vm := framework.ExampleVM(t, "vm-net.yaml", vmName, v1.RunStrategyHalted)
	vm.Namespace = ns
	framework.CreateVM(t, c, vm)

	base := kubectlProxy(t, c, editor)
	page := func(ns, name string) string {
		return fmt.Sprintf("%s/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/console/web/", base, ns, name)
	}
	artifacts := artifactDir(t)

	alloc, cancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()))...)
	defer cancel()
	tab, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	defer cancel()
	tab, cancel = context.WithTimeout(tab, 8*time.Minute)
	defer cancel()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, actions...); err != nil {
			shot(t, tab, filepath.Join(artifacts, "failed.png"))
			t.Fatalf("%s: %v", what, err)
		}
	}
	// until evaluates expr in the page until it is true.
	until := func(what, expr string, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		var last string
		for time.Now().Before(deadline) {
			if ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](expr)); err == nil && ok {
				return
			}
			last, _ = chromedp.Run(tab, chromedp.Evaluate[string](`(window.webconsole ? webconsole.status() + " | " + webconsole.serialText().slice(-300) : "") + " | " + document.getElementById("notice").textContent`))
			time.Sleep(250 * time.Millisecond)
		}
		shot(t, tab, filepath.Join(artifacts, "failed.png"))
		t.Fatalf("%s: not within %v (page: %q)", what, timeout, last)
	}
	row := fmt.Sprintf(`tr[data-name=%q]`, vmName)

	// The list: the stopped VM, started with its button.
	began := time.Now()
	run("opening the list", chromedp.Navigate(page(ns, "_")), chromedp.WaitVisible(row+` button[data-action="start"]`))
	until("the VM listed as Stopped", fmt.Sprintf(`document.querySelector(%q).cells[1].textContent === "Stopped"`, row), 30*time.Second)
	shot(t, tab, filepath.Join(artifacts, "list.png"))
	run("start", chromedp.Click(row+` button[data-action="start"]`))
	until("the VM Running in the list", fmt.Sprintf(`document.querySelector(%q).cells[1].textContent === "Running"`, row), 3*time.Minute)
	t.Logf("start button → Running in the list: %v", time.Since(began).Round(time.Millisecond))

	// The serial console: the boot line (from the console's history), then
	// a command typed into the terminal and its answer (the shell computes
	// it: the typed line does not contain it).
	run("opening the serial console", chromedp.Click(row+` button[data-action="console"]`))
	until("the guest's boot line on the serial console", `webconsole.serialText().includes("GUEST-BOOTED")`, 2*time.Minute)
	// (The guest reports its DHCP lease on the console: typed after it, the
	// command's line is not cut by it.)
	until("the guest's shell prompt and DHCP lease", `webconsole.serialText().includes("vmkit-guest# ") && webconsole.serialText().includes("GUEST-DHCP-BOUND")`, time.Minute)
	run("typing a command", chromedp.Click("#console"), typeText("echo web-$((6*7))\r"))
	until("the command's answer", `webconsole.serialText().split("\n").some(l => l.trim() === "web-42")`, 30*time.Second)
	shot(t, tab, filepath.Join(artifacts, "serial.png"))

	// The graphical console: noVNC connects and draws the guest's screen
	// (SeaBIOS's text: the tiny guest's kernel has no VGA console).
	run("opening VNC", chromedp.Click("#tab-vnc"))
	until("VNC connected", `webconsole.status() === "vnc: connected"`, time.Minute)
	var screen []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if screen, err = chromedp.Run(tab, chromedp.Screenshot("#vnc canvas")); err != nil {
			t.Fatalf("a screenshot of the VNC canvas: %v", err)
		}
		n, err := colours(screen)
		if err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Logf("the VNC canvas shows %d colours", n)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the VNC canvas is blank (one colour) after 30 s")
		}
		time.Sleep(time.Second)
	}
	if err := os.WriteFile(filepath.Join(artifacts, "vnc.png"), screen, 0o644); err != nil {
		t.Fatal(err)
	}
	shot(t, tab, filepath.Join(artifacts, "vnc-page.png"))

	// Refusals: the editor in a namespace where it has no role, and a
	// kubevirt.io:view user in this one (console needs edit).
	text := func(url string) string {
		t.Helper()
		run("opening "+url, chromedp.Navigate(url))
		body, err := chromedp.Run(tab, chromedp.Text("body"))
		if err != nil {
			t.Fatalf("the text of %s: %v", url, err)
		}
		return body
	}
	body := text(page("default", "_"))
	if !strings.Contains(body, "forbidden") || !strings.Contains(body, "virtualmachineinstances/console") {
		t.Errorf("the editor of %s opened default's page: %.300q", ns, body)
	}
	viewerPage := kubectlProxy(t, c, viewer) + strings.TrimPrefix(page(ns, vmName), base)
	body = text(viewerPage)
	if !strings.Contains(body, "forbidden") || !strings.Contains(body, "web-viewer") {
		t.Errorf("a kubevirt.io:view user opened the console page: %.300q", body)
	}
	t.Logf("screenshots in %s", artifacts)
}

// typeText types s into the focused element as a keyboard does: a keyDown
// with the text and a keyUp per character ("\r" is Enter). chromedp's
// SendKeys adds a char event after each keyDown, which xterm.js, handling
// the keyDown itself, would take as a second key press.
func typeText(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		for _, r := range s {
			down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: string(r), Text: string(r), UnmodifiedText: string(r)}
			if r == '\r' {
				down.Key, down.Code, down.WindowsVirtualKeyCode, down.NativeVirtualKeyCode = "Enter", "Enter", 13, 13
			}
			up := down
			up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
			for _, ev := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, tgt, input.DispatchKeyEvent, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// webUser creates the service account name in ns bound to the cluster
// role, and returns a kubeconfig file with a token of it.
func webUser(t *testing.T, c *cluster.Cluster, ns, name, role string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tok, err := c.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectlProxy runs `kubectl proxy` with kubeconfig on a free port until the
// test ends, and returns its address.
func kubectlProxy(t *testing.T, c *cluster.Cluster, kubeconfig string) string {
	t.Helper()
	k := kubectlFor(t, c)
	cmd := exec.Command(k.bin, "--kubeconfig", kubeconfig, "proxy", "--port=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`Starting to serve on (\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("kubectl proxy: %q, %v (%s)", line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return "http://" + m[1]
}

// artifactDir is _output/artifacts/<test name>, emptied: what a test
// leaves there for a reader (screenshots) stays after it ends.
func artifactDir(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "_output", "artifacts", t.Name())
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shot saves a screenshot of the whole page, for the test's artifacts.
func shot(t *testing.T, tab context.Context, path string) {
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", path, err)
		return
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", path, err)
	}
}

// colours counts the distinct colours of a PNG, up to 16.
func colours(data []byte) (int, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return 0, fmt.Errorf("the screenshot is not a PNG: %w", err)
	}
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= 16 {
				return len(seen), nil
			}
		}
	}
	return len(seen), nil
}
