package rules

// Unexported names the external tests (package rules_test) read.
const MaxAlso = maxAlso

var OverridePolicyName = overridePolicyName

// EncodeYAML and EncodeJSON write s back as a rules file (round trips).
func EncodeYAML(s *Set) ([]byte, error) { return s.encodeYAML() }
func EncodeJSON(s *Set) ([]byte, error) { return s.encodeJSON() }
