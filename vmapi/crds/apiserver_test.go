package crds_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/wirecompat"
	"github.com/vmkit/vmkit/vmapi/crds"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
)

// cluster is one API server with vmkit's CRDs, shared by the tests in this file.
type cluster struct {
	env      *testenv.Env
	dyn      dynamic.Interface
	typed    versioned.Interface
	ns       string
	timeout  time.Duration
	warnings *warningRecorder
}

// warningRecorder keeps the API server's warnings (deprecated versions).
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) saw(substr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.seen {
		if strings.Contains(s, substr) {
			return true
		}
	}
	return false
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{CRDs: all})
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{env: env, dyn: dyn, typed: typed, warnings: warnings, ns: "vmkit-crds", timeout: 30 * time.Second}
	ctx := c.ctx(t)
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	t.Cleanup(cancel)
	return ctx
}

var resources = map[string]string{
	"VirtualMachine":                   "virtualmachines",
	"VirtualMachineInstance":           "virtualmachineinstances",
	"VirtualMachineInstanceReplicaSet": "virtualmachineinstancereplicasets",
	"VirtualMachineInstanceMigration":  "virtualmachineinstancemigrations",
	"KubeVirt":                         "kubevirts",
	"VirtualMachineInstancePreset":     "virtualmachineinstancepresets",

	"VirtualMachineInstancetype":        "virtualmachineinstancetypes",
	"VirtualMachineClusterInstancetype": "virtualmachineclusterinstancetypes",
	"VirtualMachinePreference":          "virtualmachinepreferences",
	"VirtualMachineClusterPreference":   "virtualmachineclusterpreferences",

	"VirtualMachinePool": "virtualmachinepools",

	"VirtualMachineExport": "virtualmachineexports",

	"VirtualMachineSnapshot":        "virtualmachinesnapshots",
	"VirtualMachineSnapshotContent": "virtualmachinesnapshotcontents",
	"VirtualMachineRestore":         "virtualmachinerestores",
}

// clusterScoped are the kinds without a namespace.
var clusterScoped = map[string]bool{"VirtualMachineClusterInstancetype": true, "VirtualMachineClusterPreference": true}

// readSample reads a manifest from vmapi/v1/testdata (or, for a name
// starting with instancetype/, pool/ or export/, that API's
// vmapi/<group>/v1beta1/testdata) as an unstructured object.
func readSample(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	path := filepath.Join("..", "v1", "testdata", name)
	if rest, ok := strings.CutPrefix(name, "instancetype/"); ok {
		path = filepath.Join("..", "instancetype", "v1beta1", "testdata", rest)
	}
	for _, group := range []string{"pool", "export", "snapshot"} {
		if rest, ok := strings.CutPrefix(name, group+"/"); ok {
			path = filepath.Join("..", group, "v1beta1", "testdata", rest)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}

func (c *cluster) resource(obj *unstructured.Unstructured) dynamic.ResourceInterface {
	gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
	r := c.dyn.Resource(gv.WithResource(resources[obj.GetKind()]))
	if clusterScoped[obj.GetKind()] {
		return r
	}
	return r.Namespace(c.ns)
}

// typedGet reads an object back through the generated clientset and returns it as JSON.
func (c *cluster) typedGet(ctx context.Context, kind, name string) (map[string]any, error) {
	var obj any
	var err error
	v1 := c.typed.KubevirtV1()
	switch kind {
	case "VirtualMachine":
		obj, err = v1.VirtualMachines(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineInstance":
		obj, err = v1.VirtualMachineInstances(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineInstanceReplicaSet":
		obj, err = v1.VirtualMachineInstanceReplicaSets(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineInstanceMigration":
		obj, err = v1.VirtualMachineInstanceMigrations(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "KubeVirt":
		obj, err = v1.KubeVirts(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineInstancePreset":
		obj, err = v1.VirtualMachineInstancePresets(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineInstancetype":
		obj, err = c.typed.InstancetypeV1beta1().VirtualMachineInstancetypes(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineClusterInstancetype":
		obj, err = c.typed.InstancetypeV1beta1().VirtualMachineClusterInstancetypes().Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachinePreference":
		obj, err = c.typed.InstancetypeV1beta1().VirtualMachinePreferences(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineClusterPreference":
		obj, err = c.typed.InstancetypeV1beta1().VirtualMachineClusterPreferences().Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachinePool":
		obj, err = c.typed.PoolV1beta1().VirtualMachinePools(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineExport":
		obj, err = c.typed.ExportV1beta1().VirtualMachineExports(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineSnapshot":
		obj, err = c.typed.SnapshotV1beta1().VirtualMachineSnapshots(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineSnapshotContent":
		obj, err = c.typed.SnapshotV1beta1().VirtualMachineSnapshotContents(c.ns).Get(ctx, name, metav1.GetOptions{})
	case "VirtualMachineRestore":
		obj, err = c.typed.SnapshotV1beta1().VirtualMachineRestores(c.ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return wirecompat.ToMap(obj)
}

func TestAPIServer(t *testing.T) {
	c := startCluster(t)
	t.Run("SamplesRoundTrip", c.testSamplesRoundTrip)
	t.Run("PrinterColumns", c.testPrinterColumns)
	t.Run("Rejects", c.testRejects)
	t.Run("ScaleSubresource", c.testScale)
	t.Run("MatcherUpdate", c.testMatcherUpdate)
	t.Run("ExportSpecImmutable", c.testExportSpecImmutable)
	t.Run("Examples", c.testExamples)
	t.Run("KubeVirtExamples", c.testKubeVirtExamples)
	t.Run("KubectlNames", c.testKubectlNames)
	t.Run("KubeVirtDocumentedCommands", c.testKubeVirtDocumentedCommands)
}

// testSamplesRoundTrip creates every sample (spec through the main resource,
// status through the status subresource, or with the spec for the VMI, which
// has none) and reads it back through the
// generated clientset: the API server's pruning and our types must keep
// every field.
func (c *cluster) testSamplesRoundTrip(t *testing.T) {
	for _, name := range []string{"vm-seed-v1alpha3.yaml", "vm-full.yaml", "vmi-status.yaml", "vmirs.yaml", "vmim.yaml", "kubevirt.yaml",
		"vm-instancetype.yaml", "vm-inferred.yaml", "vmi-devices.yaml",
		"instancetype/instancetype-full.yaml", "instancetype/instancetype-overcommit.yaml",
		"instancetype/clusterinstancetype-u1.yaml", "instancetype/clusterinstancetype-cx.yaml",
		"instancetype/preference-full.yaml", "instancetype/clusterpreference-windows.yaml", "instancetype/clusterpreference-fedora.yaml",
		"pool/pool-full.yaml", "pool/pool-minimal.yaml",
		"export/export-vm.yaml", "export/export-status.yaml",
		"snapshot/snapshot.yaml", "snapshot/snapshot-status.yaml", "snapshot/content.yaml", "snapshot/restore.yaml"} {
		t.Run(name, func(t *testing.T) {
			ctx := c.ctx(t)
			obj := readSample(t, name)
			if !clusterScoped[obj.GetKind()] {
				obj.SetNamespace(c.ns)
			}
			want := obj.DeepCopy().Object
			created, err := c.resource(obj).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			// The VMI has no status subresource (as in KubeVirt): its
			// create kept the status. The others write it separately.
			if status, ok := want["status"]; ok && obj.GetKind() != "VirtualMachineInstance" {
				created.Object["status"] = status
				if _, err := c.resource(obj).UpdateStatus(ctx, created, metav1.UpdateOptions{FieldValidation: "Strict"}); err != nil {
					t.Fatalf("update status: %v", err)
				}
			}
			got, err := c.typedGet(ctx, obj.GetKind(), obj.GetName())
			if err != nil {
				t.Fatalf("get through the clientset: %v", err)
			}
			for _, part := range []string{"spec", "status"} {
				if _, ok := want[part]; !ok {
					continue
				}
				if diff := wirecompat.Diff(want[part], got[part]); diff != "" {
					t.Errorf("%s changed on the way through the API server (-sent +read):\n%s", part, diff)
				}
			}
			if !strings.HasPrefix(obj.GetAPIVersion(), "kubevirt.io/") {
				return // one version only
			}
			v1obj, err := c.dyn.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: resources[obj.GetKind()]}).
				Namespace(c.ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil || v1obj.GetAPIVersion() != "kubevirt.io/v1" {
				t.Errorf("reading %s as kubevirt.io/v1: %v, %v", obj.GetName(), v1obj.GetAPIVersion(), err)
			}
			if strings.HasSuffix(obj.GetAPIVersion(), "v1alpha3") && !c.warnings.saw("kubevirt.io/v1alpha3 is deprecated") {
				t.Errorf("creating through v1alpha3 gave no deprecation warning")
			}
		})
	}
}

// testPrinterColumns asks for the Table kubectl renders and checks its columns.
func (c *cluster) testPrinterColumns(t *testing.T) {
	want := map[string][]string{
		"virtualmachines":                    {"Name", "Age", "Status", "Ready"},
		"virtualmachineinstances":            {"Name", "Age", "Phase", "IP", "NodeName", "Ready", "Live-Migratable", "Paused"},
		"virtualmachineinstancereplicasets":  {"Name", "Desired", "Current", "Ready", "Age"},
		"virtualmachineinstancemigrations":   {"Name", "Phase", "VMI"},
		"kubevirts":                          {"Name", "Age", "Phase"},
		"virtualmachineinstancetypes":        {"Name", "CPU", "Memory", "Age"},
		"virtualmachineclusterinstancetypes": {"Name", "CPU", "Memory", "Age"},
		"virtualmachinepreferences":          {"Name", "Age"},
		"virtualmachineclusterpreferences":   {"Name", "Age"},
		"virtualmachinepools":                {"Name", "Desired", "Current", "Ready", "Age"},
		"virtualmachineexports":              {"Name", "SourceKind", "SourceName", "Phase"},
		"virtualmachinesnapshots":            {"Name", "SourceKind", "SourceName", "Phase", "ReadyToUse", "CreationTime", "Error"},
		"virtualmachinesnapshotcontents":     {"Name", "ReadyToUse", "CreationTime", "Error"},
		"virtualmachinerestores":             {"Name", "TargetKind", "TargetName", "Complete", "RestoreTime"},
	}
	for resource, cols := range want {
		ctx := c.ctx(t)
		path := []string{"/apis/kubevirt.io/v1/namespaces", c.ns, resource}
		switch resource {
		case "virtualmachineinstancetypes", "virtualmachinepreferences":
			path = []string{"/apis/instancetype.kubevirt.io/v1beta1/namespaces", c.ns, resource}
		case "virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences":
			path = []string{"/apis/instancetype.kubevirt.io/v1beta1", resource}
		case "virtualmachinepools":
			path = []string{"/apis/pool.kubevirt.io/v1beta1/namespaces", c.ns, resource}
		case "virtualmachineexports":
			path = []string{"/apis/export.kubevirt.io/v1beta1/namespaces", c.ns, resource}
		case "virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores":
			path = []string{"/apis/snapshot.kubevirt.io/v1beta1/namespaces", c.ns, resource}
		}
		raw, err := c.env.Kube.CoreV1().RESTClient().Get().AbsPath(path...).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatalf("%s: %v", resource, err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, col := range table.ColumnDefinitions {
			got = append(got, col.Name)
		}
		if strings.Join(got, ",") != strings.Join(cols, ",") {
			t.Errorf("%s columns = %v, want %v", resource, got, cols)
		}
		if len(table.Rows) == 0 {
			t.Errorf("%s: table has no rows; the samples should be listed", resource)
		}
	}
	// The VMI sample's status fills the Phase, IP and NodeName columns.
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "--kubeconfig", c.env.KubeconfigPath, "-n", c.ns, "get", "vm,vmi").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get vm,vmi: %v\n%s", err, out)
		}
		for _, s := range []string{"AGE   STATUS", "PHASE     IP", "NODENAME", "Running   10.244.0.12   node01"} {
			if !strings.Contains(string(out), s) {
				t.Errorf("kubectl get vm,vmi output lacks %q:\n%s", s, out)
			}
		}
		t.Logf("kubectl get vm,vmi:\n%s", out)
	}
}

// testRejects sends invalid objects and expects the CRD's rules to reject
// them with their message.
func (c *cluster) testRejects(t *testing.T) {
	cases := []struct {
		name   string
		sample string
		mutate func(spec map[string]any)
		want   string
	}{
		{"running and runStrategy", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			s["runStrategy"] = "Always"
		}, "spec.running and spec.runStrategy are mutually exclusive"},
		{"disk without volume", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			tmplSpec(s)["volumes"] = tmplSpec(s)["volumes"].([]any)[:1]
		}, "every disk must name a volume in spec.volumes"},
		{"volume with two sources", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			vol := tmplSpec(s)["volumes"].([]any)[0].(map[string]any)
			vol["emptyDisk"] = map[string]any{"capacity": "1Gi"}
		}, "volume rootfs must set exactly one source"},
		{"volume with no source", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			tmplSpec(s)["volumes"].([]any)[0] = map[string]any{"name": "rootfs"}
		}, "volume rootfs must set exactly one source"},
		{"duplicate volume names", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			vols := tmplSpec(s)["volumes"].([]any)
			vols[1].(map[string]any)["name"] = "rootfs"
		}, "volume names must be unique"},
		{"interface without network", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			delete(tmplSpec(s), "networks")
		}, "every interface must name a network in spec.networks"},
		{"wrong run strategy", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			delete(s, "running")
			s["runStrategy"] = "Sometimes"
		}, `spec.runStrategy: Unsupported value: "Sometimes"`},
		{"wrong disk bus", "vm-seed-v1alpha3.yaml", func(s map[string]any) {
			disk := tmplSpec(s)["domain"].(map[string]any)["devices"].(map[string]any)["disks"].([]any)[0].(map[string]any)
			disk["disk"] = map[string]any{"bus": "floppy"}
		}, `Unsupported value: "floppy"`},
		{"instancetype name and inferFromVolume", "vm-instancetype.yaml", func(s map[string]any) {
			s["instancetype"].(map[string]any)["inferFromVolume"] = "datadisk"
		}, "Name already set, should be cleared before setting inferFromVolume"},
		{"instancetype kind and inferFromVolume", "vm-inferred.yaml", func(s map[string]any) {
			s["instancetype"].(map[string]any)["kind"] = "VirtualMachineInstancetype"
		}, "Kind already set, should be cleared before setting inferFromVolume"},
		{"preference without name", "vm-instancetype.yaml", func(s map[string]any) {
			delete(s["preference"].(map[string]any), "name")
		}, "Either Name or InferFromVolume should be provided within the PreferenceMatcher"},
		{"instancetype of another kind", "vm-instancetype.yaml", func(s map[string]any) {
			s["instancetype"].(map[string]any)["kind"] = "VirtualMachinePreference"
		}, "got unexpected kind in InstancetypeMatcher: VirtualMachinePreference"},
		{"wrong inference failure policy", "vm-inferred.yaml", func(s map[string]any) {
			s["preference"].(map[string]any)["inferFromVolumeFailurePolicy"] = "Maybe"
		}, `Unsupported value: "Maybe"`},
		{"pool with negative replicas", "pool/pool-minimal.yaml", func(s map[string]any) {
			s["replicas"] = -1
		}, "spec.replicas in body should be greater than or equal to 0"},
		{"pool with an unknown sort policy", "pool/pool-full.yaml", func(s map[string]any) {
			s["scaleInStrategy"].(map[string]any)["proactive"].(map[string]any)["selectionPolicy"].(map[string]any)["sortPolicy"] = "Alphabetical"
		}, `Unsupported value: "Alphabetical"`},
		{"pool without a template", "pool/pool-minimal.yaml", func(s map[string]any) {
			delete(s, "virtualMachineTemplate")
		}, "spec.virtualMachineTemplate: Required value"},
		{"pool whose VM sets running and runStrategy", "pool/pool-minimal.yaml", func(s map[string]any) {
			s["virtualMachineTemplate"].(map[string]any)["spec"].(map[string]any)["running"] = true
		}, "spec.running and spec.runStrategy are mutually exclusive"},
		{"export of a Pod", "export/export-vm.yaml", func(s map[string]any) {
			s["source"] = map[string]any{"kind": "Pod", "name": "p"}
		}, "spec.source.kind: invalid kind"},
		{"export of a VM without its group", "export/export-vm.yaml", func(s map[string]any) {
			delete(s["source"].(map[string]any), "apiGroup")
		}, "spec.source.apiGroup: VM API group must be kubevirt.io"},
		{"export of a claim with a group", "export/export-vm.yaml", func(s map[string]any) {
			s["source"] = map[string]any{"kind": "PersistentVolumeClaim", "apiGroup": "kubevirt.io", "name": "disk"}
		}, "spec.source.apiGroup: PVC API group must be missing or blank"},
		{"export without a name", "export/export-vm.yaml", func(s map[string]any) {
			s["source"].(map[string]any)["name"] = ""
		}, "spec.source.name must not be empty"},
		{"snapshot of a Pod", "snapshot/snapshot.yaml", func(s map[string]any) {
			s["source"] = map[string]any{"kind": "Pod", "name": "p"}
		}, "spec.source.kind: invalid kind"},
		{"snapshot without a group", "snapshot/snapshot.yaml", func(s map[string]any) {
			delete(s["source"].(map[string]any), "apiGroup")
		}, "spec.source.apiGroup: missing apiGroup"},
		{"restore without a snapshot", "snapshot/restore.yaml", func(s map[string]any) {
			s["virtualMachineSnapshotName"] = ""
		}, "spec.virtualMachineSnapshotName"},
		{"restore of an unknown readiness policy", "snapshot/restore.yaml", func(s map[string]any) {
			s["targetReadinessPolicy"] = "Hope"
		}, `Unsupported value: "Hope"`},
		{"no vCPUs", "instancetype/instancetype-overcommit.yaml", func(s map[string]any) {
			s["cpu"].(map[string]any)["guest"] = 0
		}, "spec.cpu.guest: Invalid value: 0: spec.cpu.guest in body should be greater than or equal to 1"},
		{"no memory", "instancetype/instancetype-overcommit.yaml", func(s map[string]any) {
			delete(s, "memory")
		}, "spec.memory: Required value"},
		{"overcommit above 100", "instancetype/instancetype-overcommit.yaml", func(s map[string]any) {
			s["memory"].(map[string]any)["overcommitPercent"] = 101
		}, "should be less than or equal to 100"},
		{"overcommit with huge pages", "instancetype/instancetype-overcommit.yaml", func(s map[string]any) {
			s["memory"].(map[string]any)["hugepages"] = map[string]any{"pageSize": "2Mi"}
		}, "spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together."},
		{"unknown CPU topology", "instancetype/clusterpreference-fedora.yaml", func(s map[string]any) {
			s["cpu"].(map[string]any)["preferredCPUTopology"] = "preferCubes"
		}, `Unsupported value: "preferCubes"`},
		{"cores and threads at a ratio of 3", "instancetype/clusterpreference-fedora.yaml", func(s map[string]any) {
			s["cpu"].(map[string]any)["spreadOptions"].(map[string]any)["ratio"] = 3
		}, "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"},
		{"cores and threads at a socket ratio of 4", "instancetype/clusterpreference-fedora.yaml", func(s map[string]any) {
			s["preferSpreadSocketToCoreRatio"] = 4
		}, "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := c.ctx(t)
			obj := readSample(t, tc.sample)
			if !clusterScoped[obj.GetKind()] {
				obj.SetNamespace(c.ns)
			}
			obj.SetName("invalid")
			tc.mutate(obj.Object["spec"].(map[string]any))
			_, err := c.resource(obj).Create(ctx, obj, metav1.CreateOptions{})
			if err == nil {
				_ = c.resource(obj).Delete(ctx, "invalid", metav1.DeleteOptions{})
				t.Fatalf("the API server accepted it; want an error containing %q", tc.want)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an Invalid error containing %q", err, tc.want)
			}
		})
	}
}

func tmplSpec(vmSpec map[string]any) map[string]any {
	return vmSpec["template"].(map[string]any)["spec"].(map[string]any)
}

// testScale scales the replica set and the pool through the scale subresource.
func (c *cluster) testScale(t *testing.T) {
	t.Run("VirtualMachinePool", c.testPoolScale)
	ctx := c.ctx(t)
	rs := c.typed.KubevirtV1().VirtualMachineInstanceReplicaSets(c.ns)
	scale, err := rs.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Selector != "app=web" {
		t.Fatalf("scale = %+v, want 3 replicas and selector app=web", scale)
	}
	scale.Spec.Replicas = 5
	if _, err := rs.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	got, err := rs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 5 {
		t.Fatalf("spec.replicas = %v after scaling to 5", got.Spec.Replicas)
	}
}

// testExportSpecImmutable: an export's spec cannot change once created, as
// KubeVirt's admission says; its metadata can.
func (c *cluster) testExportSpecImmutable(t *testing.T) {
	ctx := c.ctx(t)
	obj := readSample(t, "export/export-vm.yaml")
	obj.SetNamespace(c.ns)
	obj.SetName("immutable")
	created, err := c.resource(obj).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.resource(obj).Delete(ctx, "immutable", metav1.DeleteOptions{}) }()
	created.SetLabels(map[string]string{"a": "b"})
	if created, err = c.resource(obj).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("a label change was refused: %v", err)
	}
	created.Object["spec"].(map[string]any)["ttlDuration"] = "5m0s"
	if _, err := c.resource(obj).Update(ctx, created, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec is immutable after creation") {
		t.Errorf("a spec change: %v, want spec is immutable after creation", err)
	}
}

// testMatcherUpdate changes the instance type a VM names: with a revision
// name pinned, the name may change only along with the revision name, as
// KubeVirt's webhook requires.
func (c *cluster) testMatcherUpdate(t *testing.T) {
	ctx := c.ctx(t)
	obj := readSample(t, "vm-instancetype.yaml")
	obj.SetNamespace(c.ns)
	obj.SetName("pinned")
	delete(obj.Object, "status")
	created, err := c.resource(obj).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	pref := created.Object["spec"].(map[string]any)["preference"].(map[string]any)
	pref["name"] = "centos"
	if _, err := c.resource(created).Update(ctx, created, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "the Matcher Name has been updated without updating the RevisionName") {
		t.Fatalf("renaming the preference without its revision: %v; want the revision name error", err)
	}
	delete(pref, "revisionName")
	if _, err := c.resource(created).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("renaming the preference and dropping its revision: %v", err)
	}
}

// testExamples creates every kubevirt.io and instancetype.kubevirt.io object
// of the manifests under examples/ with strict field validation.
func (c *cluster) testExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	ns := "vmkit-examples"
	if _, err := c.env.Kube.CoreV1().Namespaces().Create(c.ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		before := n
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			res, ok := resources[obj.GetKind()]
			if !ok {
				continue // a Job, a claim, ...
			}
			gv, _ := schema.ParseGroupVersion(obj.GetAPIVersion())
			var r dynamic.ResourceInterface = c.dyn.Resource(gv.WithResource(res))
			if !clusterScoped[obj.GetKind()] {
				r = c.dyn.Resource(gv.WithResource(res)).Namespace(ns)
			}
			if _, err := r.Create(c.ctx(t), obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s: %s %s: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
			}
			n++
		}
		if n == before {
			t.Errorf("%s holds no kubevirt.io or instancetype.kubevirt.io object", filepath.Base(f))
		}
	}
	if n == 0 {
		t.Error("no objects in the examples")
	}
}

// testPoolScale scales the pool sample through the scale subresource, which
// reads the selector from status.labelSelector.
func (c *cluster) testPoolScale(t *testing.T) {
	ctx := c.ctx(t)
	pools := c.typed.PoolV1beta1().VirtualMachinePools(c.ns)
	scale, err := pools.GetScale(ctx, "vm-pool-cirros", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 3 || scale.Status.Selector != "kubevirt.io/vmpool=vm-pool-cirros" {
		t.Fatalf("scale = %+v, want 3 replicas and the status's selector", scale)
	}
	scale.Spec.Replicas = 1
	if _, err := pools.UpdateScale(ctx, "vm-pool-cirros", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	got, err := pools.Get(ctx, "vm-pool-cirros", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 1 {
		t.Fatalf("spec.replicas = %v after scaling to 1", got.Spec.Replicas)
	}
}

// testKubeVirtExamples applies the shapes of KubeVirt v1.8's example
// manifests (testdata/kubevirt-examples: every kubevirt.io,
// instancetype.kubevirt.io and pool.kubevirt.io object of KubeVirt's
// examples/*.yaml, renamed, images and user data replaced) with strict field
// validation, as a KubeVirt user would, and reads each back through vmkit's
// generated clientset: no field may be unknown to the CRDs, and none lost
// by vmkit's Go types.
func (c *cluster) testKubeVirtExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "kubevirt-examples", "*.yaml"))
	if err != nil || len(files) < 30 {
		t.Fatalf("want the shapes of KubeVirt's examples in testdata/kubevirt-examples, found %d files (%v)", len(files), err)
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if _, ok := resources[obj.GetKind()]; !ok {
				t.Fatalf("%s: %s is not a vmkit kind", f, obj.GetKind())
			}
			if !clusterScoped[obj.GetKind()] {
				obj.SetNamespace(c.ns)
			}
			n++
			want := obj.DeepCopy().Object
			ctx := c.ctx(t)
			if _, err := c.resource(obj).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s: %s %s: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
				continue
			}
			got, err := c.typedGet(ctx, obj.GetKind(), obj.GetName())
			if err != nil {
				t.Errorf("%s: get %s: %v", filepath.Base(f), obj.GetName(), err)
				continue
			}
			// The typed clientset drops the type meta; durations come back
			// in Go's form (the shapes use it).
			for _, m := range []map[string]any{want, got} {
				for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
					delete(m, k)
				}
			}
			if diff := wirecompat.Diff(want, got); diff != "" {
				t.Errorf("%s: %s %s lost or changed fields through vmkit's types (-sent +read):\n%s", filepath.Base(f), obj.GetKind(), obj.GetName(), diff)
			}
		}
	}
	t.Logf("%d objects from %d files applied with strict validation", n, len(files))
}
