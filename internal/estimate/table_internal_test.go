package estimate

import (
	"errors"
	"strings"
	"testing"
)

// TestReportThousands groups digits by three, keeping the sign.
func TestReportThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234", -100: "-100"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestReportDollars shows two decimals from $100, six below a cent and
// four between.
func TestReportDollars(t *testing.T) {
	for c, want := range map[float64]string{123.456: "$123.46", 0.001234: "$0.001234", 1.23456: "$1.2346", 0.01: "$0.0100"} {
		if got := dollars(c); got != want {
			t.Errorf("dollars(%g) = %q, want %q", c, got, want)
		}
	}
}

// TestReportWriteBad names the bad lines shown, counts the others, and
// writes nothing when no input is bad.
func TestReportWriteBad(t *testing.T) {
	var b strings.Builder
	(&Stats{OK: 5}).WriteBad(&b, "in.jsonl")
	if b.Len() != 0 {
		t.Errorf("no bad input: got %q", b.String())
	}
	st := &Stats{OK: 5, Bad: 3, Shown: []BadLine{{Line: 2, Err: errors.New("not JSON")}}}
	st.WriteBad(&b, "in.jsonl")
	want := "in.jsonl:2: not JSON\nin.jsonl: and 2 more bad lines\nbatchagent run: 3 of 8 inputs are bad; the estimate covers the other 5\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestReportPackAutoLine: the dry run of an automatic packing job says
// that the engine chooses the size as the run measures, up to what, and
// the share of answers it checks.
func TestReportPackAutoLine(t *testing.T) {
	var b strings.Builder
	(&Report{Pack: true, PackAuto: true, PackSize: 20, PackVerify: 0.02, AnswerTokens: &Span{}}).WriteTable(&b)
	want := "packing: auto, up to 20 a call; chosen as the run measures (counted below at 20 a call); 2% of packed answers checked by running their tasks alone\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table:\n%s\nwant a line ending %q", b.String(), want)
	}
	b.Reset()
	(&Report{Pack: true, PackSize: 10, AnswerTokens: &Span{}}).WriteTable(&b)
	if !strings.Contains(b.String(), "packed calls of up to 10 agents, each sending the shared prefix once\n") || strings.Contains(b.String(), "auto") {
		t.Errorf("fixed packing's table:\n%s", b.String())
	}
}
