--[[
decide.lua: `decide` decides one request against every rule that applies to
it, in one atomic call. The request is allowed only if every enforcing rule conforms; then
each conforming rule counts it. When it is denied, nothing is counted anywhere.
The arithmetic mirrors src/domain/algorithms (same formulas, same rounding); the
conformance and property tests run both against the same cases.

In a Redis Cluster one call can only touch one slot. A request whose rules
live in several slots is decided with the reserve and release modes: every
slot reserves (decides its own rules and takes their units, exactly as a
decision would, and says what it took); when any slot refuses, the request is
denied and every slot that took units releases them. The store combines the
slots' verdicts with the domain's `combine` (src/domain/algorithms/index.ts).

A Redis function. This file and reset.lua are the parts of one Redis
function library, which floodgateLibrary (src/store/redis/scripts.ts)
assembles and FUNCTION LOADs: its first line names the library after a
digest of its text (so that instances running different versions during a
deploy each call their own), then a prelude and this file, then reset.lua,
then the lines registering `decide` and `reset` under names carrying the
same digest. A library's helpers are defined once, when it is loaded; a
script sent by EVALSHA defined them again on every call, which cost about a
fifth of a check.

Constants. This file defines no number it shares with TypeScript: the names
in capitals below come from a prelude that floodgateLibrary puts in front of
this comment, on the line of its first one, one `local NAME = n` for each
code of src/store/redis/script-codes.ts (so line n of this file is line n + 1
of the library in Redis's error messages):
  ALGO_<algorithm>   ALGO_SLIDING_WINDOW_COUNTER, ALGO_TOKEN_BUCKET, ALGO_FIXED_WINDOW,
                     ALGO_SLIDING_WINDOW_LOG, ALGO_LEAKY_BUCKET, ALGO_CONCURRENCY
  ACTION_<action>    ACTION_REJECT, ACTION_THROTTLE, ACTION_LOG_ONLY
  MODE_<flag>        MODE_DRY_RUN, MODE_RESERVE, MODE_RELEASE (MODE_DECIDE is no flag: 0)
  RELEASE_<outcome>  RELEASE_RESTORED, RELEASE_SUBTRACTED, RELEASE_NOTHING_LEFT
  WEIGHT_ONE         the sliding window counter's weight of one (fixed point)

keys   per rule, in the order of the rules in args:
         SLIDING_WINDOW_LOG   1 key:  the bucket's log, a list of release times in ms,
                                      oldest first
         CONCURRENCY          1 key:  the bucket's leases, a sorted set of slot names
                                      scored by their expiry in ms (see "Leases")
         any other algorithm  2 keys: the page pair holding the bucket, two hashes
                                      a and b (see "Pages" below)
args   [1] now in ms, or "" to read Redis TIME (tests pin the clock with it)
       [2] cost, units the request takes from every rule
       [3] mode, a sum of MODE_ flags:
             MODE_DECIDE                   decide, and count the request if allowed
             MODE_DRY_RUN                  decide, count nothing
             MODE_RESERVE                  reserve (see above)
             MODE_RESERVE + MODE_DRY_RUN   reserve, take nothing
             MODE_RELEASE                  give back what the receipts took
       [4] N, the number of rules
       then 2 values per rule:
         spec        "<algorithm>:<limit>:<window_ms>:<capacity>:<action>", the
                     algorithm an ALGO_ code, the capacity the burst (or the limit
                     where there is none), the action an ACTION_ code; a GLOBAL
                     rule's ends in ":G:<regions>", the other regions (comma
                     separated, maybe none) whose copies count (see "Regions");
                     a calendar rule's has ":C:<marker>:<b1>,...,<b6>" after the
                     action (before any ":G:"), its calendar's marker and six
                     period boundaries in ms (see "Calendars")
         field       the bucket's field in its page ("" for SLIDING_WINDOW_LOG);
                     for CONCURRENCY the check's lease, the slot it takes
       release only: then N receipts, one per rule, as reserve returned them
Reply  decide (neither MODE_RESERVE nor MODE_RELEASE):
         { now_ms, allowed (1 or 0),
           then 5 integers per rule: conforming (1 or 0), remaining, reset_at_ms,
           retry_after_ms (-1 when conforming), delay_ms }
       reserve (MODE_RESERVE): each rule's verdict, for the store to combine
       with the other slots', then what was taken:
         { now_ms, allowed in this slot (1 or 0),
           then 7 integers per rule: conforming, remaining and reset_at_ms if
           admitted, retry_after_ms (-1 when conforming), delay_ms if admitted,
           remaining and reset_at_ms as things stand,
           then N receipts: "" where nothing was taken, else what release needs:
           "<state written>/<state before>/<counted at>" for a page's bucket (states
           as decimal integers joined by ":"), "<stamp>/<dead runs>" for a log,
           the lease for CONCURRENCY }
       release (MODE_RELEASE):
         { now_ms, then 1 integer per rule: RELEASE_RESTORED the bucket is back
           exactly as it was, RELEASE_SUBTRACTED the units were subtracted
           (other requests counted on top of them meanwhile),
           RELEASE_NOTHING_LEFT nothing of them was left to give back }

Release is exact when nothing else wrote the bucket in between: the receipt
holds the bucket's state before and after, and the state before is put back.
Otherwise the units are subtracted where they now count: windows' counts move
one place down per window (current becomes previous), a meter's debt drains
from the front, so what is left of the reservation is what it took minus what
has drained since; a log loses `cost` entries of the reserved release time,
and gets back the entries that had left the window, which reserve dropped
(only a longer window would count them again). When the rule's window changed
as well, nothing is given back (the units stay counted: an over-count, never
an over-admission).

Leases. A CONCURRENCY bucket holds a slot per request in flight: its sorted
set's members are the leases (slot names the instance draws, one per check,
shared by all the check's CONCURRENCY rules), each scored by when it frees
itself, one window after it was taken. Expired leases are removed before
the set is counted; an admitted check adds its lease, a refused one adds
nothing; a release (of a reservation, or releaseLease through this mode
with a spec whose numbers are not read) removes the lease, replying
RELEASE_RESTORED when it was still live. The set's TTL is the longest
window of the leases in it, lengthened only, so an idle bucket frees
itself.

Pages. Buckets of every algorithm but the log and the leases live as fields of small hashes,
so that a bucket costs one listpack entry instead of a key of its own (a key
with a TTL costs over 100 bytes; a field about 30). A bucket's state stops
mattering one horizon H after its last write (H depends on the algorithm:
horizon_ms). Time is cut into epochs of H: in epoch e = floor(now / H) page
a is current when e is even, page b when it is odd. A bucket is read from the
current page, else from the other one; it is written to the current page (and
removed from the other, where it stood). A page expires at the start of the
second epoch after the one it was written in, (e + 2) * H (its TTL is set
relative to now: a test's pinned clock may be anywhere), which is when it
becomes current again: so a bucket written in epoch e lives at least H, a
bucket idle for two epochs is gone with its page, and the page pair of an
idle rule frees itself. Only the first write of a bucket in an epoch sets the
page's TTL (HSET says the field is new), and a TTL is only ever lengthened,
never shortened, so a rule whose horizon shrank keeps its older buckets as
long as they matter. Every state says by itself when it stops counting (its
window index, its drain time), so a state read from a page older than its
epoch says nothing wrong: the pages only bound memory, they are not part of
the arithmetic. Steady traffic therefore costs one HGET and one HSET per rule.

Regions. A GLOBAL rule's limit is shared by every region, each deciding on a
Redis of its own. Each region's instances ship its state of a bucket to the
other regions (src/store/regions), where merge.lua keeps it as a copy, field
"<bucket field>@<region>" of the bucket's page pair. A decision reads the
bucket and the copies of the regions its spec names, adds their counts to the
bucket's own (countedElsewhere), and stores the bucket's own counts alone;
the instances read the bucket's state with merge.lua's `state` when they ship
it. A region cut off from the others names none of them: it decides on its
own counts, under a limit the instance has cut to the region's share.

Calendars. A FIXED_WINDOW rule may count per calendar period in a time zone
(a month in Europe/Berlin, say: src/domain/calendar.ts), whose boundaries
need the time zone data only the instance has. The instance sends six
consecutive boundaries b1..b6, its own now lying in [b3, b4); the script
takes the period [bk, bk+1) holding its own now, k = 2, 3 or 4 (a store clock
up to one period behind or ahead of the instance's), bk-1 the previous
period's start and bk+2 the next period's end. The period's start is the
window's index, so the count starts again at the period's true start and
the period's end is the reset; a now outside [b2, b5) is an error (a clock
a whole period off). The state stores the calendar's marker, a negative
number, where a plain window stores its length (see fixed-window.ts); the
spec's window_ms is the longest the period can be, which bounds the page
horizon.

States. A page's bucket is stored as big-endian doubles (struct.pack '>d',
exact for integers below 2^53): FIXED_WINDOW 4 of them (32 bytes),
SLIDING_WINDOW_COUNTER 5 (40 bytes), the meters 4 (32 bytes), in the order of
src/domain/algorithms/types.ts. Packing and unpacking is one C call; parsing
decimal text cost more than the rest of a rule's arithmetic. A big-endian
double of an integer >= 0 never begins with an ASCII digit, so a state written
as decimal text (":"-separated, by versions before this layout) is still read,
and counters carry over an upgrade.

Twins. A function computing what src/domain/algorithms computes bears the
snake_case name of its TypeScript twin; a helper private to a TypeScript
module is prefixed with the module's name.
  Lua                                        TypeScript                     src/domain/algorithms/
  div_floor, div_ceil                        divFloor, divCeil              integer.ts
  admitted, refused                          admitted, refused              types.ts
  evaluate_fixed_window                      evaluateFixedWindow            fixed-window.ts
  fixed_window_frame                         windowFrame                    fixed-window.ts
  fixed_window_roll_forward                  rollForward                    fixed-window.ts
  fixed_window_counted_elsewhere             countedElsewhere               fixed-window.ts
  fixed_window_age                           age                            fixed-window.ts
  fixed_window_usage                         usage (a closure)              fixed-window.ts
  evaluate_sliding_window_counter            evaluateSlidingWindowCounter   sliding-window-counter.ts
  sliding_window_counter_roll_forward        rollForward                    sliding-window-counter.ts
  sliding_window_counter_counted_elsewhere   countedElsewhere               sliding-window-counter.ts
  sliding_window_counter_weight              weight                         sliding-window-counter.ts
  sliding_window_counter_earliest_in_window  earliestInWindow               sliding-window-counter.ts
  sliding_window_counter_age                 age                            sliding-window-counter.ts
  sliding_window_counter_usage               usage (a closure), resetAt     sliding-window-counter.ts
  evaluate_meter                             evaluateMeter (both buckets)   meter.ts
  meter_settle                               settle                         meter.ts
  meter_usage                                usage (a closure)              meter.ts
  evaluate_sliding_window_log                evaluateSlidingWindowLog       sliding-window-log.ts
  evaluate_concurrency                       evaluateConcurrency            concurrency.ts
  concurrency_slot_frees_at                  slotFreesAt                    concurrency.ts
  sliding_window_log_live                    live                           sliding-window-log.ts
  sliding_window_log_usage                   usage (a closure)              sliding-window-log.ts
  the main chunk's `allowed`                 combine                        index.ts
Inlined here: beyondCapacity (refused with the rule's window),
earliestRelease (the loop in evaluate_sliding_window_counter). With no twin, as they handle Redis's
storage: int, decode_state, state_text, horizon_ms, read_bucket,
write_bucket, append_log, hold_lease and the release's functions.

Speed. The hot path allocates little: each rule's record (its verdict
written into it) and the reply are tables kept from call to call and filled
again (rule_record), and there are no closures. A
rule's spec is parsed once and kept (rule_spec): parsing five numbers cost
more than a rule's arithmetic. Redis runs a library's top level without the
standard library, so the locals below that name its functions are bound by
the first call (bind).
]]

local tonumber, floor, max, min, call, pack, unpack_struct, format, match, byte

local function bind()
  tonumber, floor, max, min = _G.tonumber, math.floor, math.max, math.min
  call, pack, unpack_struct = redis.call, struct.pack, struct.unpack
  format, match, byte = string.format, string.match, string.byte
end

-- Every quantity here is an integer below 2^53 (src/domain/algorithms/integer.ts),
-- which '%d' prints exactly, at about half the cost of '%.0f'.
local function int(x)
  return format('%d', x)
end

local function div_floor(a, b)
  local q = floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function div_ceil(a, b)
  local q = div_floor(a, b)
  if q * b < a then return q + 1 end
  return q
end

-- A stored state's first `parts` numbers, or nothing when it has fewer (a
-- state written under another algorithm, say). See "States" above.
local function decode_state(value, parts)
  if not value then return nil end
  local first = byte(value)
  if first and first >= 48 and first <= 57 then
    if parts == 4 then
      local a, b, c, d = match(value, '^([^:]+):([^:]+):([^:]+):([^:]+)')
      if a then return tonumber(a), tonumber(b), tonumber(c), tonumber(d) end
    else
      local a, b, c, d, e = match(value, '^([^:]+):([^:]+):([^:]+):([^:]+):([^:]+)')
      if a then return tonumber(a), tonumber(b), tonumber(c), tonumber(d), tonumber(e) end
    end
    return nil
  end
  if #value < parts * 8 then return nil end
  if parts == 4 then
    local a, b, c, d = unpack_struct('>dddd', value)
    return a, b, c, d
  end
  local a, b, c, d, e = unpack_struct('>ddddd', value)
  return a, b, c, d, e
end

-- A state as the receipts carry it: decimal integers joined by ':'.
local function state_text(value)
  if not value then return '' end
  local first = byte(value)
  if first and first >= 48 and first <= 57 then return value end
  local parts = {}
  for i = 1, floor(#value / 8) do parts[i] = int((unpack_struct('>d', value, (i - 1) * 8 + 1))) end
  return table.concat(parts, ':')
end

-- Each algorithm writes its verdict into the rule's record `r`: conforming,
-- delay, retry (ms, or false when conforming), remaining and reset if admitted,
-- remaining and reset as things stand, and the state to store if admitted.
-- The window counters also say at which index of that state the request's
-- units are counted (current or next), so that a release can find them again.
local function admitted(r, next, delay, if_remaining, if_reset, remaining, reset, counted_at)
  r.conforming, r.delay, r.retry = true, delay, false
  r.if_remaining, r.if_reset, r.remaining, r.reset = if_remaining, if_reset, remaining, reset
  r.next, r.counted_at = next, counted_at or false
end

local function refused(r, retry, remaining, reset)
  r.conforming, r.delay, r.retry = false, 0, retry
  r.if_remaining, r.if_reset, r.remaining, r.reset = remaining, reset, remaining, reset
end

-- A state aged to `window` (an index of the window length it was counted in),
-- `previous` being the index of the window before it.
local function fixed_window_age(stored, current, next, window, previous)
  if stored >= window then return stored, current, next end
  if stored == previous then return window, next, 0 end
  return window, 0, 0
end

-- The fixed window holding now: its index, the indexes of the windows before
-- and after it, where it and the next end, and the length its states carry
-- (a calendar's marker: see "Calendars").
local function fixed_window_frame(r, now)
  local periods = r.periods
  if not periods then
    local window_ms = r.window_ms
    local window = floor(now / window_ms)
    return window, window - 1, window + 1, (window + 1) * window_ms, (window + 2) * window_ms, window_ms
  end
  for k = 2, 4 do
    if periods[k] <= now and now < periods[k + 1] then
      return periods[k], periods[k - 1], periods[k + 1], periods[k + 1], periods[k + 2], r.marker
    end
  end
  return error('decide: no calendar period of the spec holds now (' .. int(now) .. ')')
end

-- What a fixed window leaves with `curr` counted in the window ending at
-- `window_end` and `queued` in the next, and when it is empty again. This and
-- the other usage functions take their inputs as arguments rather than
-- closing over the algorithm's locals: a closure is an allocation per call.
local function fixed_window_usage(limit, window_end, next_end, now, curr, queued)
  local reset = now
  if queued > 0 then
    reset = next_end
  elseif curr > 0 then
    reset = window_end
  end
  return max(0, limit - curr - queued), reset
end

-- A stored state (nil: none) aged to now in the window `window` (the one
-- before it `previous`, its states' length `length`); one counted under
-- another window or calendar carries its counts over into this window, aged
-- first under its own window when that is a plain length.
local function fixed_window_roll_forward(value, now, window, previous, length)
  local s1, s2, s3, s4 = decode_state(value, 4)
  if not s1 then return window, 0, 0 end
  if s4 == length then return fixed_window_age(s1, s2, s3, window, previous) end
  if s4 < 0 then return window, s2 + s3, 0 end
  local theirs = floor(now / s4)
  local _, curr, queued = fixed_window_age(s1, s2, s3, theirs, theirs - 1)
  return window, curr + queued, 0
end

-- What other regions count in this window and the next: each state aged to
-- now; a region whose clock has moved on to the next window counts its
-- current window in our next.
local function fixed_window_counted_elsewhere(elsewhere, now, window, previous, following, length)
  local current, next = 0, 0
  for i = 1, #elsewhere do
    local theirs, curr, queued = fixed_window_roll_forward(elsewhere[i], now, window, previous, length)
    if theirs == window then
      current, next = current + curr, next + queued
    elseif theirs == following then
      next = next + curr
    end
  end
  return current, next
end

local function evaluate_fixed_window(r, value, now, cost)
  local limit = r.limit
  local index, previous, following, window_end, next_end, length = fixed_window_frame(r, now)
  local window, local_current, local_next = fixed_window_roll_forward(value, now, index, previous, length)
  if window ~= index then
    -- The state was counted in a window after now's (Redis's clock went back):
    -- its counts stay there, and the request is decided in that window.
    local start = window
    if not r.periods then start = window * r.window_ms end
    index, previous, following, window_end, next_end = fixed_window_frame(r, start)
  end
  local current, next = local_current, local_next
  if r.elsewhere then
    local other_current, other_next = fixed_window_counted_elsewhere(r.elsewhere, now, index, previous, following, length)
    current, next = current + other_current, next + other_next
  end
  local remaining, reset = fixed_window_usage(limit, window_end, next_end, now, current, next)
  if cost > limit then return refused(r, r.window_ms, remaining, reset) end
  if current + cost <= limit then
    local if_remaining, if_reset = fixed_window_usage(limit, window_end, next_end, now, current + cost, next)
    return admitted(r, pack('>dddd', window, local_current + cost, local_next, length), 0, if_remaining, if_reset, remaining, reset, 2)
  end
  local throttle = r.action == ACTION_THROTTLE
  if throttle and next + cost <= limit then
    local if_remaining, if_reset = fixed_window_usage(limit, window_end, next_end, now, current, next + cost)
    return admitted(r, pack('>dddd', window, local_current, local_next + cost, length), window_end - now, if_remaining, if_reset, remaining, reset, 3)
  end
  local wait_until = next_end
  if throttle or next + cost <= limit then wait_until = window_end end
  return refused(r, wait_until - now, remaining, reset)
end

local function sliding_window_counter_weight(elapsed, window_ms)
  return div_ceil((window_ms - elapsed) * WEIGHT_ONE, window_ms)
end

-- The earliest elapsed time >= from, within one window, at which
-- prev * weight + (curr + cost) fits the limit; nil when none does.
-- `from_weight` is the weight at `from`, which the caller has.
local function sliding_window_counter_earliest_in_window(prev, curr, from, from_weight, window_ms, limit, cost)
  local room = (limit - cost - curr) * WEIGHT_ONE
  if room < 0 then return nil end
  if prev * from_weight <= room then return from end
  local k = div_floor(room, prev)
  local at = window_ms - div_floor(k * window_ms, WEIGHT_ONE)
  if at < window_ms then return max(at, from) end
  return nil
end

local function sliding_window_counter_age(stored, previous, current, next, window)
  if stored >= window then return stored, previous, current, next end
  if stored == window - 1 then return window, current, next, 0 end
  if stored == window - 2 then return window, next, 0, 0 end
  return window, 0, 0, 0
end

-- What a sliding window counter leaves, `carried` being what its previous
-- window's `prev` units still count, and when it is empty again.
local function sliding_window_counter_usage(limit, window, window_ms, now, carried, prev, curr, queued)
  local remaining = max(0, limit - curr - queued - carried)
  local reset = now
  if queued > 0 then
    reset = (window + 3) * window_ms
  elseif curr > 0 then
    reset = (window + 2) * window_ms
  elseif prev > 0 then
    reset = (window + 1) * window_ms
  end
  return remaining, reset
end

-- A stored state (nil: none) aged to now under the window it was counted in;
-- after a window change its counts carry over into the current window.
local function sliding_window_counter_roll_forward(value, now, window_ms)
  local window = floor(now / window_ms)
  local s1, s2, s3, s4, s5 = decode_state(value, 5)
  if not s1 then return window, 0, 0, 0 end
  local aged, prev, curr, queued = sliding_window_counter_age(s1, s2, s3, s4, floor(now / s5))
  if s5 ~= window_ms then return window, 0, prev + curr + queued, 0 end
  return aged, prev, curr, queued
end

-- What other regions count in the previous window, this one and the next: each
-- state aged to now; a region whose clock has moved on to the next window
-- counts its previous window in our current and its current in our next.
local function sliding_window_counter_counted_elsewhere(elsewhere, window, now, window_ms)
  local previous, current, next = 0, 0, 0
  for i = 1, #elsewhere do
    local theirs, prev, curr, queued = sliding_window_counter_roll_forward(elsewhere[i], now, window_ms)
    if theirs == window then
      previous, current, next = previous + prev, current + curr, next + queued
    elseif theirs == window + 1 then
      current, next = current + prev, next + curr
    end
  end
  return previous, current, next
end

local function evaluate_sliding_window_counter(r, value, now, cost)
  local limit, window_ms = r.limit, r.window_ms
  local window, local_previous, local_current, local_next = sliding_window_counter_roll_forward(value, now, window_ms)
  local previous, current, next = local_previous, local_current, local_next
  if r.elsewhere then
    local other_previous, other_current, other_next = sliding_window_counter_counted_elsewhere(r.elsewhere, window, now, window_ms)
    previous, current, next = previous + other_previous, current + other_current, next + other_next
  end
  local elapsed = max(0, now - window * window_ms)
  local weight = sliding_window_counter_weight(elapsed, window_ms)
  -- A request never counts in the previous window: what it carries is the
  -- same before and after.
  local carried = div_ceil(previous * weight, WEIGHT_ONE)
  local remaining, reset = sliding_window_counter_usage(limit, window, window_ms, now, carried, previous, current, next)
  if cost > limit then return refused(r, window_ms, remaining, reset) end

  -- The earliest release: in this window, else the next, else the one after
  -- (each seen from its start, where the previous window weighs WEIGHT_ONE, with
  -- the counts it will have then).
  local throttle = r.action == ACTION_THROTTLE
  local release, windows_ahead = (window + 3) * window_ms, 3
  local first = 1
  if throttle and next > 0 then first = 2 end
  for ahead = first, 3 do
    local prev, curr, from, from_weight = previous, current, elapsed, weight
    if ahead == 2 then
      prev, curr, from, from_weight = current, next, 0, WEIGHT_ONE
    elseif ahead == 3 then
      prev, curr, from, from_weight = next, 0, 0, WEIGHT_ONE
    end
    local at = sliding_window_counter_earliest_in_window(prev, curr, from, from_weight, window_ms, limit, cost)
    if at then
      release, windows_ahead = (window + ahead - 1) * window_ms + at, ahead - 1
      break
    end
  end
  local wait = release - now
  local in_this_window = true
  if not throttle then
    if wait > 0 then return refused(r, wait, remaining, reset) end
  else
    if wait > window_ms then return refused(r, wait - window_ms, remaining, reset) end
    in_this_window = windows_ahead == 0
  end
  local curr, queued, counted_at, stored = current + cost, next, 3, nil
  if in_this_window then
    stored = pack('>ddddd', window, local_previous, local_current + cost, local_next, window_ms)
  else
    curr, queued, counted_at = current, next + cost, 4
    stored = pack('>ddddd', window, local_previous, local_current, local_next + cost, window_ms)
  end
  local if_remaining, if_reset = sliding_window_counter_usage(limit, window, window_ms, now, carried, previous, curr, queued)
  return admitted(r, stored, wait, if_remaining, if_reset, remaining, reset, counted_at)
end

-- TOKEN_BUCKET and LEAKY_BUCKET: a debt, in 1/window_ms token units, draining
-- at `limit` units per ms, forgotten once drained under the rule it was
-- taken under (see src/domain/algorithms/meter.ts).

-- The debt at `now`, and the time the stored state counts from, for a state
-- (owed, since, window_ms, drained at) or none (s1 nil).
local function meter_settle(s1, s2, s3, s4, now, limit, window_ms)
  local debt, since = 0, now
  if s1 then
    since = max(now, s2)
    if now < s4 then
      debt = s1
      if s3 ~= window_ms then debt = math.ceil((s1 / s3) * window_ms) end
      local elapsed = now - s2
      if elapsed > 0 then
        if elapsed >= div_ceil(debt, limit) then debt = 0 else debt = debt - elapsed * limit end
      end
    end
  end
  return debt, since
end

local function meter_state(owed, since, limit, window_ms)
  return pack('>dddd', owed, since, window_ms, since + div_ceil(owed, limit))
end

-- What a meter of `full` units leaves owing `owed`, and when it is drained.
local function meter_usage(full, limit, window_ms, now, owed)
  return div_floor(max(0, full - owed), window_ms), now + div_ceil(owed, limit)
end

local function evaluate_meter(r, value, now, cost, leaky)
  local limit, window_ms, capacity = r.limit, r.window_ms, r.capacity
  local s1, s2, s3, s4 = decode_state(value, 4)
  local debt, since = meter_settle(s1, s2, s3, s4, now, limit, window_ms)
  local full = capacity * window_ms
  local remaining, reset = meter_usage(full, limit, window_ms, now, debt)
  if cost > capacity then return refused(r, window_ms, remaining, reset) end
  local throttle = r.action == ACTION_THROTTLE
  local line = 0
  if throttle and not leaky then line = limit * window_ms end
  local owed = debt + cost * window_ms
  if owed > full + line then return refused(r, div_ceil(owed - full - line, limit), remaining, reset) end
  local delay = 0
  if throttle then
    if leaky then delay = div_ceil(debt, limit) else delay = div_ceil(max(0, owed - full), limit) end
  end
  local if_remaining, if_reset = meter_usage(full, limit, window_ms, now, owed)
  return admitted(r, meter_state(owed, since, limit, window_ms), delay, if_remaining, if_reset, remaining, reset)
end

-- The index of the log's first entry released after `cutoff` (the list is
-- sorted): one LINDEX in the usual case, a binary search over a dead prefix.
local function sliding_window_log_live(key, cutoff, length)
  if length == 0 or tonumber(call('LINDEX', key, 0)) > cutoff then return 0 end
  local lo, hi = 1, length
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if tonumber(call('LINDEX', key, mid)) > cutoff then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- What a log leaves holding `n` entries, the newest released at `newest`,
-- and when it is empty again.
local function sliding_window_log_usage(limit, window_ms, now, n, newest)
  if n > 0 then return max(0, limit - n), newest + window_ms end
  return limit, now
end

-- SLIDING_WINDOW_LOG reads its list directly and changes nothing; entries
-- that have left the window are dropped by the call that appends.
local function evaluate_sliding_window_log(r, now, cost)
  local key, limit, window_ms = r.key, r.limit, r.window_ms
  local length = call('LLEN', key)
  local first = sliding_window_log_live(key, now - window_ms, length)
  local count = length - first
  r.dead = first
  local last = nil
  if count > 0 then last = tonumber(call('LINDEX', key, -1)) end
  local remaining, reset = sliding_window_log_usage(limit, window_ms, now, count, last)
  if cost > limit then return refused(r, window_ms, remaining, reset) end
  local throttle = r.action == ACTION_THROTTLE
  local must_leave = count + cost - limit
  local not_before = now
  if throttle and last then not_before = max(now, last) end
  local release = not_before
  if must_leave > 0 then
    release = max(not_before, tonumber(call('LINDEX', key, first + must_leave - 1)) + window_ms)
  end
  local wait = release - now
  local allowed_wait = 0
  if throttle then allowed_wait = window_ms end
  if wait > allowed_wait then return refused(r, wait - allowed_wait, remaining, reset) end
  -- Units queued by an earlier THROTTLE may lie ahead of now: never record a
  -- unit before them, so the log stays sorted.
  local stamp = release
  if last then stamp = max(release, last) end
  local if_remaining, if_reset = sliding_window_log_usage(limit, window_ms, now, count + cost, stamp)
  return admitted(r, stamp, wait, if_remaining, if_reset, remaining, reset)
end

local function append_log(key, dead, release, cost, now, window_ms)
  if dead > 0 then call('LTRIM', key, dead, -1) end
  local chunk = {}
  local stamp = int(release)
  local left = cost
  while left > 0 do
    local n = min(left, 1000)
    for i = 1, n do chunk[i] = stamp end
    for i = n + 1, #chunk do chunk[i] = nil end
    call('RPUSH', key, unpack(chunk))
    left = left - n
  end
  call('PEXPIRE', key, int(release + window_ms - now))
end

-- When one slot more is free by expiries alone: the soonest lease's expiry,
-- or for a full bucket the expiry of its (live - limit + 1)th soonest.
local function concurrency_slot_frees_at(key, live, limit)
  local index = max(0, live - limit)
  local at = call('ZRANGE', key, index, index, 'WITHSCORES')
  return tonumber(at[2])
end

-- CONCURRENCY (see "Leases" above): one slot per check, whatever its cost.
local function evaluate_concurrency(r, now)
  local key, limit = r.key, r.limit
  call('ZREMRANGEBYSCORE', key, '-inf', int(now))
  local live = call('ZCARD', key)
  if live >= limit then
    local frees = concurrency_slot_frees_at(key, live, limit)
    return refused(r, frees - now, 0, frees)
  end
  local expires = now + r.window_ms
  local reset, if_reset = now, expires
  if live > 0 then
    reset = concurrency_slot_frees_at(key, live, limit)
    if_reset = min(expires, reset)
  end
  return admitted(r, expires, 0, limit - live - 1, if_reset, limit - live, reset)
end

local function hold_lease(key, lease, expires, now)
  call('ZADD', key, int(expires), lease)
  local ttl = int(expires - now)
  call('PEXPIRE', key, ttl, 'NX')
  call('PEXPIRE', key, ttl, 'GT')
end

local function horizon_ms(algorithm, limit, window_ms, capacity)
  if algorithm == ALGO_FIXED_WINDOW then return 2 * window_ms end
  if algorithm == ALGO_SLIDING_WINDOW_COUNTER then return 3 * window_ms end
  if algorithm == ALGO_SLIDING_WINDOW_LOG or algorithm == ALGO_CONCURRENCY then return window_ms end
  return div_ceil((capacity + limit) * window_ms, limit)
end

-- Rule specs as parsed, by their text. What a rule asks never changes under
-- its text, so a spec parsed once serves every later call; the table is
-- emptied when it grows past any real number of rule versions in use, so
-- that it stays small whatever callers send.
local specs, spec_count = {}, 0
local most_specs = 10000

local function rule_spec(text)
  local spec = specs[text]
  if spec then return spec end
  local algorithm, limit, window_ms, capacity, action, rest = match(text, '^(%d+):(%d+):(%d+):(%d+):(%d+)(.*)$')
  local marker, boundaries, after_calendar = match(rest or '', '^:C:(%-%d+):([%d,]+)(.*)$')
  if marker then rest = after_calendar end
  local regions = match(rest or '', '^:G:([%w_,-]*)$')
  if not algorithm or (rest ~= '' and not regions) then return error('decide: malformed rule spec "' .. text .. '"') end
  local periods = false
  if marker then
    periods = {}
    for boundary in string.gmatch(boundaries, '%d+') do periods[#periods + 1] = tonumber(boundary) end
    if #periods ~= 6 then return error('decide: a calendar spec needs 6 period boundaries: "' .. text .. '"') end
    marker = tonumber(marker)
  end
  algorithm, limit, window_ms, capacity, action = tonumber(algorithm), tonumber(limit), tonumber(window_ms), tonumber(capacity), tonumber(action)
  local peers = false
  if regions then
    peers = {}
    for region in string.gmatch(regions, '[^,]+') do peers[#peers + 1] = '@' .. region end
  end
  spec = { algorithm = algorithm, limit = limit, window_ms = window_ms, capacity = capacity, action = action,
           horizon = horizon_ms(algorithm, limit, window_ms, capacity), peers = peers, periods = periods, marker = marker or false }
  if spec_count >= most_specs then specs, spec_count = {}, 0 end
  specs[text], spec_count = spec, spec_count + 1
  return spec
end

-- A GLOBAL rule's bucket (see "Regions" above): its own value, and into
-- r.elsewhere the copies other regions' states sent here, each from the page it
-- is in; both pages are read whole, in one HMGET each.
local function read_bucket_and_copies(r)
  local fields = { r.field }
  for i = 1, #r.peers do fields[i + 1] = r.field .. r.peers[i] end
  local current = call('HMGET', r.current, unpack(fields))
  local other = call('HMGET', r.other, unpack(fields))
  local value = current[1]
  if value then
    r.found = r.current
  elseif other[1] then
    value, r.found = other[1], r.other
  end
  local elsewhere = {}
  for i = 2, #fields do
    local copy = current[i] or other[i]
    if copy then elsewhere[#elsewhere + 1] = copy end
  end
  r.elsewhere = elsewhere
  r.previous = value or false
  return value
end

-- Reads a page's bucket into its record (see "Pages" above): which page is
-- current, where the bucket was found and its value there.
local function read_bucket(r, now)
  local horizon = r.horizon
  local epoch = floor(now / horizon)
  if epoch % 2 == 0 then r.current, r.other = r.page_a, r.page_b else r.current, r.other = r.page_b, r.page_a end
  r.expires = (epoch + 2) * horizon
  if r.peers and #r.peers > 0 then return read_bucket_and_copies(r) end
  local value = call('HGET', r.current, r.field)
  if value then
    r.found = r.current
  else
    value = call('HGET', r.other, r.field)
    if value then r.found = r.other end
  end
  r.previous = value or false
  return value
end

-- The page's TTL is set relative to `now`, not as an absolute time: `now`
-- is Redis TIME in service, but a test's pinned clock may be anywhere.
local function write_bucket(r, value, now)
  local page = r.current
  if call('HSET', page, r.field, value) == 1 then
    -- The bucket's first write in this page this epoch: give the page its
    -- TTL if it has none, else lengthen it if it is shorter.
    local ttl = int(r.expires - now)
    call('PEXPIRE', page, ttl, 'NX')
    call('PEXPIRE', page, ttl, 'GT')
    if r.found == r.other then call('HDEL', r.other, r.field) end
  end
end

-- Release: the units a reservation took, given back (see the header).

local function parse_state(text)
  if text == '' then return nil end
  local state = {}
  for part in string.gmatch(text, '[^:]+') do state[#state + 1] = tonumber(part) end
  return state
end

local function pack_state(state)
  return pack('>' .. string.rep('d', #state), unpack(state))
end

-- A window counter's units, counted at index `counted_at` of the state the
-- reservation wrote, are one index lower for every window the state has moved
-- on since; below the first count they no longer count at all. A calendar's
-- index is its period's start in ms, so a state that has moved on to another
-- period gives nothing back: an over-count, never an over-admission.
local function give_back_count(state, taken, counted_at, cost)
  if not state or #state ~= #taken or state[#state] ~= taken[#taken] then return nil end
  local index = counted_at - (state[1] - taken[1])
  if index < 2 or index > #state - 1 then return nil end
  state[index] = max(0, state[index] - cost)
  return pack_state(state)
end

-- A meter's debt drains from the front: what is left of the reservation is
-- its units minus what has drained since beyond the debt ahead of it.
local function give_back_debt(state, taken, cost, now, r)
  local limit, window_ms = r.limit, r.window_ms
  if not state or #state < 4 or state[3] ~= window_ms or taken[3] ~= window_ms then return nil end
  local debt, since = meter_settle(state[1], state[2], state[3], state[4], now, limit, window_ms)
  local units = cost * window_ms
  local ahead = taken[1] - units
  local drained = max(0, now - taken[2]) * limit
  local left = min(units, max(0, ahead + units - drained))
  if left == 0 then return nil end
  return meter_state(max(0, debt - left), since, limit, window_ms)
end

-- A log's entries that left the window are dropped by the call that appends;
-- a reservation records them as runs ("stamp*count,..."), so that a release
-- can put them back: a later, longer window would count them again.
local function dead_runs(key, dead)
  if dead == 0 then return '' end
  local runs = {}
  local stamp, count = nil, 0
  for _, entry in ipairs(call('LRANGE', key, 0, dead - 1)) do
    if entry ~= stamp then
      if stamp then runs[#runs + 1] = stamp .. '*' .. count end
      stamp, count = entry, 0
    end
    count = count + 1
  end
  runs[#runs + 1] = stamp .. '*' .. count
  return table.concat(runs, ',')
end

local function restore_dead(key, runs, window_ms)
  local entries = {}
  for stamp, count in string.gmatch(runs, '(%d+)%*(%d+)') do
    for _ = 1, tonumber(count) do entries[#entries + 1] = stamp end
  end
  -- LPUSH puts each value in front of the previous one: push newest first.
  local i = #entries
  while i > 0 do
    local chunk = {}
    for j = i, max(1, i - 999), -1 do chunk[#chunk + 1] = entries[j] end
    call('LPUSH', key, unpack(chunk))
    i = i - #chunk
  end
  if call('PTTL', key) < 0 then call('PEXPIRE', key, window_ms) end
end

local function release(r, receipt, now, cost)
  if receipt == '' then return RELEASE_NOTHING_LEFT end
  if r.algorithm == ALGO_CONCURRENCY then
    call('ZREMRANGEBYSCORE', r.key, '-inf', int(now))
    if call('ZREM', r.key, receipt) == 1 then return RELEASE_RESTORED end
    return RELEASE_NOTHING_LEFT
  end
  if r.algorithm == ALGO_SLIDING_WINDOW_LOG then
    local stamp, runs = match(receipt, '^([^/]*)/(.*)$')
    local removed = call('LREM', r.key, -cost, stamp)
    if runs ~= '' then restore_dead(r.key, runs, r.window_ms) end
    if removed > 0 then return RELEASE_RESTORED end
    return RELEASE_NOTHING_LEFT
  end
  local written, previous, counted_at = match(receipt, '^([^/]*)/([^/]*)/(%d*)$')
  local value = read_bucket(r, now)
  if not value then return RELEASE_NOTHING_LEFT end
  local stored = state_text(value)
  if stored == written then
    if previous == '' then call('HDEL', r.found, r.field) else call('HSET', r.found, r.field, pack_state(parse_state(previous))) end
    return RELEASE_RESTORED
  end
  local given
  if r.algorithm == ALGO_SLIDING_WINDOW_COUNTER or r.algorithm == ALGO_FIXED_WINDOW then
    given = give_back_count(parse_state(stored), parse_state(written), tonumber(counted_at), cost)
  else
    given = give_back_debt(parse_state(stored), parse_state(written), cost, now, r)
  end
  if not given then return RELEASE_NOTHING_LEFT end
  call('HSET', r.found, r.field, given)
  return RELEASE_SUBTRACTED
end

-- The rules' records, kept from call to call: records[i] is the i-th rule's
-- in every call, and rule_record sets every field of it again before the
-- call reads any, so nothing of one call reaches the next. A record built
-- afresh per rule per call (its fields inserted one by one into a new
-- table) cost about a tenth of a check. No field is ever set to nil: a key
-- whose value is nil may be dropped by the collector, and setting it again
-- would grow the table anew.
local records = {}

local function rule_record(i, spec, field)
  local r = records[i]
  if not r then
    r = {}
    records[i] = r
  end
  r.algorithm, r.limit, r.window_ms, r.capacity, r.action, r.horizon = spec.algorithm, spec.limit, spec.window_ms, spec.capacity, spec.action, spec.horizon
  r.peers, r.periods, r.marker, r.elsewhere = spec.peers, spec.periods, spec.marker, false
  r.field, r.key, r.page_a, r.page_b, r.current, r.other, r.found = field, false, false, false, false, false, false
  r.previous, r.expires, r.dead, r.conforming, r.delay, r.retry = false, 0, 0, false, 0, false
  r.if_remaining, r.if_reset, r.remaining, r.reset, r.next, r.counted_at = 0, 0, 0, 0, false, false
  return r
end

-- The reply of a decision or a reservation, kept from call to call like the
-- records and ended by a nil after its last value (Redis reads a reply's
-- array up to its first nil), so that its array is not grown anew each call.
local reply = {}

local function decide(keys, args)
  if not call then bind() end
  local now
  if args[1] ~= '' then
    now = tonumber(args[1])
  else
    local time = call('TIME')
    now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
  end
  local cost = tonumber(args[2])
  local mode = tonumber(args[3])
  local count = tonumber(args[4])

  local rules = records
  local key_index = 1
  for i = 1, count do
    local r = rule_record(i, rule_spec(args[3 + 2 * i]), args[4 + 2 * i])
    if r.algorithm == ALGO_SLIDING_WINDOW_LOG or r.algorithm == ALGO_CONCURRENCY then
      r.key = keys[key_index]
      key_index = key_index + 1
    else
      r.page_a, r.page_b = keys[key_index], keys[key_index + 1]
      key_index = key_index + 2
    end
  end

  if bit.band(mode, MODE_RELEASE) ~= 0 then
    local outcomes = { now }
    for i = 1, count do outcomes[i + 1] = release(rules[i], args[4 + count * 2 + i], now, cost) end
    return outcomes
  end

  local allowed = true
  for i = 1, count do
    local r = rules[i]
    local algorithm = r.algorithm
    if algorithm == ALGO_SLIDING_WINDOW_LOG then
      evaluate_sliding_window_log(r, now, cost)
    elseif algorithm == ALGO_CONCURRENCY then
      evaluate_concurrency(r, now)
    elseif algorithm == ALGO_SLIDING_WINDOW_COUNTER then
      evaluate_sliding_window_counter(r, read_bucket(r, now), now, cost)
    elseif algorithm == ALGO_FIXED_WINDOW then
      evaluate_fixed_window(r, read_bucket(r, now), now, cost)
    else
      evaluate_meter(r, read_bucket(r, now), now, cost, algorithm == ALGO_LEAKY_BUCKET)
    end
    if not r.conforming and r.action ~= ACTION_LOG_ONLY then allowed = false end
  end

  local writes = bit.band(mode, MODE_DRY_RUN) == 0
  local reserving = bit.band(mode, MODE_RESERVE) ~= 0
  reply[1], reply[2] = now, 0
  if allowed then reply[2] = 1 end
  for i = 1, count do
    local r = rules[i]
    local counted = allowed and r.conforming
    local receipt = ''
    if counted and writes then
      if r.algorithm == ALGO_SLIDING_WINDOW_LOG then
        if reserving then receipt = int(r.next) .. '/' .. dead_runs(r.key, r.dead) end
        append_log(r.key, r.dead, r.next, cost, now, r.window_ms)
      elseif r.algorithm == ALGO_CONCURRENCY then
        hold_lease(r.key, r.field, r.next, now)
        if reserving then receipt = r.field end
      else
        write_bucket(r, r.next, now)
        if reserving then receipt = state_text(r.next) .. '/' .. state_text(r.previous) .. '/' .. (r.counted_at or '') end
      end
    end
    local conforming = 0
    if r.conforming then conforming = 1 end
    local retry = r.retry or -1
    if reserving then
      local base = 2 + (i - 1) * 7
      reply[base + 1] = conforming
      reply[base + 2] = r.if_remaining
      reply[base + 3] = r.if_reset
      reply[base + 4] = retry
      reply[base + 5] = r.delay
      reply[base + 6] = r.remaining
      reply[base + 7] = r.reset
      reply[2 + count * 7 + i] = receipt
    else
      local base = 2 + (i - 1) * 5
      reply[base + 1] = conforming
      if counted then
        reply[base + 2] = r.if_remaining
        reply[base + 3] = r.if_reset
        reply[base + 4] = retry
        reply[base + 5] = r.delay
      else
        reply[base + 2] = r.remaining
        reply[base + 3] = r.reset
        reply[base + 4] = retry
        reply[base + 5] = 0
      end
    end
  end
  if reserving then reply[2 + count * 8 + 1] = nil else reply[2 + count * 5 + 1] = nil end
  return reply
end
