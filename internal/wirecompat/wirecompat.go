// Package wirecompat compares JSON documents the way the Kubernetes wire
// format allows them to differ: a field may be omitted when it holds its zero
// value, and Go's encoder may add empty objects for struct fields. Anything
// else that differs is a lost or changed field.
package wirecompat

import (
	"encoding/json"
	"fmt"

	"github.com/google/go-cmp/cmp"
)

// Diff returns a human-readable diff of want and got (-want +got) after
// reconciling zero values, or "" when got keeps every field of want.
// Neither argument is modified.
func Diff(want, got any) string {
	w, g := clone(want), clone(got)
	reconcile(w, g)
	return cmp.Diff(w, g)
}

// ToMap encodes v as JSON and decodes it into a generic map.
func ToMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding %T as an object: %w", v, err)
	}
	return m, nil
}

func reconcile(w, g any) {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			return
		}
		for k, wc := range wv {
			gc, ok := gv[k]
			if !ok {
				if isZero(wc) {
					delete(wv, k)
				}
				continue
			}
			reconcile(wc, gc)
		}
		for k, gc := range gv {
			if _, ok := wv[k]; !ok && isZero(gc) {
				delete(gv, k)
			}
		}
	case []any:
		if gv, ok := g.([]any); ok && len(gv) == len(wv) {
			for i := range wv {
				reconcile(wv[i], gv[i])
			}
		}
	}
}

// isZero reports values the wire format treats as absent: null, false, "",
// and empty objects.
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = clone(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = clone(c)
		}
		return out
	}
	return v
}
