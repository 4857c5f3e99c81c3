package vmctl

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    Target
		wantErr string
	}{
		{in: "vmi/a", want: Target{Kind: "vmi", Name: "a"}},
		{in: "VM/a/ns", want: Target{Kind: "vm", Name: "a", Namespace: "ns"}},
		{in: "virtualmachineinstances/a.ns", want: Target{Kind: "vmi", Name: "a", Namespace: "ns"}},
		{in: "vms/a", want: Target{Kind: "vm", Name: "a"}},
		{in: "", wantErr: "target cannot be empty"},
		{in: "a", wantErr: `target "a" must contain type and name separated by '/'`},
		{in: "pod/a", wantErr: `unsupported resource type "pod": use vm or vmi`},
		{in: "vmi/", wantErr: `target "vmi/": name cannot be empty`},
		{in: "vmi/a/", wantErr: `target "vmi/a/": namespace cannot be empty`},
		{in: "vmi/a.", wantErr: `target "vmi/a.": namespace cannot be empty`},
		{in: "vmi/a/b/c", wantErr: `target "vmi/a/b/c" is not valid with more than two '/'`},
	}
	for _, tc := range tests {
		got, err := ParseTarget(tc.in)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("ParseTarget(%q) = %+v, %v, want error %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParsePort(t *testing.T) {
	tests := []struct {
		in      string
		want    ForwardedPort
		wantErr bool
	}{
		{in: "8080", want: ForwardedPort{8080, 8080, "tcp"}},
		{in: "8080:80", want: ForwardedPort{8080, 80, "tcp"}},
		{in: ":22", want: ForwardedPort{0, 22, "tcp"}},
		{in: "0:22", want: ForwardedPort{0, 22, "tcp"}},
		{in: "UDP/5353:53", want: ForwardedPort{5353, 53, "udp"}},
		{in: "tcp/22", want: ForwardedPort{22, 22, "tcp"}},
		{in: "0", wantErr: true},
		{in: "sctp/1", wantErr: true},
		{in: "1:0", wantErr: true},
		{in: "x:1", wantErr: true},
		{in: "1:65536", wantErr: true},
		{in: "", wantErr: true},
		{in: ":", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParsePort(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParsePort(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if d := cmp.Diff(tc.want, got); err != nil || d != "" {
			t.Errorf("ParsePort(%q): %v (-want +got):\n%s", tc.in, err, d)
		}
	}
}

// FuzzParseTarget: what parses formats back to the same target, and the
// name and namespace never carry a separator.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"vmi/a", "vm/a/b", "vmi/a.b", "x", "vmi//", "VirtualMachines/x.y.z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if tg.Name == "" || strings.Contains(tg.Name, "/") || (tg.Namespace == "" && strings.Contains(tg.Name, ".")) || strings.Contains(tg.Namespace, "/") {
			t.Fatalf("ParseTarget(%q) = %+v", s, tg)
		}
		back := tg.Kind + "/" + tg.Name
		if tg.Namespace != "" {
			back += "/" + tg.Namespace
		}
		if again, err := ParseTarget(back); err != nil || again != tg {
			t.Fatalf("ParseTarget(%q) = %+v, but %q parses as %+v, %v", s, tg, back, again, err)
		}
	})
}

// FuzzParsePort: parsed ports are in range and format back to themselves.
func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"22", "8080:80", ":22", "udp/53", "tcp/1:2", "x", "1:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePort(s)
		if err != nil {
			return
		}
		if p.Local < 0 || p.Local > 65535 || p.Remote < 1 || p.Remote > 65535 || (p.Protocol != "tcp" && p.Protocol != "udp") {
			t.Fatalf("ParsePort(%q) = %+v", s, p)
		}
		back := p.Protocol + "/" + strconv.Itoa(p.Local) + ":" + strconv.Itoa(p.Remote)
		if again, err := ParsePort(back); err != nil || again != p {
			t.Fatalf("ParsePort(%q) = %+v, but %q parses as %+v, %v", s, p, back, again, err)
		}
	})
}
