package serve

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/access"
)

// HashPrefix starts a token hash as the configuration holds it.
const HashPrefix = "sha256:"

// Tokens maps each principal's name to the SHA-256 of its bearer token.
type Tokens map[string][sha256.Size]byte

// Hash is a token's hash in the configuration's form, "sha256:<hex>".
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return HashPrefix + hex.EncodeToString(sum[:])
}

// ParseTokens reads the configuration's serve.tokens (name → "sha256:<hex>")
// and, when file is not "", a tokens file of "name sha256:<hex>" lines
// (blank lines and # comments skipped). A name given twice is refused.
func ParseTokens(fromConfig map[string]string, file string) (Tokens, error) {
	out := Tokens{}
	add := func(where, name, hash string) error {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, " \t") {
			return fmt.Errorf("%s: token name %q: want a name without spaces", where, name)
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("%s: token name %q is given twice", where, name)
		}
		hexed, ok := strings.CutPrefix(strings.TrimSpace(hash), HashPrefix)
		b, err := hex.DecodeString(hexed)
		if !ok || err != nil || len(b) != sha256.Size {
			// Never echo the value: it may be the token itself, pasted by mistake.
			return fmt.Errorf("%s: token %q: want %s and 64 hex digits (pg-cdc serve token %s prints one)", where, name, HashPrefix, name)
		}
		out[name] = [sha256.Size]byte(b)
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(fromConfig)) {
		if err := add("serve.tokens", name, fromConfig[name]); err != nil {
			return nil, err
		}
	}
	if file == "" {
		return out, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("serve.tokens_file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"name sha256:<hex>\"", file, n)
		}
		if err := add(fmt.Sprintf("%s:%d", file, n), name, hash); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("serve.tokens_file %s: %w", file, err)
	}
	return out, nil
}

// authenticate returns the principal a bearer token names. Every
// configured hash is compared, in constant time, whatever matched before:
// the time taken says nothing about which tokens exist.
func (t Tokens) authenticate(token string) (access.Principal, bool) {
	sum := sha256.Sum256([]byte(token))
	var found string
	for _, name := range slices.Sorted(maps.Keys(t)) {
		h := t[name]
		if subtle.ConstantTimeCompare(sum[:], h[:]) == 1 {
			found = name
		}
	}
	return access.Principal{Name: found}, found != ""
}

// loopback reports whether a listen address binds only loopback
// interfaces ("127.0.0.1:8080", "[::1]:0", "localhost:8080"). An empty host
// binds every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
