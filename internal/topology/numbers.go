package topology

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/loctree/loctree/shared"
)

// Every number of the model is a whole number (uint32). encoding/json
// refuses 1.4 or -1 there; yaml.v3 refuses -1 without naming the field and
// truncates 1.4 to 1 without a word (issue 26 item 7: a factor 1.4 became
// 1, and the loads "0 % healthy"). Both formats refuse such a number here,
// with its line, its field and what the field takes.

// numberHints say, per integer key of the model, what it takes. A key
// whose type is an integer (or a map of integers) must have one: the test
// TestEveryIntegerFieldHasAHint walks the model.
var numberHints = map[string]string{
	"weight":                  "weights are whole numbers, 0 to 4294967295",
	"overprovisioning_factor": fmt.Sprintf("overprovisioning_factor is in percent: 140 means 1.4 (Envoy's default), 1 to %d", shared.MaxOverprovisioningFactor),
	"panic_threshold":         "panic_threshold is a whole percent, 0 to 100 (0 disables panic)",
	"timeout_seconds":         fmt.Sprintf("timeout_seconds are whole seconds, 1 to %d", shared.MaxAffinityTimeout),
	"to":                      "distribute weights are whole percents, 1 to 100, that sum to 100",
	"high":                    fmt.Sprintf("load_aware high is whole requests in flight per endpoint, 2 to %d", shared.MaxLoadBand),
	"low":                     fmt.Sprintf("load_aware low is whole requests in flight per endpoint, 1 to %d, below high", shared.MaxLoadBand-1),
}

// numberError is the error for value, given at line for the integer
// field (a key, or a JSON path whose last key names it), when it is not a whole number or does not fit 0..4294967295.
func numberError(line int, field, value string) error {
	key := field[strings.LastIndexByte(field, '.')+1:]
	hint := numberHints[key]
	f, err := strconv.ParseFloat(strings.ReplaceAll(value, "_", ""), 64)
	var what string
	switch {
	case err != nil || math.IsNaN(f): // .nan, .inf
		what = "is not a whole number"
	case f < 0 || f > math.MaxUint32:
		what = "is out of range"
	case f != math.Trunc(f):
		what = "is not a whole number"
		if key == "overprovisioning_factor" {
			hint += factorSuggestion(f, value)
		}
	default: // 140.0, 1e3: whole, in a notation encoding/json refuses too
		what = fmt.Sprintf("is not written as a whole number (write %d)", uint64(f))
	}
	return fmt.Errorf("line %d: %s %s %s; %s", line, key, value, what, hint)
}

// factorSuggestion is " (write 140 for a factor of 1.4)" for a fraction f
// that reads as a factor: the percent that means it, when there is one.
func factorSuggestion(f float64, value string) string {
	p := math.Round(f * 100)
	if math.Abs(p-f*100) > 1e-6 || p < 1 || p > shared.MaxOverprovisioningFactor {
		return ""
	}
	return fmt.Sprintf(" (write %d for a factor of %s)", uint64(p), value)
}

// isInteger reports whether t is a whole-number type of the model.
func isInteger(t reflect.Type) bool {
	switch elem(t).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// checkYAMLNumber fails on a scalar for an integer field of type t that is
// not a whole number of that type (yaml.v3 would truncate 1.4 to 1, or
// refuse -1 without naming the field).
func checkYAMLNumber(n *yaml.Node, t reflect.Type, field string) error {
	if n.Kind != yaml.ScalarNode || !isInteger(t) {
		return nil
	}
	tag := n.ShortTag()
	if tag != "!!float" && tag != "!!int" {
		return nil // a string or null: the decoder names its type
	}
	v := reflect.New(elem(t))
	if tag == "!!float" || n.Decode(v.Interface()) != nil {
		return numberError(n.Line, field, n.Value)
	}
	return nil
}

// jsonNumberError is numberError for encoding/json's refusal of a number
// in an integer field (value "number 1.4"), or nil for another type error.
func jsonNumberError(line int, field, value string, t reflect.Type) error {
	num, ok := strings.CutPrefix(value, "number ")
	if !ok || !isInteger(t) {
		return nil
	}
	return numberError(line, field, num)
}
