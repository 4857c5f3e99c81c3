package installstrategy

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Service accounts of the components, with KubeVirt's names.
const (
	APIServiceAccount        = "kubevirt-apiserver"
	ControllerServiceAccount = "kubevirt-controller"
	HandlerServiceAccount    = "kubevirt-handler"
)

// Kubernetes' roles of a component that authenticates and authorizes its
// callers through the API server (delegated authentication and
// authorization): virt-api's aggregated API, and the /metrics of
// virt-controller, virt-handler and virt-operator.
const (
	// authDelegator creates TokenReviews and SubjectAccessReviews.
	authDelegator = "system:auth-delegator"
	// authenticationReader reads the client CA (and virt-api the front
	// proxy's) in kube-system's ConfigMap
	// extension-apiserver-authentication.
	authenticationReader = "extension-apiserver-authentication-reader"
)

// verbs
var (
	read      = []string{"get", "list", "watch"}
	readWrite = []string{"get", "list", "watch", "update", "patch"}
	status    = []string{"update", "patch"}
)

func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// ComponentRules are the permissions of one component's service account.
type ComponentRules struct {
	// Component is virt-api, virt-controller or virt-handler.
	Component string
	// ServiceAccount is the component's service account in the install namespace.
	ServiceAccount string
	// Cluster are granted cluster-wide (ClusterRole + ClusterRoleBinding).
	Cluster []rbacv1.PolicyRule
	// Namespace are granted only in the install namespace (Role + RoleBinding).
	Namespace []rbacv1.PolicyRule
	// BoundClusterRoles are existing cluster roles bound to the account
	// (system:auth-delegator for an aggregated API server).
	BoundClusterRoles []string
	// KubeSystemRoles are existing roles in kube-system bound to the account
	// (extension-apiserver-authentication-reader for an aggregated API server).
	KubeSystemRoles []string
}

// Rules returns the least-privilege permissions of each component, in the
// order virt-api, virt-controller, virt-handler. No rule uses a wildcard.
func Rules() []ComponentRules {
	kv := v1.GroupName
	return []ComponentRules{
		{
			// virt-api serves the subresources (console, VNC, start, stop,
			// restart, migrate...) as an aggregated API server: it reads
			// VMIs, VMs and migrations, writes VMs (stopping a VM whose
			// runStrategy is Always sets it to Halted) and their status
			// (start/stop requests), patches a VMI's grace period for a
			// stop that asks for a shorter one, deletes the launcher pod
			// of a forced restart, creates migrations, finds the
			// virt-handler pod on a VMI's node in the install namespace,
			// reads instance types, preferences and the revisions VMs pin
			// (expand-spec), and delegates authentication and
			// authorization.
			Component:      v1.VirtAPIValue,
			ServiceAccount: APIServiceAccount,
			Cluster: []rbacv1.PolicyRule{
				rule(kv, []string{"virtualmachineinstances"}, "get", "list", "watch", "patch"),
				rule(kv, []string{"kubevirts"}, read...),
				// The VMI mutating webhook applies presets from an informer.
				rule(kv, []string{"virtualmachineinstancepresets"}, "list", "watch"),
				rule(kv, []string{"virtualmachines"}, readWrite...),
				rule(kv, []string{"virtualmachines/status"}, status...),
				rule(kv, []string{"virtualmachineinstancemigrations"}, "get", "list", "watch", "create"),
				// The pod eviction webhook reads the evicted pod and sets
				// its VMI's status.evacuationNodeName (the VMI patch above).
				rule("", []string{"pods"}, "get", "list", "delete"),
				rule("", []string{"nodes"}, "get"),
				// memorydump checks the claim it is asked to dump onto.
				rule("", []string{"persistentvolumeclaims"}, "get"),
				rule("instancetype.kubevirt.io", []string{"virtualmachineinstancetypes", "virtualmachineclusterinstancetypes", "virtualmachinepreferences", "virtualmachineclusterpreferences"}, "get"),
				rule("apps", []string{"controllerrevisions"}, "get"),
				rule("authorization.k8s.io", []string{"subjectaccessreviews"}, "create"),
				rule("authentication.k8s.io", []string{"tokenreviews"}, "create"),
			},
			Namespace: []rbacv1.PolicyRule{
				rule("", []string{"pods"}, read...),
			},
			BoundClusterRoles: []string{authDelegator},
			KubeSystemRoles:   []string{authenticationReader},
		},
		{
			// virt-controller turns VMs into VMIs and VMIs into launcher
			// pods, keeps replica sets, VM pools, migrations and exports, fails VMIs
			// on dead nodes, holds its leader Lease in the install
			// namespace, and delegates the authentication and
			// authorization of /metrics.
			Component:      v1.VirtControllerValue,
			ServiceAccount: ControllerServiceAccount,
			Cluster: []rbacv1.PolicyRule{
				rule(kv, []string{"virtualmachineinstances"}, "get", "list", "watch", "create", "update", "patch", "delete"),
				rule(kv, []string{"virtualmachines", "virtualmachineinstancereplicasets", "virtualmachineinstancemigrations"}, readWrite...),
				rule(kv, []string{"virtualmachines/status", "virtualmachineinstancereplicasets/status", "virtualmachineinstancemigrations/status"}, status...),
				// Owner references with blockOwnerDeletion need update on the owner's finalizers.
				rule(kv, []string{"virtualmachineinstances/finalizers", "virtualmachines/finalizers"}, "update"),
				rule(kv, []string{"kubevirts"}, read...),
				// The pool controller reads pools, writes their status,
				// creates and deletes their VMs and owns them
				// (blockOwnerDeletion: update on the pools' finalizers).
				rule(kv, []string{"virtualmachines"}, "create", "delete"),
				// The migration controller deletes the migrations of deleted
				// VMIs and all but the last five final migrations of a VMI;
				// the evacuation controller creates migrations.
				rule(kv, []string{"virtualmachineinstancemigrations"}, "create", "delete"),
				rule(groupPool, []string{"virtualmachinepools"}, read...),
				rule(groupPool, []string{"virtualmachinepools/status"}, status...),
				rule(groupPool, []string{"virtualmachinepools/finalizers"}, "update"),
				// A VM's instance type and preference fill its instances; the
				// copies the VM uses are ControllerRevisions it owns, as is
				// the spec each start used (deleted at the next start).
				rule(groupInstancetype, instancetypes, read...),
				rule("apps", []string{"controllerrevisions"}, "get", "list", "watch", "create", "delete"),
				// A VM's dataVolumeTemplates become CDI DataVolumes (owner references clean them up).
				rule("cdi.kubevirt.io", []string{"datavolumes"}, "get", "list", "watch", "create"),
				rule("", []string{"pods"}, "get", "list", "watch", "create", "delete"),
				// Memory hotplug grows a launcher pod in place.
				rule("", []string{"pods/resize"}, "patch"),
				// The backend storage of VMIs with persistent state (TPM, EFI);
				// the memory dump annotation on a dump's claim.
				rule("", []string{"persistentvolumeclaims"}, append(read, "create", "patch")...),
				// The node controller marks nodes whose agent stopped unschedulable.
				rule("", []string{"nodes"}, "get", "list", "watch", "patch"),
				rule("", []string{"events"}, "create", "patch"),
				// The disruption-budget controller keeps a
				// PodDisruptionBudget per VMI that migrates on eviction.
				rule("policy", []string{"poddisruptionbudgets"}, "get", "list", "watch", "create", "patch", "delete"),
				// The export controller runs a server pod per
				// VirtualMachineExport behind a Service, with a token, a
				// serving certificate and the VM's manifests (all owned by
				// the export), writes its status and deletes it when its
				// time to live ends.
				rule(groupExport, []string{"virtualmachineexports"}, "get", "list", "watch", "delete"),
				rule(groupExport, []string{"virtualmachineexports/status"}, status...),
				// Create only: virt-controller reads no Secret but the
				// export CA below.
				rule("", []string{"services", "secrets", "configmaps"}, "create"),
				// The snapshot controller records VMs in snapshot contents
				// and restores them (or creates them from a snapshot).
				rule(groupSnapshot, []string{"virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores"}, "get", "list", "watch", "create", "update", "patch", "delete"),
				rule(groupSnapshot, []string{"virtualmachinesnapshots/status", "virtualmachinesnapshotcontents/status", "virtualmachinerestores/status"}, status...),
			},
			Namespace: []rbacv1.PolicyRule{
				rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update"),
				// The export CA's key, and no other Secret of the namespace.
				{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{ExportCASecretName}, Verbs: []string{"get"}},
			},
			BoundClusterRoles: []string{authDelegator},
			KubeSystemRoles:   []string{authenticationReader},
		},
		{
			// virt-handler runs the domains of the VMIs on its node: it
			// reports their status, patches its own Node (heartbeat and
			// the schedulable label) and records events. It cannot touch
			// pods, secrets or any other node's workloads' objects beyond
			// VMIs and migrations; it reads the pods of its own namespace
			// only, to check that a migration target's address is another
			// virt-handler's. It delegates the authentication and
			// authorization of /metrics.
			Component:      v1.VirtHandlerValue,
			ServiceAccount: HandlerServiceAccount,
			Cluster: []rbacv1.PolicyRule{
				rule(kv, []string{"virtualmachineinstances"}, readWrite...),
				rule(kv, []string{"virtualmachineinstancemigrations"}, read...),
				rule(kv, []string{"kubevirts"}, read...),
				rule("", []string{"nodes"}, "get", "list", "watch", "patch"),
				rule("", []string{"events"}, "create", "patch"),
				// Volume hotplug: the agent resolves a hotplugged claim to
				// its node-local volume and mounts it into the launcher;
				// an unbound claim of a WaitForFirstConsumer class gets a
				// volume of the node or the node selected, as the
				// scheduler's volume binder would.
				rule("", []string{"persistentvolumeclaims"}, "get", "patch"),
				rule("", []string{"persistentvolumes"}, "get", "list", "patch"),
				rule("storage.k8s.io", []string{"storageclasses"}, "get"),
			},
			Namespace: []rbacv1.PolicyRule{
				rule("", []string{"pods"}, "list"),
			},
			BoundClusterRoles: []string{authDelegator},
			KubeSystemRoles:   []string{authenticationReader},
		},
	}
}

func (s *Strategy) addRBAC(cfg *DeploymentConfig) {
	ns := cfg.Namespace
	for _, r := range Rules() {
		meta := func(name, namespace string) metav1.ObjectMeta {
			return objectMeta(cfg, r.Component, name, namespace)
		}
		subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: r.ServiceAccount, Namespace: ns}}
		s.ServiceAccounts = append(s.ServiceAccounts, &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(r.ServiceAccount, ns),
		})
		s.ClusterRoles = append(s.ClusterRoles, &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: meta(r.ServiceAccount, ""),
			Rules:      r.Cluster,
		})
		s.ClusterRoleBindings = append(s.ClusterRoleBindings, clusterRoleBinding(meta(r.ServiceAccount, ""), r.ServiceAccount, subject))
		for _, role := range r.BoundClusterRoles {
			s.ClusterRoleBindings = append(s.ClusterRoleBindings, clusterRoleBinding(meta(r.ServiceAccount+"-"+sanitize(role), ""), role, subject))
		}
		if len(r.Namespace) > 0 {
			s.Roles = append(s.Roles, &rbacv1.Role{
				TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
				ObjectMeta: meta(r.ServiceAccount, ns),
				Rules:      r.Namespace,
			})
			s.RoleBindings = append(s.RoleBindings, roleBinding(meta(r.ServiceAccount, ns), "Role", r.ServiceAccount, subject))
		}
		for _, role := range r.KubeSystemRoles {
			s.RoleBindings = append(s.RoleBindings, roleBinding(meta(r.ServiceAccount+"-"+sanitize(role), "kube-system"), "Role", role, subject))
		}
	}
	s.addUserRoles(cfg)
	s.addMetricsReader(cfg)
}

func clusterRoleBinding(meta metav1.ObjectMeta, role string, subjects []rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func roleBinding(meta metav1.ObjectMeta, kind, role string, subjects []rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   subjects,
	}
}

// sanitize turns a role name such as system:auth-delegator into a name part.
func sanitize(name string) string {
	out := []byte(name)
	for i, c := range out {
		if c == ':' {
			out[i] = '-'
		}
	}
	return string(out)
}
