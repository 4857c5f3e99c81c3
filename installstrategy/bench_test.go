package installstrategy

import "testing"

// BenchmarkGenerate measures Generate for the default config (25 objects,
// of which 4 CRDs decoded from vmapi/crds' embedded YAML).
func BenchmarkGenerate(b *testing.B) {
	cfg := testConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Generate(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToConfigMap measures encoding a strategy (YAML, gzip, base64).
func BenchmarkToConfigMap(b *testing.B) {
	s, err := Generate(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.ToConfigMap(); err != nil {
			b.Fatal(err)
		}
	}
}
