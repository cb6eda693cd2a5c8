package report

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNiceTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lo, hi float64
		n      int
		want   []float64
	}{
		{"unit", 0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{"round up", 0, 97, 5, []float64{0, 20, 40, 60, 80, 100}},
		{"offset", 3, 14, 5, []float64{0, 5, 10, 15}},
		{"fives", 0, 230, 5, []float64{0, 50, 100, 150, 200, 250}},
		{"empty range", 5, 5, 5, []float64{5, 5.2, 5.4, 5.6, 5.8, 6}},
		{"inverted", 1, 0, 5, []float64{1, 1.2, 1.4, 1.6, 1.8, 2}},
		{"NaN", math.NaN(), math.NaN(), 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{"small", 0, 0.0031, 4, []float64{0, 0.001, 0.002, 0.003, 0.004}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := niceTicks(tt.lo, tt.hi, tt.n)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
				t.Errorf("niceTicks(%v, %v, %d) (-want +got):\n%s", tt.lo, tt.hi, tt.n, diff)
			}
		})
	}
}

func TestPlotScales(t *testing.T) {
	t.Parallel()
	p := newPlot("x", 400, 200, 0, 10, 0, 97, 45)
	// Plot area: x from 56 to 400-56, y from 200-38 down to 28; the left
	// domain widens to 0..100, the right one to 0..50.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"X(0)", p.X(0), 56},
		{"X(10)", p.X(10), 344},
		{"X(5)", p.X(5), 200},
		{"Y(0)", p.Y(0), 162},
		{"Y(100)", p.Y(100), 28},
		{"Y(50)", p.Y(50), 95},
		{"Y2(50)", p.Y2(50), 28},
		{"Y2(25)", p.Y2(25), 95},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	nums := map[float64]string{0: "0", 950: "950", 12345: "12.3k", 3_400_000: "3.4M", 0.25: "0.25", 1.5: "1.5"}
	for v, want := range nums {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
	}
	secs := map[float64]string{0: "0", 0.25: "250ms", 1.5: "1.5s", 90: "90s", 600: "10m", 9000: "2.5h"}
	for v, want := range secs {
		if got := fmtSeconds(v); got != want {
			t.Errorf("fmtSeconds(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestThin(t *testing.T) {
	t.Parallel()
	var ss []Sample
	for i := range 7 {
		ss = append(ss, Sample{Done: int64(i)})
	}
	var got []int64
	for _, s := range thin(ss) {
		got = append(got, s.Done)
	}
	if diff := cmp.Diff([]int64{0, 2, 4, 6}, got); diff != "" {
		t.Errorf("thin(0..6) (-want +got):\n%s", diff)
	}
	ss = ss[:0]
	for i := range 6 {
		ss = append(ss, Sample{Done: int64(i)})
	}
	got = got[:0]
	for _, s := range thin(ss) {
		got = append(got, s.Done)
	}
	if diff := cmp.Diff([]int64{0, 2, 4, 5}, got); diff != "" {
		t.Errorf("thin(0..5) keeps the last (-want +got):\n%s", diff)
	}
}
