package qga

import (
	"strings"
	"testing"
)

func TestParseReply(t *testing.T) {
	for _, tc := range []struct{ reply, want, wantErr string }{
		{`{"return":{}}`, `{}`, ""},
		{`{"return":[{"name":"eth0"}]}`, `[{"name":"eth0"}]`, ""},
		{`{"error":{"class":"CommandNotFound","desc":"The command guest-x has not been found"}}`, "", "CommandNotFound: The command guest-x has not been found"},
		{`{}`, "", "without a return value"},
		{`garbage`, "", "malformed"},
	} {
		got, err := ParseReply("cmd", tc.reply)
		if string(got) != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("ParseReply(%s) = %s, %v; want %s, error containing %q", tc.reply, got, err, tc.want, tc.wantErr)
		}
	}
}
