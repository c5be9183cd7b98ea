package shared

import (
	"errors"
	"fmt"
	"strings"
)

// ErrLabelKey is wrapped by CheckLabelKey's errors.
var ErrLabelKey = errors.New("not a valid label key")

// CheckLabelKey fails unless key is a valid Kubernetes label key: an
// optional prefix, a DNS-1123 subdomain of at most 253 characters, and '/',
// then a name of 1 to 63 characters of [A-Za-z0-9._-] that begins and ends
// with a letter or digit. It is transcribed from k8s.io/apimachinery
// pkg/util/validation/validation.go (IsQualifiedName, IsDNS1123Subdomain,
// v0.37.2), without regexp, so the filter that links this package stays
// small.
func CheckLabelKey(key string) error {
	prefix, name, qualified := strings.Cut(key, "/")
	if !qualified {
		name = key
	}
	if qualified && strings.Contains(name, "/") {
		return fmt.Errorf("%q: %w: at most one '/', between a DNS subdomain prefix and a name (example.com/rack)", key, ErrLabelKey)
	}
	if qualified && !isDNS1123Subdomain(prefix) {
		return fmt.Errorf("%q: %w: the prefix %q must be a lowercase DNS subdomain of at most 253 characters (example.com)", key, ErrLabelKey, prefix)
	}
	if !isQualifiedName(name) {
		return fmt.Errorf("%q: %w: the name %q must be 1 to 63 characters of A-Z, a-z, 0-9, '-', '_' and '.', beginning and ending with a letter or digit", key, ErrLabelKey, name)
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isQualifiedName: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63.
func isQualifiedName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNS1123Subdomain: [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*,
// at most 253.
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if !isDNS1123Part(part) {
			return false
		}
	}
	return true
}

func isDNS1123Part(s string) bool {
	lower := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	if len(s) == 0 || !lower(s[0]) || !lower(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !lower(c) && c != '-' {
			return false
		}
	}
	return true
}
