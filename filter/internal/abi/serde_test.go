package abi

import (
	"bytes"
	"reflect"
	"testing"
)

func TestPairsRoundTrip(t *testing.T) {
	h := [][2]string{{":status", "200"}, {"etag", `"7"`}, {"empty", ""}}
	b := EncodePairs(h)
	want := []byte{3, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b[:len(want)], want) {
		t.Fatalf("header of the encoding: %v", b[:len(want)])
	}
	got, err := DecodePairs(b)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := DecodePairs([]byte{1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 'a', 0}); err == nil {
		t.Fatal("accepted a key longer than the data")
	}
}

func FuzzDecodePairs(f *testing.F) {
	f.Add(EncodePairs([][2]string{{"a", "b"}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodePairs(b)
		if err != nil {
			return
		}
		if again, err := DecodePairs(EncodePairs(h)); err != nil || len(again) != len(h) {
			t.Fatalf("round trip of %v: %v %v", h, again, err)
		}
	})
}
