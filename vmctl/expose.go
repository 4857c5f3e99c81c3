package vmctl

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// exposeFlags are expose's flags, virtctl's names.
type exposeFlags struct {
	name           string
	clusterIP      string
	externalIP     string
	port           int32
	protocol       string
	targetPort     string
	serviceType    string
	portName       string
	ipFamily       string
	ipFamilyPolicy string
}

func (c *cli) exposeCommand() *cobra.Command {
	var f exposeFlags
	cmd := &cobra.Command{
		Use:   "expose (TYPE NAME)",
		Short: "Expose a virtual machine instance or virtual machine as a new service.",
		Long: `Creates a Service selecting the launcher pod of a virtual machine instance (vmi) or of the instance
of a virtual machine (vm), on the given port, or on the ports the instance's pod network interface
declares when --port is not given. The Service is owned by the VM or VMI, so it goes with it.

The selector is the label vm.kubevirt.io/name, which the launcher pod carries with the instance's
host name (spec.hostname, else its name; an instance of a VM has the VM's name).

Possible types are (case insensitive, both singular and plural forms):
virtualmachineinstance (vmi), virtualmachine (vm)`,
		Example: c.example(`  # Expose SSH of a virtual machine instance called 'myvmi' on each node via a NodePort service:
  %[1]s expose vmi myvmi --port=22 --name=myvmi-ssh --type=NodePort

  # Expose port 8080 of virtual machine 'myvm' as port 80:
  %[1]s expose vm myvm --port=80 --target-port=8080 --name=myvm-http`),
		Args: cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []cobra.Completion{kindVM, kindVMI}, cobra.ShellCompDirectiveNoFileComp
			}
			kind, err := normalizeKind(args[0])
			if err != nil || len(args) > 1 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return c.completeNames(kind, 0)(cmd, nil, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := normalizeKind(args[0])
			if err != nil {
				return err
			}
			ns, err := c.namespace()
			if err != nil {
				return err
			}
			svc, err := c.exposedService(cmd, &f, kind, ns, args[1])
			if err != nil {
				return err
			}
			kube, err := c.kubeClient()
			if err != nil {
				return err
			}
			if _, err := kube.CoreV1().Services(ns).Create(contextOf(cmd), svc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("service creation failed: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Service %s successfully exposed for %s %s\n", f.name, args[0], args[1])
			return nil
		},
	}
	cmd.Flags().StringVar(&f.name, "name", "", "Name of the service created for the exposure of the VM.")
	_ = cmd.MarkFlagRequired("name")
	cmd.Flags().StringVar(&f.clusterIP, "cluster-ip", "", "ClusterIP to be assigned to the service. Leave empty to auto-allocate, or set to 'None' to create a headless service.")
	cmd.Flags().StringVar(&f.externalIP, "external-ip", "", "Additional external IP address (not managed by the cluster) to accept for the service.")
	cmd.Flags().Int32Var(&f.port, "port", 0, "The port that the service should serve on.")
	cmd.Flags().StringVar(&f.protocol, "protocol", "TCP", "The network protocol for the service to be created: TCP or UDP.")
	cmd.Flags().StringVar(&f.targetPort, "target-port", "", "Name or number for the port on the VM that the service should direct traffic to. Optional.")
	cmd.Flags().StringVar(&f.serviceType, "type", "ClusterIP", "Type for this service: ClusterIP, NodePort, or LoadBalancer.")
	cmd.Flags().StringVar(&f.portName, "port-name", "", "Name of the port. Optional.")
	cmd.Flags().StringVar(&f.ipFamily, "ip-family", "", "IP family over which the service will be exposed: IPv4, IPv6, IPv4,IPv6 or IPv6,IPv4.")
	cmd.Flags().StringVar(&f.ipFamilyPolicy, "ip-family-policy", "", "SingleStack, PreferDualStack or RequireDualStack.")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions([]string{"ClusterIP", "NodePort", "LoadBalancer"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("protocol", cobra.FixedCompletions([]string{"TCP", "UDP"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// exposedService builds the Service exposing VM or VMI namespace/name.
func (c *cli) exposedService(cmd *cobra.Command, f *exposeFlags, kind, namespace, name string) (*corev1.Service, error) {
	protocol, err := convertProtocol(f.protocol)
	if err != nil {
		return nil, err
	}
	serviceType, err := convertServiceType(f.serviceType)
	if err != nil {
		return nil, err
	}
	families, err := convertIPFamilies(f.ipFamily)
	if err != nil {
		return nil, err
	}
	policy, err := convertIPFamilyPolicy(f.ipFamilyPolicy, families)
	if err != nil {
		return nil, err
	}

	client, err := c.vmClient()
	if err != nil {
		return nil, err
	}
	ctx := contextOf(cmd)
	var (
		owner *metav1.OwnerReference
		spec  *v1.VirtualMachineInstanceSpec
	)
	if kind == kindVM {
		vm, err := client.KubevirtV1().VirtualMachines(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("error fetching VirtualMachine %s: %w", name, err)
		}
		owner = metav1.NewControllerRef(vm, v1.VirtualMachineGroupVersionKind)
		if vm.Spec.Template != nil {
			spec = &vm.Spec.Template.Spec
		}
	} else {
		vmi, err := client.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("error fetching VirtualMachineInstance %s: %w", name, err)
		}
		owner = metav1.NewControllerRef(vmi, v1.VirtualMachineInstanceGroupVersionKind)
		spec = &vmi.Spec
	}
	blockOwnerDeletion := false
	owner.BlockOwnerDeletion = &blockOwnerDeletion

	// The launcher pod carries vm.kubevirt.io/name=<host name>: the
	// instance's spec.hostname, else its name (a VM's instance has the VM's
	// name).
	host := launcherHostname(name)
	if spec != nil && spec.Hostname != "" {
		host = spec.Hostname
	}

	var ports []corev1.ServicePort
	if f.port != 0 {
		ports = []corev1.ServicePort{{Name: f.portName, Protocol: protocol, Port: f.port, TargetPort: intstr.Parse(f.targetPort)}}
		if f.targetPort == "" {
			ports[0].TargetPort = intstr.IntOrString{}
		}
	} else if spec != nil {
		ports = podNetworkPorts(spec)
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("couldn't find port via --port flag or introspection of %s %s's pod network interface", kind, name)
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            f.name,
			Namespace:       namespace,
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		Spec: corev1.ServiceSpec{
			Ports:      ports,
			Selector:   map[string]string{v1.VirtualMachineLabel: host},
			ClusterIP:  f.clusterIP,
			Type:       serviceType,
			IPFamilies: families,
		},
	}
	if f.externalIP != "" {
		svc.Spec.ExternalIPs = []string{f.externalIP}
	}
	if policy != "" {
		svc.Spec.IPFamilyPolicy = &policy
	}
	return svc, nil
}

// launcherHostname is the host name the launcher pod of an instance
// without spec.hostname gets: its name up to the first dot, at most 63
// characters (a DNS label).
func launcherHostname(name string) string {
	h, _, _ := strings.Cut(name, ".")
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-")
	}
	return h
}

// podNetworkPorts are the ports the interface on the pod network declares,
// as service ports port-1, port-2, ...
func podNetworkPorts(spec *v1.VirtualMachineInstanceSpec) []corev1.ServicePort {
	podNetwork := ""
	for _, n := range spec.Networks {
		if n.Pod != nil {
			podNetwork = n.Name
			break
		}
	}
	if podNetwork == "" {
		return nil
	}
	for _, iface := range spec.Domain.Devices.Interfaces {
		if iface.Name != podNetwork {
			continue
		}
		var ports []corev1.ServicePort
		for i, p := range iface.Ports {
			proto := corev1.ProtocolTCP
			if strings.EqualFold(p.Protocol, "UDP") {
				proto = corev1.ProtocolUDP
			}
			ports = append(ports, corev1.ServicePort{Name: fmt.Sprintf("port-%d", i+1), Protocol: proto, Port: p.Port})
		}
		return ports
	}
	return nil
}

func convertProtocol(s string) (corev1.Protocol, error) {
	switch strings.ToUpper(s) {
	case "TCP":
		return corev1.ProtocolTCP, nil
	case "UDP":
		return corev1.ProtocolUDP, nil
	}
	return "", fmt.Errorf("unknown protocol: %s", s)
}

func convertServiceType(s string) (corev1.ServiceType, error) {
	switch strings.ToLower(s) {
	case "clusterip":
		return corev1.ServiceTypeClusterIP, nil
	case "nodeport":
		return corev1.ServiceTypeNodePort, nil
	case "loadbalancer":
		return corev1.ServiceTypeLoadBalancer, nil
	case "externalname":
		return "", fmt.Errorf("type: %s not supported", s)
	}
	return "", fmt.Errorf("unknown service type: %s", s)
}

func convertIPFamilies(s string) ([]corev1.IPFamily, error) {
	switch strings.ToLower(s) {
	case "":
		return nil, nil
	case "ipv4":
		return []corev1.IPFamily{corev1.IPv4Protocol}, nil
	case "ipv6":
		return []corev1.IPFamily{corev1.IPv6Protocol}, nil
	case "ipv4,ipv6":
		return []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, nil
	case "ipv6,ipv4":
		return []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, nil
	}
	return nil, fmt.Errorf("unknown IPFamily/s: %s", s)
}

func convertIPFamilyPolicy(s string, families []corev1.IPFamily) (corev1.IPFamilyPolicy, error) {
	switch strings.ToLower(s) {
	case "":
		if len(families) > 1 {
			return corev1.IPFamilyPolicyPreferDualStack, nil
		}
		return "", nil
	case "singlestack":
		return corev1.IPFamilyPolicySingleStack, nil
	case "preferdualstack":
		return corev1.IPFamilyPolicyPreferDualStack, nil
	case "requiredualstack":
		return corev1.IPFamilyPolicyRequireDualStack, nil
	}
	return "", fmt.Errorf("unknown IPFamilyPolicy/s: %s", s)
}
