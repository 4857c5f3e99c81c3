package vmctl

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestTimeline(t *testing.T) {
	started := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vmi1", Namespace: "ns1", Annotations: map[string]string{
		v1.StartTimelineAnnotation: `[{"phase":"created","time":"2026-11-28T10:00:00.000000Z"},{"phase":"podScheduled","time":"2026-11-28T10:00:01.000000Z"},{"phase":"ready","time":"2026-11-28T10:00:04.500000Z"}]`,
	}}}
	starting := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vmi2", Namespace: "ns1"}}
	api := newFakeAPI(t)
	opts := Options{VMClient: fake.NewSimpleClientset(started, starting)}
	out, _, err := api.run(opts, "-n", "ns1", "timeline", "vmi1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PHASE", "created       10:00:00.000  0.0s", "podScheduled  10:00:01.000  1.0s", "ready         10:00:04.500  3.5s", "total                       4.5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := api.run(opts, "-n", "ns1", "timeline", "vmi2"); err == nil || !strings.Contains(err.Error(), "has no start timeline yet") {
		t.Errorf("timeline of a VMI not yet Ready: %v", err)
	}
}
