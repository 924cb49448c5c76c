package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// stdDecode is what decodeJSON replaced: encoding/json, numbers as
// json.Number, nothing after the value.
func stdDecode(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// TestDecodeJSONAgreesWithEncodingJSON: decodeJSON takes and refuses what
// encoding/json does, to the same values, on the cases where decoders
// differ most: bytes that are not UTF-8, surrogates, numbers no float64
// holds, duplicate keys, data after the value, and malformed JSON.
func TestDecodeJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"a":"\xff\xfe"}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00x"}`, `{"a":"\u0000"}`,
		`{"a":1e999}`, `{"a":123456789012345678901234567890}`, `{"a":-0}`, `{"a":1.5e-7}`,
		`{"a":1,"a":2}`, ` {"a":null} `, `[1,"x",true,null,{}]`, `"s"`, `0`,
		`{"a":01}`, `{"a":"x"} x`, `{"a":"x"}{}`, "{\"a\":\"tab\tx\"}", `{"a":[1,2,]}`,
		`{"a":tru}`, `{"a":"\x"}`, `{"a":1.}`, `{"a":`, ``, `   `, `{"a" 1}`, `{'a':1}`,
	} {
		want, wantErr := stdDecode([]byte(in))
		got, err := decodeJSON([]byte(in))
		if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: decodeJSON = %#v, %v; encoding/json = %#v, %v", in, got, err, want, wantErr)
		}
	}
}

// TestDecodeJSONDepth: nesting past maxJSONDepth is refused before the
// decoder recurses into it; up to it, decoded.
func TestDecodeJSONDepth(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	if _, err := decodeJSON(deep(maxJSONDepth)); err != nil {
		t.Errorf("depth %d: %v", maxJSONDepth, err)
	}
	if _, err := decodeJSON(deep(4 << 20)); err == nil || !strings.Contains(err.Error(), "nested more than 10000 levels") {
		t.Errorf("depth 4Mi: %v", err)
	}
	// Brackets inside strings are not nesting.
	if _, err := decodeJSON([]byte(`{"a":"` + strings.Repeat("[", 2*maxJSONDepth) + `\""}`)); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
}

// FuzzDecodeJSON: on any input, decodeJSON and encoding/json agree on
// whether it is one JSON value and, when it is, on the value.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `[1,2.5,-0,1e999]`, `{"a":"\ud800"}`, "\"\xff\"", `{"a":1,"a":[]}`, `nul`, `{"a":"x"} 1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !WithinDepth(data, maxJSONDepth) {
			return
		}
		want, wantErr := stdDecode(data)
		got, err := decodeJSON(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: decodeJSON error %v, encoding/json error %v", data, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeJSON = %#v, encoding/json = %#v", data, got, want)
		}
	})
}

// BenchmarkDecodeJSON compares decodeJSON with encoding/json (what it
// replaced) on a tool's arguments and an API's answer.
//
//	go test ./upstream -run '^$' -bench DecodeJSON -benchmem
func BenchmarkDecodeJSON(b *testing.B) {
	for _, in := range []struct{ name, data string }{
		{"arguments", `{"id":"abc-123","q":"query value"}`},
		{"answer", `{"id":"7","name":"a thing","state":"active","tags":["x","y"],"owner":{"id":1,"name":"ops"},"n":12.5}`},
	} {
		for _, dec := range []struct {
			name string
			fn   func([]byte) (any, error)
		}{{"segmentio", decodeJSON}, {"encoding-json", stdDecode}} {
			b.Run(in.name+"/"+dec.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := dec.fn([]byte(in.data)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// listingJSON is about n bytes of a JSON listing: an object holding an
// array of small objects, the shape of most large answers.
func listingJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n-128; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item %d","note":"a \"quoted\" word,\ta tab"}`, i, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestDecodedSize: decodedSize is at least what decodeJSON allocates, on a
// listing and on the shapes that decode to the most per byte (measured
// here: 7x for the listing, up to 82x for an array of empty arrays).
func TestDecodedSize(t *testing.T) {
	var flat strings.Builder
	flat.WriteString("{")
	for i := 0; flat.Len() < 300_000; i++ {
		if i > 0 {
			flat.WriteByte(',')
		}
		fmt.Fprintf(&flat, `"k%d":0`, i)
	}
	flat.WriteString("}")
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"listing", listingJSON(300_000)},
		{"one string", []byte(`{"data":"` + strings.Repeat("x", 300_000) + `"}`)},
		{"numbers", []byte("[" + strings.Repeat("0,", 150_000) + "0]")},
		{"short strings", []byte("[" + strings.Repeat(`"a",`, 75_000) + `"a"]`)},
		{"empty arrays", []byte("[" + strings.Repeat("[],", 100_000) + "[]]")},
		{"empty objects", []byte("[" + strings.Repeat("{},", 100_000) + "{}]")},
		{"flat object", []byte(flat.String())},
		{"nested", []byte(strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v, err := decodeJSON(tt.data)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			runtime.KeepAlive(v)
			allocated := int64(after.TotalAlloc - before.TotalAlloc)
			est := decodedSize(tt.data)
			t.Logf("%d bytes: decoding allocated %.1fx, estimated %.1fx", len(tt.data), float64(allocated)/float64(len(tt.data)), float64(est)/float64(len(tt.data)))
			if est < allocated {
				t.Errorf("estimated %d bytes, decoding allocated %d", est, allocated)
			}
		})
	}
}
