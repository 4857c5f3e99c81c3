package installstrategy

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// allows reports whether rules grant verb on group/resource.
func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

type access struct {
	group, resource, verb string
	allowed               bool
}

func checkAccess(t *testing.T, who string, rules []rbacv1.PolicyRule, want []access) {
	t.Helper()
	for _, a := range want {
		if got := allows(rules, a.group, a.resource, a.verb); got != a.allowed {
			t.Errorf("%s: %s %s.%s allowed = %v, want %v", who, a.verb, a.resource, a.group, got, a.allowed)
		}
	}
}

// TestVirtAPIRules: virt-api may do what serving the subresources takes
// (stop a VM by setting its runStrategy, record state change requests,
// shorten a VMI's grace period, delete the launcher pod of a forced
// restart, create migrations, find the virt-handler pod of a node in its
// own namespace, delegate authentication and authorization) and no more.
func TestVirtAPIRules(t *testing.T) {
	r := Rules()[0]
	if r.Component != v1.VirtAPIValue {
		t.Fatalf("Rules()[0] is %s, want virt-api", r.Component)
	}
	kv, core := v1.GroupName, ""
	checkAccess(t, "virt-api (cluster)", r.Cluster, []access{
		{kv, "virtualmachines", "get", true},
		{kv, "virtualmachines", "watch", true},
		{kv, "virtualmachines", "update", true},
		{kv, "virtualmachines", "patch", true},
		{kv, "virtualmachines", "delete", false},
		{kv, "virtualmachines", "create", false},
		{kv, "virtualmachines/status", "patch", true},
		{kv, "virtualmachines/status", "update", true},
		{kv, "virtualmachineinstances", "list", true},
		{kv, "virtualmachineinstances", "patch", true},
		{kv, "virtualmachineinstances", "update", false},
		{kv, "virtualmachineinstances", "delete", false},
		{kv, "virtualmachineinstances/status", "patch", false},
		{kv, "virtualmachineinstancemigrations", "create", true},
		{kv, "virtualmachineinstancemigrations", "delete", false},
		{kv, "kubevirts", "get", true},
		{kv, "virtualmachineinstancepresets", "watch", true},
		{kv, "virtualmachineinstancepresets", "create", false},
		{core, "nodes", "get", true},
		{core, "nodes", "patch", false},
		{core, "pods", "list", true},
		{core, "pods", "delete", true},
		{core, "pods", "create", false},
		{core, "pods", "patch", false},
		{core, "pods/exec", "create", false},
		{core, "secrets", "get", false},
		{"authentication.k8s.io", "tokenreviews", "create", true},
		{"authorization.k8s.io", "subjectaccessreviews", "create", true},
	})
	checkAccess(t, "virt-api (install namespace)", r.Namespace, []access{
		{core, "pods", "get", true},
		{core, "pods", "list", true},
		{core, "pods", "watch", true},
		{core, "pods", "create", false},
		{core, "pods", "delete", false},
		{core, "pods/exec", "create", false},
	})
	if !slices.Contains(r.BoundClusterRoles, "system:auth-delegator") || !slices.Contains(r.KubeSystemRoles, "extension-apiserver-authentication-reader") {
		t.Errorf("virt-api is not bound to system:auth-delegator and extension-apiserver-authentication-reader: %v %v", r.BoundClusterRoles, r.KubeSystemRoles)
	}
}

// TestUserClusterRoles: KubeVirt's cluster roles for users, aggregated into
// Kubernetes' admin, edit and view, with kubevirt.io:default bound to every
// authenticated user.
func TestUserClusterRoles(t *testing.T) {
	s, err := Generate(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, r := range s.ClusterRoles {
		roles[r.Name] = r
	}
	for name, label := range map[string]string{
		AdminClusterRoleName: "rbac.authorization.k8s.io/aggregate-to-admin",
		EditClusterRoleName:  "rbac.authorization.k8s.io/aggregate-to-edit",
		ViewClusterRoleName:  "rbac.authorization.k8s.io/aggregate-to-view",
	} {
		r := roles[name]
		if r == nil {
			t.Errorf("no ClusterRole %s", name)
			continue
		}
		if r.Labels[label] != "true" {
			t.Errorf("%s: label %s = %q, want true", name, label, r.Labels[label])
		}
	}
	for _, name := range []string{DefaultClusterRoleName, MigrateClusterRoleName, InstancetypeViewClusterRoleName} {
		if roles[name] == nil {
			t.Fatalf("no ClusterRole %s", name)
		}
		for key := range roles[name].Labels {
			if key == AggregateToAdminLabel || key == AggregateToEditLabel || key == AggregateToViewLabel {
				t.Errorf("%s aggregates (%s)", name, key)
			}
		}
	}
	for _, name := range []string{DefaultClusterRoleName, InstancetypeViewClusterRoleName} {
		var b *rbacv1.ClusterRoleBinding
		for _, x := range s.ClusterRoleBindings {
			if x.Name == name {
				b = x
			}
		}
		want := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}}
		if b == nil || b.RoleRef.Name != name || !slices.Equal(b.Subjects, want) {
			t.Errorf("ClusterRoleBinding %s = %+v, want %s bound to system:authenticated", name, b, name)
		}
	}

	sub, kv := SubresourcesGroup, v1.GroupName
	both := []access{ // what admin and edit may both do
		{sub, "virtualmachines/start", "update", true},
		{sub, "virtualmachines/stop", "update", true},
		{sub, "virtualmachines/restart", "update", true},
		{sub, "virtualmachineinstances/pause", "update", true},
		{sub, "virtualmachineinstances/unpause", "update", true},
		{sub, "virtualmachineinstances/softreboot", "update", true},
		{sub, "virtualmachineinstances/reset", "update", true},
		{sub, "virtualmachineinstances/console", "get", true},
		{sub, "virtualmachineinstances/vnc", "get", true},
		{sub, "virtualmachineinstances/portforward", "get", true},
		{sub, "virtualmachineinstances/guestosinfo", "get", true},
		{sub, "virtualmachineinstances/userlist", "get", true},
		{sub, "virtualmachineinstances/filesystemlist", "get", true},
		{sub, "virtualmachines/expand-spec", "get", true},
		{kv, "virtualmachines", "create", true},
		{kv, "virtualmachineinstances", "delete", true},
		{kv, "virtualmachineinstancereplicasets", "patch", true},
		{kv, "virtualmachineinstancemigrations", "get", true},
		// Migrating is kubevirt.io:migrate's, as in KubeVirt v1.5 and later.
		{sub, "virtualmachines/migrate", "update", false},
		{kv, "virtualmachineinstancemigrations", "create", false},
		{kv, "kubevirts", "update", false},
	}
	checkAccess(t, EditClusterRoleName, roles[EditClusterRoleName].Rules, append(slices.Clone(both),
		access{kv, "virtualmachines", "deletecollection", false},
		access{sub, "virtualmachineinstances/vnc/screenshot", "get", false},
		access{kv, "kubevirts", "get", true},
	))
	checkAccess(t, AdminClusterRoleName, roles[AdminClusterRoleName].Rules, append(slices.Clone(both),
		access{kv, "virtualmachines", "deletecollection", true},
		access{sub, "virtualmachineinstances/vnc/screenshot", "get", true},
	))
	checkAccess(t, ViewClusterRoleName, roles[ViewClusterRoleName].Rules, []access{
		{sub, "virtualmachineinstances/guestosinfo", "get", true},
		{sub, "virtualmachineinstances/userlist", "get", true},
		{sub, "virtualmachineinstances/filesystemlist", "get", true},
		{kv, "virtualmachines", "list", true},
		{kv, "virtualmachineinstances", "watch", true},
		{kv, "virtualmachineinstancemigrations", "get", true},
		{kv, "kubevirts", "get", true},
		{sub, "virtualmachineinstances/console", "get", false},
		{sub, "virtualmachineinstances/vnc", "get", false},
		{sub, "virtualmachines/start", "update", false},
		{sub, "virtualmachineinstances/reset", "update", false},
		{kv, "virtualmachines", "create", false},
		{kv, "virtualmachines", "update", false},
	})
	checkAccess(t, DefaultClusterRoleName, roles[DefaultClusterRoleName].Rules, []access{
		{sub, "version", "get", true},
		{sub, "guestfs", "get", true},
		{kv, "kubevirts", "list", true},
		{sub, "virtualmachineinstances/console", "get", false},
		{kv, "virtualmachines", "get", false},
	})
	checkAccess(t, MigrateClusterRoleName, roles[MigrateClusterRoleName].Rules, []access{
		{sub, "virtualmachines/migrate", "update", true},
		{kv, "virtualmachineinstancemigrations", "create", true},
		{kv, "virtualmachineinstancemigrations", "delete", true},
		{kv, "virtualmachines", "get", false},
	})
}
