package logging

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces a secret, here as in config.Config.Redacted.
const Redacted = "xxxxx"

// MinSecretLen is the shortest explicit secret a Scrubber replaces
// wherever it appears: a shorter value would blank out ordinary words all
// over the log. Such a password is still removed where a pattern finds it
// (a URL's user info, password=...).
const MinSecretLen = 4

// patterns recognise where a secret sits, whatever its value. A value never
// runs across a quote, a backslash or whitespace, so an encoded JSON string
// that holds a match stays valid JSON after the replacement.
//
// need lists substrings (lower case) of which text must hold one for the
// pattern to be tried at all: most log lines hold none, and skip the
// regular expressions.
var patterns = []struct {
	need []string
	re   *regexp.Regexp
	repl string
}{
	// The password of a URL's user info: postgres://user:secret@host.
	{[]string{"://"}, regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@"'\\<>]*):[^\s@/"'\\<>]*@`), "${1}:" + Redacted + "@"},
	// key=value: libpq keywords (password, sslpassword), URL query
	// parameters, presigned-URL signatures and credentials (S3, RDS IAM
	// tokens), AWS variables.
	{[]string{"pass", "pwd", "secret", "token", "x-amz-"}, regexp.MustCompile(`(?i)\b((?:ssl)?password|passwd|pwd|secret|token|(?:aws_)?secret_access_key|(?:aws_)?session_token|x-amz-signature|x-amz-credential|x-amz-security-token)(\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&'";,)\\]*)`), "${1}${2}" + Redacted},
	// key: value, as JSON or YAML write it.
	{[]string{"pass", "secret", "token"}, regexp.MustCompile(`(?i)(["']?\b(?:(?:ssl)?password|passwd|(?:aws_)?secret_access_key|(?:aws_)?session_token|security_token)["']?\s*:\s*)(?:"(?:[^"\\]|\\.)*"|'[^']*'|[^\s,}"'\\]+)`), "${1}\"" + Redacted + "\""},
	// An HTTP Authorization header, to the end of the line or the string.
	{[]string{"authorization"}, regexp.MustCompile(`(?i)(\bauthorization\s*[:=]\s*)(?:"(?:[^"\\]|\\.)*"|[^\r\n"\\]+)`), "${1}" + Redacted},
	// A bearer token anywhere.
	{[]string{"bearer"}, regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]+=*`), "${1}" + Redacted},
}

// Scrubber removes secrets from text. It is immutable and safe for
// concurrent use; the zero value is not usable, use NewScrubber.
type Scrubber struct {
	known *strings.Replacer // nil when no secret is known
}

// NewScrubber returns a scrubber that, besides the patterns, replaces each
// of secrets wherever it appears, also percent-encoded (as in a URL) and
// escaped as inside a JSON string. Empty values and values shorter than
// MinSecretLen are ignored.
func NewScrubber(secrets ...string) *Scrubber {
	var forms []string
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			continue
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s), url.UserPassword("u", s).String()[2:])
		if b, err := json.Marshal(s); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
	}
	// Longest first, so a secret that holds another is replaced whole.
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	forms = slices.Compact(forms)
	if len(forms) == 0 {
		return &Scrubber{}
	}
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return &Scrubber{known: strings.NewReplacer(pairs...)}
}

// Scrub returns s with every secret replaced by Redacted.
func (s *Scrubber) Scrub(text string) string {
	if s.known != nil {
		text = s.known.Replace(text)
	}
	lower := strings.ToLower(text)
	for _, p := range patterns {
		if slices.ContainsFunc(p.need, func(n string) bool { return strings.Contains(lower, n) }) {
			text = p.re.ReplaceAllString(text, p.repl)
			lower = strings.ToLower(text)
		}
	}
	return text
}
