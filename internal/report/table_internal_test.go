package report

import (
	"strings"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	t.Parallel()
	// 10 results a second over the last minute (5 a second before it).
	var ss []Sample
	for s := 0; s <= 120; s += 10 {
		done := int64(5 * s)
		if s > 60 {
			done = 300 + int64(10*(s-60))
		}
		ss = append(ss, Sample{T: float64(s), Done: done})
	}
	tests := []struct {
		name              string
		d                 *Data
		pct, pctText, eta string
		etaText           string
	}{
		{"running", &Data{Totals: Totals{Inputs: 2900, Done: 900}, Samples: ss}, "0.3103", "31.0%", "200", "3m20s"},
		{"finished", &Data{Totals: Totals{Inputs: 900, Done: 900}, Samples: ss, Done: true}, "1.0000", "100.0%", "0", "finished"},
		{"stopped", &Data{Totals: Totals{Inputs: 2900, Done: 900}, Samples: ss, Done: true}, "0.3103", "31.0%", "-1", "not running"},
		{"unknown inputs", &Data{Totals: Totals{Inputs: -1, Done: 900}, Samples: ss}, "-1", "unknown", "-1", "unknown"},
		{"no rate yet", &Data{Totals: Totals{Inputs: 10}, Samples: ss[:1]}, "0.0000", "0.0%", "-1", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cs := progress(tt.d)
			if len(cs) != 2 || cs[0].ID != "progress" || cs[1].ID != "eta" {
				t.Fatalf("progress = %+v, want the progress and eta counters", cs)
			}
			if cs[0].Value != tt.pct || cs[0].Text != tt.pctText || cs[1].Value != tt.eta || cs[1].Text != tt.etaText {
				t.Errorf("progress = %s %q, eta %s %q; want %s %q, %s %q", cs[0].Value, cs[0].Text, cs[1].Value, cs[1].Text,
					tt.pct, tt.pctText, tt.eta, tt.etaText)
			}
		})
	}
}

func TestRunsText(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if got := runsText([]Run{{Start: start, End: start.Add(time.Minute)}}); got != "" {
		t.Errorf("runsText(one run) = %q, want \"\"", got)
	}
	got := runsText([]Run{{Start: start, End: start.Add(time.Minute)}, {Start: start.Add(time.Hour), End: start.Add(time.Hour + 90*time.Second)}})
	for _, want := range []string{"its 2 runs", "run 1 from 2026-11-27 12:00:00 UTC for 1m0s", "run 2 from 2026-11-27 13:00:00 UTC for 1m30s"} {
		if !strings.Contains(got, want) {
			t.Errorf("runsText = %q, want it to hold %q", got, want)
		}
	}
}
