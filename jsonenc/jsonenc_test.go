package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestIsValidNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "0.5", "10.25", "1e5", "1E+5", "-2.5e-10", "0e0"} {
		if !IsValidNumber(s) {
			t.Errorf("IsValidNumber(%q) = false", s)
		}
	}
	for _, s := range []string{"", "-", "01", "1.", ".5", "+1", "1e", "1e+", "1.e5", "0x10", "1_0", "NaN", "1 "} {
		if IsValidNumber(s) {
			t.Errorf("IsValidNumber(%q) = true", s)
		}
	}
}

// marshal encodes v as json.Marshal (html) or an Encoder without HTML
// escaping does.
func marshal(t testing.TB, v any, html bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendAnyMatchesEncodingJSON(t *testing.T) {
	values := []any{
		nil, "", "plain", "<a href=\"x\">&</a>", "\u2028\u2029\x00\x1f\xff", true, false,
		0.0, math.Copysign(0, -1), 1.5, 1e-7, 1e21, 123456789.0, -2.5e-10, json.Number("12.50"), 7, int64(-9),
		map[string]any{"b": 1.0, "a": []any{"x", nil, map[string]any{}}, "<": ">"},
		[]any{}, map[string]any(nil), []any(nil),
		struct{ A string }{"<b>"}, // through encoding/json
	}
	for _, html := range []bool{false, true} {
		for _, v := range values {
			got, err := AppendAny([]byte("prefix"), v, html)
			if err != nil {
				t.Errorf("AppendAny(%#v, %v): %v", v, html, err)
				continue
			}
			if want := append([]byte("prefix"), marshal(t, v, html)...); !bytes.Equal(got, want) {
				t.Errorf("AppendAny(%#v, html %v) = %s, want %s", v, html, got, want)
			}
		}
	}
	for _, v := range []any{math.NaN(), math.Inf(1), json.Number("1.")} {
		if got, err := AppendAny([]byte("p"), v, true); err == nil || string(got) != "p" {
			t.Errorf("AppendAny(%v) = %q, %v; want p and an error", v, got, err)
		}
	}
}

func TestAppendRaw(t *testing.T) {
	for _, raw := range []string{`{"a": [1, 2], "b": "<&>"}`, ` "\u2028" `, `null`} {
		for _, html := range []bool{false, true} {
			got, err := AppendRaw(nil, []byte(raw), html)
			if err != nil {
				t.Fatal(err)
			}
			if want := marshal(t, json.RawMessage(raw), html); !bytes.Equal(got, want) {
				t.Errorf("AppendRaw(%s, %v) = %s, want %s", raw, html, got, want)
			}
		}
	}
	// Nesting at encoding/json's limit (10,000) and one past it: the fast
	// path must not accept what encoding/json refuses.
	for _, depth := range []int{10000, 10001} {
		raw := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		got, err := AppendRaw(nil, raw, false)
		want, werr := json.Marshal(json.RawMessage(raw))
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Errorf("AppendRaw(depth %d): error %v, encoding/json %v; equal output %v", depth, err, werr, bytes.Equal(got, want))
		}
	}
	if got, err := AppendRaw([]byte("p"), []byte(`{"a":`), true); err == nil || string(got) != "p" {
		t.Errorf("AppendRaw(broken) = %q, %v; want p and an error", got, err)
	}
}

// FuzzAppendString holds AppendString equal to encoding/json on any text.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "<&>", "\u2028\u2029", "\x00\x7f\xff\xfe", "é漢字🙂", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{false, true} {
			if got, want := AppendString(nil, s, html), marshal(t, s, html); !bytes.Equal(got, want) {
				t.Fatalf("AppendString(%q, %v) = %s, want %s", s, html, got, want)
			}
		}
	})
}

// FuzzAppendFloat holds AppendFloat equal to encoding/json on any float.
func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 1, -1.5, 1e-6, 9.99e-7, 1e20, 1e21, 1.7976931348623157e308, 5e-324} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		got, err := AppendFloat(nil, v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if err == nil {
				t.Fatalf("AppendFloat(%v) = %s, want an error", v, got)
			}
			return
		}
		if want := marshal(t, v, true); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendFloat(%v) = %s, %v; want %s", v, got, err, want)
		}
	})
}

// FuzzAppendRaw holds AppendRaw equal to encoding/json's embedding of a
// json.RawMessage on any bytes: same output, or an error for both.
func FuzzAppendRaw(f *testing.F) {
	for _, s := range []string{
		`{"summary":"no defects found.","score":7,"tags":["io","config"],"ok":true}`,
		` {"a" : [1, 2 ] , "b":"<&>"} `, `"\u2028\u2029"`, "\"\u2028\"", `null`, `-0.0e+10`, `1e400`,
		`{"a":1,"a":2}`, "\"\xff\xfe\"", `"\ud800"`, `"\uDC00\ud800x"`, `"\u00e9\/\b"`, `[[[[]]]]`,
		`{"a":`, `01`, `[1,]`, `"a` + "\x01" + `"`, "\t\n\r 1 \n", `{}x`, ``, ` `, `tru`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, html := range []bool{false, true} {
			want, werr := json.Marshal(json.RawMessage(raw))
			if html {
				var b bytes.Buffer
				if werr == nil {
					json.HTMLEscape(&b, want)
					want = b.Bytes()
				}
			} else if werr == nil {
				var b bytes.Buffer
				if err := json.Compact(&b, raw); err != nil {
					t.Fatalf("json.Compact(%q): %v after Marshal accepted it", raw, err)
				}
				want = b.Bytes()
			}
			got, err := AppendRaw([]byte("p"), raw, html)
			if (err != nil) != (werr != nil) {
				t.Fatalf("AppendRaw(%q, %v) error %v, encoding/json %v", raw, html, err, werr)
			}
			if err != nil {
				if string(got) != "p" {
					t.Fatalf("AppendRaw(%q, %v) = %q with an error, want dst unchanged", raw, html, got)
				}
				continue
			}
			if !bytes.Equal(got[1:], want) || got[0] != 'p' {
				t.Fatalf("AppendRaw(%q, %v) = %q, want p%q", raw, html, got, want)
			}
		}
	})
}
