package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SpendVerdict is a [SpendLedger]'s answer to a reservation.
type SpendVerdict int

// The verdicts of [SpendLedger.Reserve].
const (
	// SpendReserved: the dollars are reserved.
	SpendReserved SpendVerdict = iota
	// SpendWait: they fit once calls in flight settle; ask again.
	SpendWait
	// SpendRefused: they do not fit even then; the cap is reached for
	// every worker of the run.
	SpendRefused
)

// SpendLedger is a run's spend cap (limits.max_cost) kept in Redis for
// every worker of the run: a hash (key) of the dollars spent, the dollars
// reserved by the calls in flight and whether a call was refused, changed
// only by Lua scripts, so that concurrent reservations of any number of
// workers never together pass the cap. The worker adapts it to the spend
// cap's ledger (internal/spend's Ledger, through Cap.Share).
//
// Bound: a call reserves its worst-case cost before it starts, so the
// spent never passes the cap while every call settles within its
// reservation; the one case past it is a streamed answer that reported no
// usage, counted at its reservation. A worker killed while its calls are
// in flight leaves their reservations counted (the cap errs on the side
// of spending less).
type SpendLedger struct {
	rdb redis.UniversalClient
	key string
}

// SpendLedger returns the spend ledger of run, kept under
// Key("spend", run).
func (c *Client) SpendLedger(run string) *SpendLedger {
	return &SpendLedger{rdb: c.rdb, key: c.Key("spend", run)}
}

// Reserve reserves dollars when spent + reserved + dollars ≤ limit
// (SpendReserved); else it answers SpendWait while spent + dollars ≤
// limit and no call was refused, and otherwise marks the cap reached
// (SpendRefused). It also returns the dollars spent by every worker. The
// limit set by [SpendLedger.Reopen], when there is one, wins over limit:
// it is the cap of the run's latest start, which workers that opened the
// run's job before it (with its cap then) do not know.
func (l *SpendLedger) Reserve(ctx context.Context, limit, dollars float64) (SpendVerdict, float64, error) {
	res, err := spendReserve.Run(ctx, l.rdb, []string{l.key}, strconv.FormatFloat(limit, 'g', -1, 64), strconv.FormatFloat(dollars, 'g', -1, 64)).StringSlice()
	if err != nil {
		return SpendRefused, 0, l.fail(ctx, err)
	}
	if len(res) != 2 {
		return SpendRefused, 0, fmt.Errorf("queue: spend ledger %s: script answered %q", l.key, res)
	}
	spent, err := strconv.ParseFloat(res[1], 64)
	if err != nil {
		return SpendRefused, 0, fmt.Errorf("queue: spend ledger %s: spent %q: %w", l.key, res[1], err)
	}
	switch res[0] {
	case "reserved":
		return SpendReserved, spent, nil
	case "wait":
		return SpendWait, spent, nil
	}
	return SpendRefused, spent, nil
}

// Settle ends a reservation of reserved dollars with its real cost.
func (l *SpendLedger) Settle(ctx context.Context, reserved, cost float64) error {
	err := spendSettle.Run(ctx, l.rdb, []string{l.key}, strconv.FormatFloat(reserved, 'g', -1, 64), strconv.FormatFloat(cost, 'g', -1, 64)).Err()
	if err != nil {
		return l.fail(ctx, err)
	}
	return nil
}

// SpendState is what a [SpendLedger] holds.
type SpendState struct {
	Spent, Reserved float64 // dollars
	// Limit is the cap set by the latest Reopen; 0 when none was.
	Limit float64
	// Reached: a call was refused; no call starts until the run is
	// started again (Reset) with a higher cap.
	Reached bool
}

// State reads the ledger.
func (l *SpendLedger) State(ctx context.Context) (SpendState, error) {
	vals, err := l.rdb.HMGet(ctx, l.key, "spent", "reserved", "reached", "limit").Result()
	if err != nil {
		return SpendState{}, l.fail(ctx, err)
	}
	num := func(v any) float64 {
		s, _ := v.(string)
		f, _ := strconv.ParseFloat(s, 64)
		return f
	}
	return SpendState{Spent: num(vals[0]), Reserved: num(vals[1]), Reached: num(vals[2]) > 0, Limit: num(vals[3])}, nil
}

// Reopen starts the run again under limit dollars, keeping the spend: it
// clears the reached mark, so calls reserve again while they fit, and
// sets the limit every worker's reservations are held to from then on,
// whatever cap the job they opened says (a run resumed with a higher
// limits.max_cost is the same run: its workers may hold the job from
// before).
func (l *SpendLedger) Reopen(ctx context.Context, limit float64) error {
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, l.key, "reached")
		p.HSet(ctx, l.key, "limit", strconv.FormatFloat(limit, 'g', -1, 64))
		return nil
	})
	if err != nil {
		return l.fail(ctx, err)
	}
	return nil
}

// SpendWatchEvery is how often [SpendLedger.Watch] reads the ledger.
const SpendWatchEvery = 250 * time.Millisecond

// Watch returns ctx, canceled once the ledger says a call was refused at
// the cap and no call is in flight any more (their reservations settled):
// the workers start nothing more, so a coordinator stops collecting,
// leaving the rest pending. stop ends the watch and reports whether the
// cap stopped the run, with the ledger's last state. A read that fails
// (Redis away) is tried again at the next tick.
func (l *SpendLedger) Watch(ctx context.Context) (_ context.Context, stop func() (bool, SpendState)) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu     sync.Mutex
		capped bool
		last   SpendState
	)
	done := make(chan struct{})
	go func() { // owned by stop, which waits for it
		defer close(done)
		tick := time.NewTicker(SpendWatchEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			st, err := l.State(ctx)
			if err != nil {
				continue
			}
			mu.Lock()
			last = st
			if st.Reached && st.Reserved < 1e-9 {
				capped = true
				mu.Unlock()
				cancel()
				return
			}
			mu.Unlock()
		}
	}()
	return ctx, func() (bool, SpendState) {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if st, err := l.State(context.Background()); err == nil {
			last = st
		}
		return capped, last
	}
}

func (l *SpendLedger) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("queue: spend ledger %s: no answer", l.key)
	}
	return fmt.Errorf("%w: spend ledger %s: %w", ErrSharedLimit, l.key, err)
}

// spendReserve reserves ARGV[2] dollars in KEYS[1] under the limit
// ARGV[1], or the limit Reopen set in KEYS[1]: it answers
// {"reserved"|"wait"|"refused", spent}, as spend.Ledger.Reserve says.
var spendReserve = redis.NewScript(`
local limit = tonumber(redis.call("HGET", KEYS[1], "limit") or ARGV[1])
local dollars = tonumber(ARGV[2])
local spent = tonumber(redis.call("HGET", KEYS[1], "spent") or "0")
local reserved = tonumber(redis.call("HGET", KEYS[1], "reserved") or "0")
local reached = redis.call("HGET", KEYS[1], "reached")
if not reached and spent + reserved + dollars <= limit then
  redis.call("HINCRBYFLOAT", KEYS[1], "reserved", ARGV[2])
  return {"reserved", tostring(spent)}
end
if reached or spent + dollars > limit then
  redis.call("HSET", KEYS[1], "reached", 1)
  return {"refused", tostring(spent)}
end
return {"wait", tostring(spent)}
`)

// spendSettle ends a reservation of ARGV[1] dollars in KEYS[1] with its
// cost ARGV[2]; the reserved total never goes below zero.
var spendSettle = redis.NewScript(`
local reserved = tonumber(redis.call("HINCRBYFLOAT", KEYS[1], "reserved", -tonumber(ARGV[1])))
if reserved < 0 then
  redis.call("HSET", KEYS[1], "reserved", 0)
end
redis.call("HINCRBYFLOAT", KEYS[1], "spent", ARGV[2])
return 0
`)
