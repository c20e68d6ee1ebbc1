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
args   [1] the head, "<cost>:<mode>", or "<cost>:<mode>:<now>" to pin the clock
           (tests do; without it the script reads Redis TIME):
             cost  units the request takes from every rule
             mode  a sum of MODE_ flags:
               MODE_DECIDE                   decide, and count the request if allowed
               MODE_DRY_RUN                  decide, count nothing
               MODE_RESERVE                  reserve (see above)
               MODE_RESERVE + MODE_DRY_RUN   reserve, take nothing
               MODE_RELEASE                  give back what the receipts took
             now   in ms
       then 2 values per rule (N rules: the number of args left, halved):
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
       (N rules: the number of args after the head, divided by three)
Reply  decide (neither MODE_RESERVE nor MODE_RELEASE): one string of
       little-endian doubles (struct.pack '<d...'), cheaper for Redis to send
       than an array of integers, each of which it converts on its own:
         now_ms, allowed (1 or 0),
         then 3 per rule: remaining, reset_at_ms, and the rule's outcome,
         -1 - delay_ms when it conforms (so -1 without a delay), else
         retry_after_ms (> 0)
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

decide_each, registered beside decide, takes several calls of decisions and
dry runs (a batch's checks on one Redis) in one FCALL and decides each as
decide would, in turn: keys, every call's keys in order; args, for each call
the number of its keys, the number of its args, then its args as above.
Reply: { each call's reply, or its error (that call alone fails) }.

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
and counters carry over an upgrade. (Little-endian doubles pack and unpack
a tenth faster, about what a mark telling them from these would cost.)

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
  sliding_window_counter_earliest_in_window  earliestInWindow               sliding-window-counter.ts
  sliding_window_counter_age                 age                            sliding-window-counter.ts
  sliding_window_counter_usage               usage (a closure), resetAt     sliding-window-counter.ts
                                             (as it stands and if admitted)
  evaluate_meter                             evaluateMeter (both buckets)   meter.ts
  meter_settle                               settle                         meter.ts
  meter_usage                                usage (a closure)              meter.ts
  evaluate_sliding_window_log                evaluateSlidingWindowLog       sliding-window-log.ts
  evaluate_concurrency                       evaluateConcurrency            concurrency.ts
  concurrency_slot_frees_at                  slotFreesAt                    concurrency.ts
  sliding_window_log_live                    live                           sliding-window-log.ts
  sliding_window_log_usage                   usage (a closure)              sliding-window-log.ts
  the main chunk's `allowed`                 combine                        index.ts
  sliding_window_counter_wait                earliestRelease                sliding-window-counter.ts
Inlined here: beyondCapacity (refused with the rule's window), and in
evaluate_sliding_window_counter weight, the usage of a state of this window
or the last (age) and divCeil (see "Speed"). With no twin, as they handle
Redis's storage: int, decode_state, state_text, horizon_ms, read_bucket,
settle_page, log_entry, evaluate_log_bucket, append_log, hold_lease and the
release's functions.

Speed. Redis runs this Lua in an interpreter where each operation costs
about fifty machine instructions, a table access about a hundred, a call of
a Lua function three to six hundred and a call of a C function (math.floor,
string.byte) three hundred and more (callgrind on Redis 7.0, docs in
BENCHMARKS.md "decide.lua"); a check's Redis time is mostly its redis.calls,
its KEYS and ARGV, its states' struct.pack and unpack and this interpreter.
So the hot path calls few functions: floor(a / b) is (a - a % b) / b, the
same number below 2^53 without a call; the default algorithm's common case
(evaluate_sliding_window_counter) calls no helper but to read its bucket and
to compute its usage (both figures in one call); the
mode's flags are read with arithmetic rather than bit.band. It allocates
little: each rule's record (its verdict written into it) and the reply's
numbers are tables kept from call to call, and there are no closures. A
rule's spec and a call's head are parsed once and kept (rule_spec,
call_head): parsing five numbers cost more than a rule's arithmetic, and so
does turning TIME's seconds into a number, done only when they change
(redis_now). Redis runs a library's top level without the standard library,
so the locals below that name its functions are bound by the first call
(bind).
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

-- floor(a / b) is written (a - a % b) / b throughout: the same number (Lua's
-- % is a - floor(a / b) * b, exact below 2^53), without a call of math.floor.
local function div_floor(a, b)
  local q = (a - a % b) / b
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

-- A GLOBAL rule's bucket (see "Regions" above): its own value, and the
-- copies other regions' states sent here, each from the page it is in; both
-- pages are read whole, in one HMGET each.
local function read_bucket_and_copies(r, peers)
  local fields = { r.field }
  for i = 1, #peers do fields[i + 1] = r.field .. peers[i] end
  local current = call('HMGET', r.current, unpack(fields))
  local other = call('HMGET', r.other, unpack(fields))
  local value, moved = current[1], false
  if not value and other[1] then value, moved = other[1], r.other end
  r.moved = moved
  local elsewhere = {}
  for i = 2, #fields do
    local copy = current[i] or other[i]
    if copy then elsewhere[#elsewhere + 1] = copy end
  end
  r.previous = value or false
  return value, elsewhere
end

-- Reads a page's bucket into its record (see "Pages" above): the page it is
-- written to (current), the other page when it was found there (moved, else
-- false) and its value, which the function returns with, for a GLOBAL rule,
-- the copies of the regions in `peers` (false when none count).
local function read_bucket(r, page_a, page_b, horizon, peers, now)
  local current, other = page_a, page_b
  if ((now - now % horizon) / horizon) % 2 == 1 then current, other = page_b, page_a end
  r.current, r.other = current, other
  if peers then return read_bucket_and_copies(r, peers) end
  local value = call('HGET', current, r.field)
  local moved = false
  if not value then
    value = call('HGET', other, r.field)
    if value then moved = other end
  end
  r.moved, r.previous = moved, value or false
  return value, false
end

-- A bucket's state is written to its current page by HSET, which says
-- whether the field is new there: the bucket's first write in this page this
-- epoch. Then settle_page gives the page its TTL if it has none, else
-- lengthens it if it is shorter, and removes the bucket from the other page
-- where it was found there. The TTL is set relative to `now`, not as an
-- absolute time: `now` is Redis TIME in service, but a test's pinned clock
-- may be anywhere.
local function settle_page(r, horizon, now)
  local ttl = int(((now - now % horizon) / horizon + 2) * horizon - now)
  call('PEXPIRE', r.current, ttl, 'NX')
  call('PEXPIRE', r.current, ttl, 'GT')
  if r.moved then call('HDEL', r.moved, r.field) end
end

-- Each algorithm writes its verdict into the rule's record `r`: its outcome
-- (as the reply carries it: -1 - the delay when the rule conforms, the wait
-- before a retry when it refuses), remaining and reset as things stand, and
-- when it conforms, remaining and reset if admitted and the state to store.
-- The window counters also say at which index of that state the request's
-- units are counted (current or next), so that a release can find them again.
local function admitted(r, next, delay, if_remaining, if_reset, remaining, reset, counted_at)
  r.outcome, r.remaining, r.reset = -1 - delay, remaining, reset
  r.if_remaining, r.if_reset, r.next, r.counted_at = if_remaining, if_reset, next, counted_at or false
end

local function refused(r, retry, remaining, reset)
  r.outcome, r.remaining, r.reset = retry, remaining, reset
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
local function fixed_window_frame(spec, now)
  local periods = spec.periods
  if not periods then
    local window_ms = spec.window_ms
    local window = (now - now % window_ms) / window_ms
    return window, window - 1, window + 1, (window + 1) * window_ms, (window + 2) * window_ms, window_ms
  end
  for k = 2, 4 do
    if periods[k] <= now and now < periods[k + 1] then
      return periods[k], periods[k - 1], periods[k + 1], periods[k + 1], periods[k + 2], spec.marker
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
  local theirs = (now - now % s4) / s4
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

local function evaluate_fixed_window(r, spec, value, elsewhere, now, cost)
  local limit = spec.limit
  local index, previous, following, window_end, next_end, length = fixed_window_frame(spec, now)
  local window, local_current, local_next = fixed_window_roll_forward(value, now, index, previous, length)
  if window ~= index then
    -- The state was counted in a window after now's (Redis's clock went back):
    -- its counts stay there, and the request is decided in that window.
    local start = window
    if not spec.periods then start = window * spec.window_ms end
    index, previous, following, window_end, next_end = fixed_window_frame(spec, start)
  end
  local current, next = local_current, local_next
  if elsewhere then
    local other_current, other_next = fixed_window_counted_elsewhere(elsewhere, now, index, previous, following, length)
    current, next = current + other_current, next + other_next
  end
  local remaining, reset = fixed_window_usage(limit, window_end, next_end, now, current, next)
  if cost > limit then return refused(r, spec.window_ms, remaining, reset) end
  if current + cost <= limit then
    local if_remaining, if_reset = fixed_window_usage(limit, window_end, next_end, now, current + cost, next)
    return admitted(r, pack('>dddd', window, local_current + cost, local_next, length), 0, if_remaining, if_reset, remaining, reset, 2)
  end
  local throttle = spec.action == ACTION_THROTTLE
  if throttle and next + cost <= limit then
    local if_remaining, if_reset = fixed_window_usage(limit, window_end, next_end, now, current, next + cost)
    return admitted(r, pack('>dddd', window, local_current, local_next + cost, length), window_end - now, if_remaining, if_reset, remaining, reset, 3)
  end
  local wait_until = next_end
  if throttle or next + cost <= limit then wait_until = window_end end
  return refused(r, wait_until - now, remaining, reset)
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
-- window's `prev` units still count, and when it is empty again: as it
-- stands, and with `added` units more counted in the current window and
-- `queued` more in the next (a request admitted: both at once, so that a
-- decision calls this once).
local function sliding_window_counter_usage(limit, start, window_ms, now, carried, prev, curr, next, added, queued)
  local remaining = limit - curr - next - carried
  local reset = now
  if next > 0 then
    reset = start + 3 * window_ms
  elseif curr > 0 then
    reset = start + 2 * window_ms
  elseif prev > 0 then
    reset = start + window_ms
  end
  local if_remaining = remaining - added - queued
  local if_reset = reset
  if next + queued > 0 then
    if_reset = start + 3 * window_ms
  elseif curr + added > 0 then
    if_reset = start + 2 * window_ms
  end
  if remaining < 0 then remaining = 0 end
  if if_remaining < 0 then if_remaining = 0 end
  return remaining, reset, if_remaining, if_reset
end

-- A stored state (nil: none) aged to now under the window it was counted in;
-- after a window change its counts carry over into the current window.
local function sliding_window_counter_roll_forward(value, now, window_ms)
  local window = (now - now % window_ms) / window_ms
  local s1, s2, s3, s4, s5 = decode_state(value, 5)
  if not s1 then return window, 0, 0, 0 end
  if s5 == window_ms then return sliding_window_counter_age(s1, s2, s3, s4, window) end
  local _, prev, curr, queued = sliding_window_counter_age(s1, s2, s3, s4, (now - now % s5) / s5)
  return window, 0, prev + curr + queued, 0
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

-- The earliest release (earliestRelease): in this window, else the next, else
-- the one after (each seen from its start, where the previous window weighs
-- WEIGHT_ONE, with the counts it will have then); as the wait from now, and
-- whether it falls in this window.
local function sliding_window_counter_wait(previous, current, next, window, elapsed, weight, window_ms, limit, cost, behind_queue, now)
  local release, windows_ahead = (window + 3) * window_ms, 3
  local first = 1
  if behind_queue then first = 2 end
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
  return release - now, windows_ahead == 0
end

-- SLIDING_WINDOW_COUNTER, the default algorithm, is decided with as few
-- calls of Lua functions as its common case allows (see "Speed"): a state
-- of this window or the one before is aged here, not by roll_forward; the
-- weight and the carried count are div_ceil written out, (a - a % b) / b
-- being floor(a / b) exactly below 2^53; and a request that fits now is
-- admitted without the search for the earliest release, which would find
-- it first. Its bucket is read here, `page_a` and `page_b` being its pages.
local function evaluate_sliding_window_counter(r, spec, page_a, page_b, now, cost)
  local limit, window_ms = spec.limit, spec.window_ms
  local value, elsewhere = read_bucket(r, page_a, page_b, spec.horizon, spec.peers, now)
  local window = (now - now % window_ms) / window_ms
  local local_previous, local_current, local_next = 0, 0, 0
  if value then
    -- A state of 40 bytes is read as doubles here without decode_state's test
    -- for text: its last double must be the window length, an integer whose
    -- last byte is NUL, which decimal text never holds.
    local s1, s2, s3, s4, s5
    if #value == 40 then s1, s2, s3, s4, s5 = unpack_struct('>ddddd', value) end
    if s5 == window_ms and s1 == window then
      local_previous, local_current, local_next = s2, s3, s4
    elseif s5 == window_ms and s1 == window - 1 then
      local_previous, local_current = s3, s4
    else
      window, local_previous, local_current, local_next = sliding_window_counter_roll_forward(value, now, window_ms)
    end
  end
  local previous, current, next = local_previous, local_current, local_next
  if elsewhere then
    local other_previous, other_current, other_next = sliding_window_counter_counted_elsewhere(elsewhere, window, now, window_ms)
    previous, current, next = previous + other_previous, current + other_current, next + other_next
  end
  local start = window * window_ms
  local elapsed = now - start
  if elapsed < 0 then elapsed = 0 end
  local scaled = (window_ms - elapsed) * WEIGHT_ONE
  local weight = (scaled - scaled % window_ms) / window_ms
  if weight * window_ms < scaled then weight = weight + 1 end
  -- A request never counts in the previous window: what it carries is the
  -- same before and after.
  local carried = 0
  if previous > 0 then
    scaled = previous * weight
    carried = (scaled - scaled % WEIGHT_ONE) / WEIGHT_ONE
    if carried * WEIGHT_ONE < scaled then carried = carried + 1 end
  end
  local outcome = -1
  local throttle = spec.action == ACTION_THROTTLE
  local behind_queue = throttle and next > 0
  if cost > limit then
    outcome = window_ms
  elseif carried > limit - cost - current or now < start or behind_queue then
    local wait, in_this_window = sliding_window_counter_wait(previous, current, next, window, elapsed, weight, window_ms, limit, cost, behind_queue, now)
    if not throttle then
      if wait > 0 then outcome = wait end
    elseif wait > window_ms then
      outcome = wait - window_ms
    elseif not in_this_window then
      r.remaining, r.reset, r.if_remaining, r.if_reset = sliding_window_counter_usage(limit, start, window_ms, now, carried, previous, current, next, 0, cost)
      r.outcome, r.counted_at = -1 - wait, 4
      r.next = pack('>ddddd', window, local_previous, local_current, local_next + cost, window_ms)
      return
    else
      outcome = -1 - wait
    end
  end
  r.remaining, r.reset, r.if_remaining, r.if_reset = sliding_window_counter_usage(limit, start, window_ms, now, carried, previous, current, next, cost, 0)
  r.outcome = outcome
  if outcome < 0 then
    r.next, r.counted_at = pack('>ddddd', window, local_previous, local_current + cost, local_next, window_ms), 3
  end
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

local function evaluate_meter(r, spec, value, now, cost, leaky)
  local limit, window_ms, capacity = spec.limit, spec.window_ms, spec.capacity
  local s1, s2, s3, s4 = decode_state(value, 4)
  local debt, since = meter_settle(s1, s2, s3, s4, now, limit, window_ms)
  local full = capacity * window_ms
  local remaining, reset = meter_usage(full, limit, window_ms, now, debt)
  if cost > capacity then return refused(r, window_ms, remaining, reset) end
  local throttle = spec.action == ACTION_THROTTLE
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

-- A log holds only the integers this script writes. One holding anything
-- else (written by another hand) is read as empty, and the next admission
-- trims it away, as a state that cannot be decoded is read as absent
-- (decode_state): read as it is, every check of its bucket would fail until
-- the log expired, which a log written without a TTL never does.
local unreadable_log = {}

local function log_entry(key, index)
  return tonumber(call('LINDEX', key, index)) or error(unreadable_log)
end

-- The index of the log's first entry released after `cutoff` (the list is
-- sorted): one LINDEX in the usual case, a binary search over a dead prefix.
local function sliding_window_log_live(key, cutoff, length)
  if length == 0 or log_entry(key, 0) > cutoff then return 0 end
  local lo, hi = 1, length
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if log_entry(key, mid) > cutoff then hi = mid else lo = mid + 1 end
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
local function evaluate_sliding_window_log(r, spec, now, cost, length)
  local key, limit, window_ms = r.key, spec.limit, spec.window_ms
  local first = sliding_window_log_live(key, now - window_ms, length)
  local count = length - first
  r.dead = first
  local last = nil
  if count > 0 then last = log_entry(key, -1) end
  local remaining, reset = sliding_window_log_usage(limit, window_ms, now, count, last)
  if cost > limit then return refused(r, window_ms, remaining, reset) end
  local throttle = spec.action == ACTION_THROTTLE
  local must_leave = count + cost - limit
  local not_before = now
  if throttle and last then not_before = max(now, last) end
  local release = not_before
  if must_leave > 0 then
    release = max(not_before, log_entry(key, first + must_leave - 1) + window_ms)
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

-- A log bucket: its length, then its entries as evaluate_sliding_window_log
-- reads them, or none when one cannot be read (log_entry).
local function evaluate_log_bucket(r, spec, now, cost)
  local length = call('LLEN', r.key)
  local read, failure = pcall(evaluate_sliding_window_log, r, spec, now, cost, length)
  if read then return end
  if failure ~= unreadable_log then error(failure, 0) end
  evaluate_sliding_window_log(r, spec, now, cost, 0)
  r.dead = length
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
local function evaluate_concurrency(r, spec, now)
  local key, limit = r.key, spec.limit
  call('ZREMRANGEBYSCORE', key, '-inf', int(now))
  local live = call('ZCARD', key)
  if live >= limit then
    local frees = concurrency_slot_frees_at(key, live, limit)
    return refused(r, frees - now, 0, frees)
  end
  local expires = now + spec.window_ms
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
-- that it stays small whatever callers send. `paged` says the bucket lives
-- in a page pair (see "Pages"); `peers` are the regions whose copies count
-- (false for a rule no other region shares, see "Regions").
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
  if regions and regions ~= '' then
    peers = {}
    for region in string.gmatch(regions, '[^,]+') do peers[#peers + 1] = '@' .. region end
  end
  spec = { algorithm = algorithm, limit = limit, window_ms = window_ms, capacity = capacity, action = action,
           horizon = horizon_ms(algorithm, limit, window_ms, capacity), peers = peers, periods = periods, marker = marker or false,
           paged = algorithm ~= ALGO_SLIDING_WINDOW_LOG and algorithm ~= ALGO_CONCURRENCY }
  if spec_count >= most_specs then specs, spec_count = {}, 0 end
  specs[text], spec_count = spec, spec_count + 1
  return spec
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
local function give_back_debt(state, taken, cost, now, spec)
  local limit, window_ms = spec.limit, spec.window_ms
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

-- Gives back what one rule's receipt says its reservation took; `key` is
-- the bucket's log or leases, or page a of its page pair, `page_b` the
-- pair's other page.
local function release(r, spec, key, page_b, receipt, now, cost)
  if receipt == '' then return RELEASE_NOTHING_LEFT end
  local algorithm = spec.algorithm
  if algorithm == ALGO_CONCURRENCY then
    call('ZREMRANGEBYSCORE', key, '-inf', int(now))
    if call('ZREM', key, receipt) == 1 then return RELEASE_RESTORED end
    return RELEASE_NOTHING_LEFT
  end
  if algorithm == ALGO_SLIDING_WINDOW_LOG then
    local stamp, runs = match(receipt, '^([^/]*)/(.*)$')
    local removed = call('LREM', key, -cost, stamp)
    if runs ~= '' then restore_dead(key, runs, spec.window_ms) end
    if removed > 0 then return RELEASE_RESTORED end
    return RELEASE_NOTHING_LEFT
  end
  local written, previous, counted_at = match(receipt, '^([^/]*)/([^/]*)/(%d*)$')
  local value = read_bucket(r, key, page_b, spec.horizon, false, now)
  if not value then return RELEASE_NOTHING_LEFT end
  local stored = state_text(value)
  if stored == written then
    local found = r.moved or r.current
    if previous == '' then call('HDEL', found, r.field) else call('HSET', found, r.field, pack_state(parse_state(previous))) end
    return RELEASE_RESTORED
  end
  local given
  if algorithm == ALGO_SLIDING_WINDOW_COUNTER or algorithm == ALGO_FIXED_WINDOW then
    given = give_back_count(parse_state(stored), parse_state(written), tonumber(counted_at), cost)
  else
    given = give_back_debt(parse_state(stored), parse_state(written), cost, now, spec)
  end
  if not given then return RELEASE_NOTHING_LEFT end
  call('HSET', r.moved or r.current, r.field, given)
  return RELEASE_SUBTRACTED
end

-- A call's head (args[1], "<cost>:<mode>", or "<cost>:<mode>:<now>" with a
-- pinned clock) as parsed: { cost, mode, now or false }. The heads in use are
-- few, so they are kept like the specs and parsed once; one with a pinned
-- clock is a test's and is not kept.
local heads, head_count = {}, 0

local function call_head(text)
  local head = heads[text]
  if head then return head end
  local cost, mode, now = match(text, '^(%d+):(%d+):?(%d*)$')
  if not cost then return error('decide: malformed head "' .. text .. '"') end
  head = { tonumber(cost), tonumber(mode), tonumber(now) or false }
  if head[3] then return head end
  if head_count >= most_specs then heads, head_count = {}, 0 end
  heads[text], head_count = head, head_count + 1
  return head
end

-- Redis's clock in ms. TIME's seconds change once a second and Lua keeps one
-- copy of each string, so the seconds are converted only when they change:
-- turning text into a number is a C library call.
local clock_seconds, clock_seconds_ms = false, 0

local function redis_now()
  local time = call('TIME')
  local seconds = time[1]
  if seconds ~= clock_seconds then clock_seconds, clock_seconds_ms = seconds, tonumber(seconds) * 1000 end
  local micros = tonumber(time[2])
  return clock_seconds_ms + (micros - micros % 1000) / 1000
end

-- The rules' records, kept from call to call: records[i] is the i-th rule's
-- in every call. A record is not emptied between calls: each step of a call
-- writes what a later step of the same call reads (the binding its spec and
-- field, read_bucket its pages, the algorithm its verdict) before that step
-- reads it, so nothing of one call reaches the next. A record built afresh
-- per rule per call (its fields inserted one by one into a new table) cost
-- about a tenth of a check, and refilling every field of it another tenth.
local records = {}

local function record(i)
  local r = records[i]
  if r then return r end
  r = {}
  records[i] = r
  return r
end

-- The reply of a reservation, kept from call to call like the records and
-- ended by a nil after its last value (Redis reads a reply's array up to its
-- first nil), so that its array is not grown anew each call; and the numbers
-- of a decision's reply, packed into one string (see "Reply").
local reply, numbers = {}, {}
local number_formats = {}

local function decision_reply(count)
  local n = 2 + count * 3
  local format_text = number_formats[n]
  if not format_text then
    format_text = '<' .. string.rep('d', n)
    number_formats[n] = format_text
  end
  return pack(format_text, unpack(numbers, 1, n))
end

local function release_all(keys, args, count, now, cost)
  local outcomes = { now }
  local key_index = 1
  for i = 1, count do
    local spec = specs[args[2 * i]] or rule_spec(args[2 * i])
    local r = record(i)
    r.field = args[2 * i + 1]
    outcomes[i + 1] = release(r, spec, keys[key_index], keys[key_index + 1], args[1 + count * 2 + i], now, cost)
    if spec.paged then key_index = key_index + 2 else key_index = key_index + 1 end
  end
  return outcomes
end

-- Decides one call whose keys start after keys[k0] and whose rules' args
-- after args[a0] (its head being args[a0]): 0 and 1 for a call by itself,
-- further on for one of decide_each's. Returns the reply: a decision's
-- numbers packed into one string, or a reservation's array (see "Reply").
local function decide_call(keys, k0, args, a0, count, cost, mode, now)
  local allowed = true
  local key_index = k0 + 1
  for i = 1, count do
    local r = records[i] or record(i)
    local at = a0 + 2 * i - 1
    local spec = specs[args[at]] or rule_spec(args[at])
    r.spec, r.field = spec, args[at + 1]
    local algorithm = spec.algorithm
    if algorithm == ALGO_SLIDING_WINDOW_COUNTER then
      evaluate_sliding_window_counter(r, spec, keys[key_index], keys[key_index + 1], now, cost)
      key_index = key_index + 2
    elseif spec.paged then
      local value, elsewhere = read_bucket(r, keys[key_index], keys[key_index + 1], spec.horizon, spec.peers, now)
      key_index = key_index + 2
      if algorithm == ALGO_FIXED_WINDOW then
        evaluate_fixed_window(r, spec, value, elsewhere, now, cost)
      else
        evaluate_meter(r, spec, value, now, cost, algorithm == ALGO_LEAKY_BUCKET)
      end
    else
      r.key = keys[key_index]
      key_index = key_index + 1
      if algorithm == ALGO_SLIDING_WINDOW_LOG then
        evaluate_log_bucket(r, spec, now, cost)
      else
        evaluate_concurrency(r, spec, now)
      end
    end
    if r.outcome >= 0 and spec.action ~= ACTION_LOG_ONLY then allowed = false end
  end

  local writes = mode % 2 == 0
  local reserving = mode % 4 >= MODE_RESERVE
  for i = 1, count do
    local r = records[i]
    local outcome = r.outcome
    local conforming = outcome < 0
    local counted = allowed and conforming
    local receipt = ''
    if counted and writes then
      local spec = r.spec
      if spec.paged then
        if call('HSET', r.current, r.field, r.next) == 1 then settle_page(r, spec.horizon, now) end
        if reserving then receipt = state_text(r.next) .. '/' .. state_text(r.previous) .. '/' .. (r.counted_at or '') end
      elseif spec.algorithm == ALGO_SLIDING_WINDOW_LOG then
        if reserving then receipt = int(r.next) .. '/' .. dead_runs(r.key, r.dead) end
        append_log(r.key, r.dead, r.next, cost, now, spec.window_ms)
      else
        hold_lease(r.key, r.field, r.next, now)
        if reserving then receipt = r.field end
      end
    end
    if reserving then
      local base = 2 + (i - 1) * 7
      reply[base + 1] = conforming and 1 or 0
      reply[base + 6] = r.remaining
      reply[base + 7] = r.reset
      if conforming then
        reply[base + 2], reply[base + 3], reply[base + 4], reply[base + 5] = r.if_remaining, r.if_reset, -1, -1 - outcome
      else
        reply[base + 2], reply[base + 3], reply[base + 4], reply[base + 5] = r.remaining, r.reset, outcome, 0
      end
      reply[2 + count * 7 + i] = receipt
    else
      local base = (i - 1) * 3
      if counted then
        numbers[base + 3], numbers[base + 4], numbers[base + 5] = r.if_remaining, r.if_reset, outcome
      elseif conforming then
        numbers[base + 3], numbers[base + 4], numbers[base + 5] = r.remaining, r.reset, -1
      else
        numbers[base + 3], numbers[base + 4], numbers[base + 5] = r.remaining, r.reset, outcome
      end
    end
  end
  if not reserving then
    numbers[1], numbers[2] = now, allowed and 1 or 0
    return decision_reply(count)
  end
  reply[1], reply[2] = now, allowed and 1 or 0
  reply[2 + count * 8 + 1] = nil
  return reply
end

local function decide(keys, args)
  if not call then bind() end
  local head = heads[args[1]] or call_head(args[1])
  local cost, mode = head[1], head[2]
  local now = head[3] or redis_now()
  -- The mode's flags (MODE_DRY_RUN 1, MODE_RESERVE 2, MODE_RELEASE 4) read
  -- with arithmetic: bit.band is a call of a C function.
  if mode >= MODE_RELEASE then return release_all(keys, args, (#args - 1) / 3, now, cost) end
  return decide_call(keys, 0, args, 1, (#args - 1) / 2, cost, mode, now)
end

-- Several calls' decisions in one FCALL, each as `decide` would make it by
-- itself and in turn (a batch's checks on one Redis): each call's command
-- and its parsing of the arguments, its reply and Redis's reading of it
-- were about a tenth of a check's work in Redis and most of it in ioredis.
-- keys: every call's keys, in order. args: for each call, the number of its
-- keys, the number of its args, then its args as `decide` takes them
-- (decisions and dry runs only: no reservation, no release). The calls read
-- Redis TIME once, at the first one that does not pin the clock. Replies:
-- each call's, in order, or its error, which fails that call alone; what a
-- call wrote before its error stays written, as it does when `decide` fails.
local each_replies = {}

local function decide_each(keys, args)
  if not call then bind() end
  local n, a0, k0, j = #args, 0, 0, 0
  local clock = false
  while a0 < n do
    local key_count, arg_count = tonumber(args[a0 + 1]), tonumber(args[a0 + 2])
    local head = heads[args[a0 + 3]] or call_head(args[a0 + 3])
    local now = head[3]
    if not now then
      clock = clock or redis_now()
      now = clock
    end
    j = j + 1
    local ok, result = false, 'decide_each: decisions and dry runs only'
    if head[2] < MODE_RESERVE then ok, result = pcall(decide_call, keys, k0, args, a0 + 3, (arg_count - 1) / 2, head[1], head[2], now) end
    if ok then
      each_replies[j] = result
    else
      each_replies[j] = { err = type(result) == 'table' and result.err or tostring(result) }
    end
    k0, a0 = k0 + key_count, a0 + 2 + arg_count
  end
  each_replies[j + 1] = nil
  return each_replies
end
