package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestClaim(t *testing.T) {
	owner := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid"}}
	now := metav1.Now()
	deletingOwner := owner.DeepCopy()
	deletingOwner.DeletionTimestamp = &now
	replaced := owner.DeepCopy()
	replaced.UID = "new-vm-uid"
	ours := []metav1.OwnerReference{Ref(owner, v1.VirtualMachineGroupVersionKind)}
	theirs := []metav1.OwnerReference{Ref(&metav1.ObjectMeta{Name: "x", UID: "other"}, v1.VirtualMachineGroupVersionKind)}

	cases := []struct {
		name      string
		owner     *v1.VirtualMachine
		refs      []metav1.OwnerReference
		match     bool
		live      *v1.VirtualMachine // the owner as the API server has it; nil: the owner
		liveErr   error
		wantOwned bool
		wantPatch string // "" none, "adopt", "release"
		wantErr   bool
	}{
		{name: "owned and matching", owner: owner, refs: ours, match: true, wantOwned: true},
		{name: "owned by another", owner: owner, refs: theirs, match: true},
		{name: "orphan matching is adopted", owner: owner, match: true, wantOwned: true, wantPatch: "adopt"},
		{name: "orphan not matching", owner: owner, match: false},
		{name: "orphan, owner deleting", owner: deletingOwner, match: true},
		{name: "orphan, owner gone on recheck", owner: owner, match: true, liveErr: errors.New("gone"), wantErr: true},
		{name: "orphan, owner replaced on recheck", owner: owner, live: replaced, match: true, wantErr: true},
		{name: "orphan, owner deleting on recheck", owner: owner, live: deletingOwner, match: true, wantErr: true},
		{name: "owned, no longer matching, released", owner: owner, refs: ours, match: false, wantPatch: "release"},
		{name: "owned, not matching, owner deleting: kept", owner: deletingOwner, refs: ours, match: false, wantOwned: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vmi-uid", OwnerReferences: tc.refs}}
			var patched []metav1.OwnerReference
			var patchedUID types.UID
			calls := 0
			m := &Manager{
				Owner:     tc.owner,
				OwnerKind: v1.VirtualMachineGroupVersionKind,
				Match:     func(metav1.Object) bool { return tc.match },
				Patch: func(_ context.Context, name string, data []byte) error {
					calls++
					var p struct {
						Metadata struct {
							UID             types.UID               `json:"uid"`
							OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
						} `json:"metadata"`
					}
					if err := json.Unmarshal(data, &p); err != nil {
						t.Fatal(err)
					}
					patched, patchedUID = p.Metadata.OwnerReferences, p.Metadata.UID
					return nil
				},
				Live: func(context.Context) (metav1.Object, error) {
					if tc.live != nil {
						return tc.live, tc.liveErr
					}
					return tc.owner, tc.liveErr
				},
			}
			owned, err := m.Claim(context.Background(), vmi)
			if (err != nil) != tc.wantErr || owned != tc.wantOwned {
				t.Fatalf("Claim = %v, %v; want owned %v, error %v", owned, err, tc.wantOwned, tc.wantErr)
			}
			switch tc.wantPatch {
			case "":
				if calls != 0 {
					t.Fatalf("unexpected patch")
				}
			case "adopt":
				if calls != 1 || len(patched) != 1 || patched[0].UID != "vm-uid" || !*patched[0].Controller || patchedUID != "vmi-uid" {
					t.Fatalf("adopt patch = %+v uid %q", patched, patchedUID)
				}
			case "release":
				if calls != 1 || len(patched) != 0 {
					t.Fatalf("release patch = %+v", patched)
				}
			}
		})
	}
}
