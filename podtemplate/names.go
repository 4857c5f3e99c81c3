package podtemplate

import "k8s.io/apimachinery/pkg/util/validation"

// isDNSLabel reports whether s is a DNS-1123 label, as Kubernetes checks
// pod, volume and namespace names.
func isDNSLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// isDNSSubdomain reports whether s is a DNS-1123 subdomain.
func isDNSSubdomain(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }

// dnsLabelError explains why s is not a DNS label, in Kubernetes' words.
func dnsLabelError(s string) string {
	if msgs := validation.IsDNS1123Label(s); len(msgs) != 0 {
		return msgs[0]
	}
	return "not a DNS-1123 label"
}

// dnsSubdomainError explains why s is not a DNS subdomain, in Kubernetes' words.
func dnsSubdomainError(s string) string {
	if msgs := validation.IsDNS1123Subdomain(s); len(msgs) != 0 {
		return msgs[0]
	}
	return "not a DNS-1123 subdomain"
}
