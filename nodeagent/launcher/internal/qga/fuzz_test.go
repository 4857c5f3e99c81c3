package qga

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAgentReply: a guest agent's reply, the guest's to write, never makes
// ParseReply panic; what it returns is the reply's JSON "return".
func FuzzAgentReply(f *testing.F) {
	for _, s := range []string{`{"return":{"id":"debian"}}`, `{"return":[]}`, `{"error":{"class":"GenericError","desc":"x"}}`,
		`{"return":null}`, `{}`, `not json`, `{"return":"` + strings.Repeat("a", 300) + `"}`, `[1,2]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		ret, err := ParseReply("guest-get-osinfo", reply)
		if err == nil && !json.Valid(ret) {
			t.Errorf("ParseReply(%q) returned invalid JSON %q", reply, ret)
		}
	})
}
