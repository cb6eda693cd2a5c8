package sqltool

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendValue appends v, a value scanned into an any from a database/sql
// row, as a JSON scalar: null, a number, true or false, or a string (times
// in RFC 3339 format). A BLOB is appended as <N bytes>, which is not JSON,
// unless blobAsString, when it is the JSON string "<N bytes>". textBytes
// makes []byte holding valid UTF-8 text count as text rather than as a BLOB:
// some drivers return every column as []byte.
func appendValue(b []byte, v any, blobAsString, textBytes bool) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return appendFloat(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		return appendJSONString(b, v)
	case []byte:
		if textBytes && isText(v) {
			return appendJSONString(b, string(v))
		}
		blob := fmt.Sprintf("<%d bytes>", len(v))
		if blobAsString {
			return appendJSONString(b, blob)
		}
		return append(b, blob...)
	case time.Time:
		return appendJSONString(b, v.Format(time.RFC3339Nano))
	}
	return appendJSONString(b, fmt.Sprint(v))
}

// appendFloat appends f as encoding/json does; the non-finite values JSON
// lacks become the strings "NaN", "+Inf" and "-Inf".
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return appendJSONString(b, strconv.FormatFloat(f, 'g', -1, 64))
	}
	out, err := json.Marshal(f)
	if err != nil { // unreachable for finite values
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	}
	return append(b, out...)
}

// appendJSONString appends s as a JSON string without HTML escaping, so that
// tabs and newlines in values never break the tab-separated layout. Invalid
// UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// isText reports whether b is valid UTF-8 with no control characters but
// tab, newline and carriage return.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return false
		}
	}
	return true
}
