// Package fakewrites summarizes the writes a controller sent to client-go
// fake clientsets, for unit tests that assert what a sync did.
package fakewrites

import k8stesting "k8s.io/client-go/testing"

// List returns "verb resource[/subresource]" for every write among the
// actions, in order; reads (get, list, watch) are left out.
func List(actions ...[]k8stesting.Action) []string {
	var out []string
	for _, list := range actions {
		for _, a := range list {
			switch a.GetVerb() {
			case "get", "list", "watch":
				continue
			}
			s := a.GetVerb() + " " + a.GetResource().Resource
			if a.GetSubresource() != "" {
				s += "/" + a.GetSubresource()
			}
			out = append(out, s)
		}
	}
	return out
}
