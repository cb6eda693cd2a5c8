package queue

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestCadenceOf: a worker beats every 2 s (more often under a short
// visibility timeout), touches every third of the timeout, and its
// heartbeat outlives three missed beats.
func TestCadenceOf(t *testing.T) {
	for _, tc := range []struct {
		visibility time.Duration
		want       cadence
	}{
		{30 * time.Second, cadence{beat: 2 * time.Second, touch: 10 * time.Second, ttl: 7 * time.Second}},
		{3 * time.Second, cadence{beat: time.Second, touch: time.Second, ttl: 4 * time.Second}},
		{time.Second, cadence{beat: time.Second / 3, touch: time.Second / 3, ttl: 3*(time.Second/3) + time.Second}},
	} {
		if got := cadenceOf(tc.visibility); got != tc.want {
			t.Errorf("cadenceOf(%v) = %+v, want %+v", tc.visibility, got, tc.want)
		}
	}
}

// TestCadenceRun (synctest: fake time): the heartbeat steps at once and
// then every beat, touching on the first step and every touch after, and
// stops when its context ends.
func TestCadenceRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 21*time.Second)
		defer cancel()
		var beats, touches []time.Duration
		cadence{beat: 2 * time.Second, touch: 10 * time.Second}.run(ctx, func(touch bool) {
			at := time.Since(start)
			beats = append(beats, at)
			if touch {
				touches = append(touches, at)
			}
		})
		if took := time.Since(start); took != 21*time.Second {
			t.Errorf("run returned after %v, want 21s (its context's end)", took)
		}
		var want []time.Duration
		for s := 0; s <= 20; s += 2 {
			want = append(want, time.Duration(s)*time.Second)
		}
		if !slices.Equal(beats, want) {
			t.Errorf("beats at %v, want %v", beats, want)
		}
		if want := []time.Duration{0, 10 * time.Second, 20 * time.Second}; !slices.Equal(touches, want) {
			t.Errorf("touches at %v, want %v", touches, want)
		}
	})
}

// TestEvery (synctest): due is true the first time, then only once d has
// passed since it was last due.
func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := every{d: time.Second}
		var got []bool
		for range 6 {
			got = append(got, e.due())
			time.Sleep(400 * time.Millisecond)
		}
		// at 0, 0.4, 0.8, 1.2, 1.6, 2.0 s: due at 0, 1.2 (1.2 ≥ 1) and not at 2.0 (0.8 after 1.2)
		if want := []bool{true, false, false, true, false, false}; !slices.Equal(got, want) {
			t.Errorf("due over 2 s every 400 ms = %v, want %v", got, want)
		}
	})
}

// TestCadenceTouchesEveryBeat (synctest): when the touch period is the
// beat's (a visibility timeout under 6 s), every step touches, however
// long the step's own Redis calls take. Measuring the time since the last
// touch instead skipped every other touch once a step took any time,
// leaving a live worker's tasks idle for two thirds of the timeout.
func TestCadenceTouchesEveryBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := cadenceOf(4 * time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 10*c.beat-time.Millisecond)
		defer cancel()
		steps, touches := 0, 0
		c.run(ctx, func(touch bool) {
			steps++
			if touch {
				touches++
			}
			time.Sleep(50 * time.Millisecond) // the beat's round trip
		})
		if steps != 10 || touches != 10 {
			t.Errorf("%d steps, %d touches; want 10 each", steps, touches)
		}
	})
}
