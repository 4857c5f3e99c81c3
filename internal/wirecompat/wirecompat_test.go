package wirecompat

import "testing"

func TestDiff(t *testing.T) {
	cases := []struct {
		name      string
		want, got map[string]any
		same      bool
	}{
		{"identical", map[string]any{"a": "x"}, map[string]any{"a": "x"}, true},
		{"omitted zero", map[string]any{"a": "x", "b": false, "c": ""}, map[string]any{"a": "x"}, true},
		{"added empty object", map[string]any{"a": "x"}, map[string]any{"a": "x", "status": map[string]any{}}, true},
		{"nested omitted zero", map[string]any{"s": []any{map[string]any{"p": false, "n": "a"}}}, map[string]any{"s": []any{map[string]any{"n": "a"}}}, true},
		{"lost field", map[string]any{"a": "x", "b": "y"}, map[string]any{"a": "x"}, false},
		{"lost true", map[string]any{"b": true}, map[string]any{}, false},
		{"changed value", map[string]any{"a": "x"}, map[string]any{"a": "z"}, false},
		{"added value", map[string]any{"a": "x"}, map[string]any{"a": "x", "b": "new"}, false},
		{"lost list item", map[string]any{"s": []any{"a", "b"}}, map[string]any{"s": []any{"a"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diff(tc.want, tc.got) == ""; got != tc.same {
				t.Errorf("Diff reported same=%v, want %v:\n%s", got, tc.same, Diff(tc.want, tc.got))
			}
		})
	}
}
