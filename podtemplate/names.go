package podtemplate

import "k8s.io/apimachinery/pkg/util/validation"

// isDNSLabel reports what validation.IsDNS1123Label accepts (at most 63
// lower-case alphanumerics or '-', starting and ending with an
// alphanumeric) without its regular expression, which would be most of the
// cost of checking a volume name.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123LabelMaxLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i != 0 && i != len(s)-1:
		default:
			return false
		}
	}
	return true
}

// isDNSSubdomain reports what validation.IsDNS1123Subdomain accepts: at most
// 253 characters of dot-separated parts, each a DNS label.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isDNSLabelPart(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// isDNSLabelPart is isDNSLabel without the length limit, for the parts of a
// subdomain, which only the whole name's length limits.
func isDNSLabelPart(s string) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i != 0 && i != len(s)-1:
		default:
			return false
		}
	}
	return true
}

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
