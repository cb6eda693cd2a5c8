package parse

import "strconv"

// Port parses a TCP port number.
func Port(s string) int {
	n, _ := strconv.Atoi(s) // the error is dropped: "abc" becomes port 0
	return n
}
