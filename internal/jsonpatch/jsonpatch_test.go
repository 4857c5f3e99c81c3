package jsonpatch

import "testing"

func TestMarshal(t *testing.T) {
	got, err := Marshal(Test("/a", nil), Add("/b", 1), Replace("/c", "x"), Remove("/d"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"op":"test","path":"/a","value":null},{"op":"add","path":"/b","value":1},{"op":"replace","path":"/c","value":"x"},{"op":"remove","path":"/d"}]`
	if string(got) != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
}
