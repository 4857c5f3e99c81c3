package v1

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ProbeStartupDelay is what the launcher pod's probes add to a VMI probe's
// initialDelaySeconds (KubeVirt's LibvirtStartupDelay): the time libvirt
// needs to start the guest.
const ProbeStartupDelay = 10

// validateProbe checks a readiness or liveness probe as KubeVirt's webhook
// and the pod validation of the launcher pod it becomes would: exactly one
// check, ports that exist, non-negative timings, and a liveness probe's
// successThreshold of 1. A check through the pod network (httpGet,
// tcpSocket) needs the guest on the pod network.
func validateProbe(p *field.Path, probe *Probe, liveness bool, spec *VirtualMachineInstanceSpec) field.ErrorList {
	if probe == nil {
		return nil
	}
	errs := validateOneOf(p, "check", []setField{
		{"exec", probe.Exec != nil},
		{"httpGet", probe.HTTPGet != nil},
		{"tcpSocket", probe.TCPSocket != nil},
		{"guestAgentPing", probe.GuestAgentPing != nil},
	}, true)
	if e := probe.Exec; e != nil && len(e.Command) == 0 {
		errs = append(errs, field.Required(p.Child("exec", "command"), "the command to run in the guest (through the guest agent) is required"))
	}
	podNetwork := false
	for _, n := range spec.Networks {
		podNetwork = podNetwork || n.Pod != nil
	}
	ports := map[string]bool{}
	for _, iface := range spec.Domain.Devices.Interfaces {
		for _, port := range iface.Ports {
			if port.Name != "" {
				ports[port.Name] = true
			}
		}
	}
	if g := probe.HTTPGet; g != nil {
		gp := p.Child("httpGet")
		errs = append(errs, validateProbePort(gp.Child("port"), g.Port, ports)...)
		switch g.Scheme {
		case "", corev1.URISchemeHTTP, corev1.URISchemeHTTPS:
		default:
			errs = append(errs, field.NotSupported(gp.Child("scheme"), g.Scheme, []string{string(corev1.URISchemeHTTP), string(corev1.URISchemeHTTPS)}))
		}
		if g.Path != "" && !strings.HasPrefix(g.Path, "/") {
			errs = append(errs, field.Invalid(gp.Child("path"), g.Path, "must be an absolute URL path (start with /)"))
		}
		for i, h := range g.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				errs = append(errs, field.Invalid(gp.Child("httpHeaders").Index(i).Child("name"), h.Name, msg))
			}
		}
		if !podNetwork {
			errs = append(errs, field.Forbidden(gp, "an httpGet probe reaches the guest through the pod network, and the VMI has no pod network (networks[*].pod)"))
		}
	}
	if t := probe.TCPSocket; t != nil {
		tp := p.Child("tcpSocket")
		errs = append(errs, validateProbePort(tp.Child("port"), t.Port, ports)...)
		if !podNetwork {
			errs = append(errs, field.Forbidden(tp, "a tcpSocket probe reaches the guest through the pod network, and the VMI has no pod network (networks[*].pod)"))
		}
	}
	for _, n := range []struct {
		name  string
		value *int32
		max   int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds, math.MaxInt32 - ProbeStartupDelay},
		{"timeoutSeconds", probe.TimeoutSeconds, math.MaxInt32 - 1},
		{"periodSeconds", probe.PeriodSeconds, math.MaxInt32},
		{"successThreshold", probe.SuccessThreshold, math.MaxInt32},
		{"failureThreshold", probe.FailureThreshold, math.MaxInt32},
	} {
		if n.value != nil && (*n.value < 0 || *n.value > n.max) {
			errs = append(errs, field.Invalid(p.Child(n.name), *n.value, fmt.Sprintf("must be between 0 and %d", n.max)))
		}
	}
	if liveness && probe.SuccessThreshold != nil && *probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), *probe.SuccessThreshold, "must be 1 for a liveness probe (one success makes the guest live)"))
	}
	return errs
}

// validateProbePort checks a probe's port: a number between 1 and 65535 or
// the name of a port of the VMI's interfaces (the launcher pod's compute
// container exposes those).
func validateProbePort(p *field.Path, port intstr.IntOrString, names map[string]bool) field.ErrorList {
	if port.Type == intstr.String {
		if port.StrVal == "" {
			return field.ErrorList{field.Required(p, "a port number or the name of a port of the VMI's interfaces (domain.devices.interfaces[*].ports) is required")}
		}
		if !names[port.StrVal] {
			return field.ErrorList{field.Invalid(p, port.StrVal, "no port of this name in the VMI's interfaces (domain.devices.interfaces[*].ports)")}
		}
		return nil
	}
	if port.IntVal < 1 || port.IntVal > 65535 {
		return field.ErrorList{field.Invalid(p, port.IntVal, "must be between 1 and 65535")}
	}
	return nil
}
