package proxywasm

import "testing"

func TestParseLogLevel(t *testing.T) {
	for in, want := range map[string]LogLevel{"trace": LogTrace, "debug": LogDebug, "info": LogInfo,
		"warn": LogWarn, "warning": LogWarn, "error": LogError, "critical": LogCritical} {
		if got, err := ParseLogLevel(in); err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLogLevel("loud"); err == nil {
		t.Error("ParseLogLevel(loud) accepted an unknown level")
	}
	if LogWarn.String() != "warn" || LogLevel(9).String() != "unknown" {
		t.Error("level names")
	}
}
