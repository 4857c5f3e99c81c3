package installstrategy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The cluster roles for users, with KubeVirt's names and rules (those of
// KubeVirt v1.8). Admin, edit and view carry the aggregation labels of
// Kubernetes' roles of the same names, so whoever holds admin, edit or view
// in a namespace may use VMs there as KubeVirt's users may; default is
// bound to every authenticated user. Rules for API groups vmkit does not
// serve (snapshots, exports, clones...) are kept as KubeVirt
// has them: they grant nothing until such an API exists.
const (
	// AdminClusterRoleName aggregates to admin: edit's rights plus
	// deletecollection and VNC screenshots.
	AdminClusterRoleName = "kubevirt.io:admin"
	// EditClusterRoleName aggregates to edit: VMs and VMIs, their console,
	// VNC, port forwarding and lifecycle subresources (start, stop,
	// restart, pause, unpause...).
	EditClusterRoleName = "kubevirt.io:edit"
	// ViewClusterRoleName aggregates to view: reading VMs, VMIs and
	// migrations, and the guest agent's information.
	ViewClusterRoleName = "kubevirt.io:view"
	// DefaultClusterRoleName is bound to system:authenticated by the
	// ClusterRoleBinding of the same name: the version and guestfs
	// subresources and reading the KubeVirt CR.
	DefaultClusterRoleName = "kubevirt.io:default"
	// MigrateClusterRoleName is bound by nobody: who may migrate VMs
	// (virtualmachines/migrate and VirtualMachineInstanceMigrations) is
	// the cluster admin's decision, as in KubeVirt since v1.5.
	MigrateClusterRoleName = "kubevirt.io:migrate"
	// InstancetypeViewClusterRoleName lets every authenticated user read
	// the cluster-wide instance types and preferences.
	InstancetypeViewClusterRoleName = "instancetype.kubevirt.io:view"
)

// Labels that make a cluster role part of Kubernetes' admin, edit and view.
const (
	AggregateToAdminLabel = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEditLabel  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToViewLabel  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// KubeVirt's API groups besides kubevirt.io and subresources.kubevirt.io.
const (
	groupSnapshot     = "snapshot.kubevirt.io"
	groupBackup       = "backup.kubevirt.io"
	groupExport       = "export.kubevirt.io"
	groupClone        = "clone.kubevirt.io"
	groupInstancetype = "instancetype.kubevirt.io"
	groupPool         = "pool.kubevirt.io"
	groupMigrations   = "migrations.kubevirt.io"
)

var (
	allVerbs  = []string{"get", "delete", "create", "update", "patch", "list", "watch", "deletecollection"}
	editVerbs = []string{"get", "delete", "create", "update", "patch", "list", "watch"}
	viewVerbs = []string{"get", "list", "watch"}

	instancetypes = []string{"virtualmachineinstancetypes", "virtualmachineclusterinstancetypes", "virtualmachinepreferences", "virtualmachineclusterpreferences"}
)

// userRules are the rules of admin (admin true) or edit, which differ only
// in VNC screenshots and deletecollection.
func userRules(admin bool) []rbacv1.PolicyRule {
	sub, kv := SubresourcesGroup, v1.GroupName
	verbs := editVerbs
	vmiGet := []string{"virtualmachineinstances/console", "virtualmachineinstances/vnc"}
	if admin {
		verbs = allVerbs
		vmiGet = append(vmiGet, "virtualmachineinstances/vnc/screenshot")
	}
	vmiGet = append(vmiGet,
		"virtualmachineinstances/portforward",
		"virtualmachineinstances/guestosinfo",
		"virtualmachineinstances/filesystemlist",
		"virtualmachineinstances/userlist",
		"virtualmachineinstances/sev/fetchcertchain",
		"virtualmachineinstances/sev/querylaunchmeasurement",
		"virtualmachineinstances/usbredir",
		"virtualmachines/objectgraph",
		"virtualmachineinstances/objectgraph")
	rules := []rbacv1.PolicyRule{
		rule(sub, vmiGet, "get"),
		rule(sub, []string{
			"virtualmachineinstances/pause",
			"virtualmachineinstances/unpause",
			"virtualmachineinstances/addvolume",
			"virtualmachineinstances/removevolume",
			"virtualmachineinstances/freeze",
			"virtualmachineinstances/unfreeze",
			"virtualmachineinstances/softreboot",
			"virtualmachineinstances/reset",
			"virtualmachineinstances/sev/setupsession",
			"virtualmachineinstances/sev/injectlaunchsecret",
			"virtualmachineinstances/evacuate/cancel",
		}, "update"),
		rule(sub, []string{"virtualmachines/expand-spec", "virtualmachines/portforward"}, "get"),
		rule(sub, []string{
			"virtualmachines/start",
			"virtualmachines/stop",
			"virtualmachines/restart",
			"virtualmachines/addvolume",
			"virtualmachines/removevolume",
			"virtualmachines/memorydump",
			"virtualmachines/removememorydump",
			"virtualmachines/evacuate/cancel",
		}, "update"),
		rule(sub, []string{"expand-vm-spec"}, "update"),
		rule(kv, []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets", "virtualmachineinstancereplicasets"}, verbs...),
		rule(kv, []string{"virtualmachineinstancemigrations"}, viewVerbs...),
		rule(groupSnapshot, []string{"virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores"}, verbs...),
		rule(groupBackup, []string{"virtualmachinebackups", "virtualmachinebackuptrackers"}, verbs...),
		rule(groupExport, []string{"virtualmachineexports"}, verbs...),
		rule(groupClone, []string{"virtualmachineclones"}, verbs...),
		rule(groupInstancetype, instancetypes, verbs...),
		rule(groupPool, []string{"virtualmachinepools"}, verbs...),
	}
	if !admin {
		rules = append(rules, rule(kv, []string{"kubevirts"}, "get", "list"))
	}
	return append(rules, rule(groupMigrations, []string{"migrationpolicies"}, viewVerbs...))
}

func viewRules() []rbacv1.PolicyRule {
	sub, kv := SubresourcesGroup, v1.GroupName
	return []rbacv1.PolicyRule{
		rule(kv, []string{"kubevirts"}, "get", "list"),
		rule(sub, []string{
			"virtualmachines/expand-spec",
			"virtualmachineinstances/guestosinfo",
			"virtualmachineinstances/filesystemlist",
			"virtualmachineinstances/userlist",
			"virtualmachineinstances/sev/fetchcertchain",
			"virtualmachineinstances/sev/querylaunchmeasurement",
			"virtualmachines/objectgraph",
			"virtualmachineinstances/objectgraph",
		}, "get"),
		rule(sub, []string{"expand-vm-spec"}, "update"),
		rule(kv, []string{"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets", "virtualmachineinstancereplicasets", "virtualmachineinstancemigrations"}, viewVerbs...),
		rule(groupSnapshot, []string{"virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores"}, viewVerbs...),
		rule(groupBackup, []string{"virtualmachinebackups", "virtualmachinebackuptrackers"}, viewVerbs...),
		rule(groupExport, []string{"virtualmachineexports"}, viewVerbs...),
		rule(groupClone, []string{"virtualmachineclones"}, viewVerbs...),
		rule(groupInstancetype, instancetypes, viewVerbs...),
		rule(groupPool, []string{"virtualmachinepools"}, viewVerbs...),
		rule(groupMigrations, []string{"migrationpolicies"}, viewVerbs...),
	}
}

// addUserRoles adds the user-facing cluster roles and the bindings of
// default and instancetype view to system:authenticated.
func (s *Strategy) addUserRoles(c *DeploymentConfig) {
	role := func(name string, labels map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
		meta := objectMeta(c, "", name, "")
		meta.Labels = mergeMaps(meta.Labels, labels)
		return &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: meta,
			Rules:      rules,
		}
	}
	const autoupdate = "rbac.authorization.kubernetes.io/autoupdate"
	def := role(DefaultClusterRoleName, map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}, []rbacv1.PolicyRule{
		rule(v1.GroupName, []string{"kubevirts"}, "get", "list"),
		rule(SubresourcesGroup, []string{"version", "guestfs"}, "get", "list"),
	})
	def.Annotations[autoupdate] = "true"
	s.ClusterRoles = append(s.ClusterRoles,
		def,
		role(AdminClusterRoleName, map[string]string{AggregateToAdminLabel: "true"}, userRules(true)),
		role(EditClusterRoleName, map[string]string{AggregateToEditLabel: "true"}, userRules(false)),
		role(ViewClusterRoleName, map[string]string{AggregateToViewLabel: "true"}, viewRules()),
		role(MigrateClusterRoleName, nil, []rbacv1.PolicyRule{
			rule(SubresourcesGroup, []string{"virtualmachines/migrate"}, "update"),
			rule(v1.GroupName, []string{"virtualmachineinstancemigrations"}, allVerbs...),
		}),
		role(InstancetypeViewClusterRoleName, nil, []rbacv1.PolicyRule{
			rule(groupInstancetype, []string{"virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"}, viewVerbs...),
		}),
	)
	authenticated := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}}
	for _, name := range []string{DefaultClusterRoleName, InstancetypeViewClusterRoleName} {
		b := clusterRoleBinding(objectMeta(c, "", name, ""), name, authenticated)
		b.Annotations[autoupdate] = "true"
		s.ClusterRoleBindings = append(s.ClusterRoleBindings, b)
	}
}
