package hostport

import "testing"

func TestValidPort(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "80": true, "65535": true, "00080": true,
		"": false, "65536": false, "99999": false, "123456": false, "-1": false, "8a": false, " 80": false,
	} {
		if got := ValidPort(s); got != want {
			t.Errorf("ValidPort(%q) = %v, want %v", s, got, want)
		}
	}
}
