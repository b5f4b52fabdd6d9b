package serve

import (
	"slices"
	"strings"
	"testing"
)

func TestNewToken(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b || !strings.HasPrefix(a, "pgcdc_") || len(a) != len("pgcdc_")+43 {
		t.Errorf("tokens %q and %q", a, b)
	}
	if Hash(a) == Hash(b) || len(Hash(a)) != len("sha256:")+64 {
		t.Errorf("hashes %q and %q", Hash(a), Hash(b))
	}
}

func TestDefaultAllowedHosts(t *testing.T) {
	for _, c := range []struct {
		listen string
		has    string
		hasNot string
	}{
		{"127.0.0.1:8080", "127.0.0.1", ""},
		{"10.1.2.3:8080", "10.1.2.3", ""},
		{"db.internal:8080", "db.internal", ""},
		{"0.0.0.0:8080", "localhost", "0.0.0.0"},
		{"[::]:8080", "::1", "::"},
	} {
		hosts := DefaultAllowedHosts(c.listen)
		if !slices.Contains(hosts, "localhost") || !slices.Contains(hosts, c.has) {
			t.Errorf("%s: %v, want localhost and %s", c.listen, hosts, c.has)
		}
		if c.hasNot != "" && slices.Contains(hosts, c.hasNot) {
			t.Errorf("%s: %v holds the unspecified address %s", c.listen, hosts, c.hasNot)
		}
	}
}
