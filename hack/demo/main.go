// Command demo is what `make demo` runs: it starts a local control plane
// (etcd + kube-apiserver built by hack/setup-k8s.sh), installs vmkit's CRDs,
// applies the example VMs and shows them as kubectl would. With -wait it
// keeps the control plane up until interrupted and prints a KUBECONFIG to
// use with kubectl; otherwise it stops everything before exiting.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func main() {
	wait := flag.Bool("wait", false, "keep the control plane running until interrupted")
	manifests := flag.String("manifests", "examples/manifests", "directory of VirtualMachine manifests to apply")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, *manifests, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, manifests string, wait bool) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	began := time.Now()
	env, err := testenv.Launch(ctx, testenv.Options{CRDs: all})
	if err != nil {
		return fmt.Errorf("starting the control plane (run `make test-deps` if binaries are missing): %w", err)
	}
	defer func() { _ = env.Stop() }()
	fmt.Printf("control plane up at %s with %d vmkit CRDs in %v\n", env.Config.Host, len(all), time.Since(began).Round(time.Millisecond))

	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(manifests, "vm-*.yaml"))
	if err != nil {
		return err
	}
	for i, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		vm := &v1.VirtualMachine{}
		if err := yaml.UnmarshalStrict(raw, vm); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		// Two example files share a name (v1 and v1alpha3 of one VM); keep both.
		vm.Name = fmt.Sprintf("%s-%d", vm.Name, i)
		vm.Namespace = "default"
		if _, err := client.KubevirtV1().VirtualMachines("default").Create(ctx, vm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("applying %s: %w", f, err)
		}
		fmt.Printf("applied %s as virtualmachine/%s\n", f, vm.Name)
	}
	if err := printTable(ctx, env, "virtualmachines"); err != nil {
		return err
	}
	fmt.Println("\nThe VM and VMI controllers (later issues) turn these into running guests.")
	if !wait {
		return nil
	}
	fmt.Printf("\nexport KUBECONFIG=%s\nkubectl get vm   # Ctrl-C stops the control plane\n", env.KubeconfigPath)
	<-ctx.Done()
	return nil
}

// printTable prints the server-side table kubectl shows for a resource.
func printTable(ctx context.Context, env *testenv.Env, resource string) error {
	raw, err := env.Kube.CoreV1().RESTClient().Get().AbsPath("/apis/kubevirt.io/v1/namespaces/default", resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return err
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return err
	}
	fmt.Printf("\n$ kubectl get %s\n", resource)
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	var head []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for i, c := range row.Cells {
			if table.ColumnDefinitions[i].Priority == 0 {
				if c == nil {
					c = ""
				}
				cells = append(cells, fmt.Sprint(c))
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}
