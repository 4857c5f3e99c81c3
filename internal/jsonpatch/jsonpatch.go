// Package jsonpatch spells the JSON patches (RFC 6902) the controllers and
// virt-api send, one way: a list of operations, where test operations guard
// against concurrent writers.
package jsonpatch

import "encoding/json"

// Op is one operation. Value is left out of a remove.
type Op struct {
	Op    string
	Path  string
	Value any
}

// MarshalJSON writes {"op", "path", "value"}; a test of a nil Value tests
// for null, and a remove has no value.
func (o Op) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// Test checks that the value at path is value.
func Test(path string, value any) Op { return Op{Op: "test", Path: path, Value: value} }

// Add sets path to value, creating it or replacing what is there.
func Add(path string, value any) Op { return Op{Op: "add", Path: path, Value: value} }

// Replace sets path, which must exist, to value.
func Replace(path string, value any) Op { return Op{Op: "replace", Path: path, Value: value} }

// Remove deletes path.
func Remove(path string) Op { return Op{Op: "remove", Path: path} }

// Marshal is the patch of ops, for types.JSONPatchType.
func Marshal(ops ...Op) ([]byte, error) { return json.Marshal(ops) }
