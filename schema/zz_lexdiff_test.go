package schema

import "testing"

// lexString returns the length of the JSON string at the start of s, which
// starts with a quote, including both quotes.
func oldLexString(s string) (int, bool) {
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			i++
			if i >= len(s) {
				return 0, false
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s) {
					return 0, false
				}
				for _, h := range []byte(s[i+1 : i+5]) {
					if !isHex(h) {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func FuzzLexStringDiff(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\/\""`, `"\u12"`, `"\\"`, `"\\\"`, `"x\`, "\"a\nb\"", `"\x"`, `"\u1234`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = `"` + s
		n, ok := lexString(s)
		on, ook := oldLexString(s)
		if n != on || ok != ook {
			t.Fatalf("lexString(%q) = %d, %v, want %d, %v", s, n, ok, on, ook)
		}
	})
}
