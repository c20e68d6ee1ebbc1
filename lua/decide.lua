--[[
decide.lua: decides one request against every rule that applies to it, in one
atomic call. The request is allowed only if every enforcing rule conforms; then
each conforming rule counts it. When it is denied, nothing is counted anywhere.
The arithmetic mirrors src/domain/algorithms (same formulas, same rounding); the
conformance and property tests run both against the same cases.

In a Redis Cluster one call can only touch one slot. A request whose rules
live in several slots is decided with the reserve and release modes: every
slot reserves (decides its own rules and takes their units, exactly as a
decision would, and says what it took); when any slot refuses, the request is
denied and every slot that took units releases them. The store combines the
slots' verdicts with the domain's `combine` (src/domain/algorithms/index.ts).

Constants. This file defines no number it shares with TypeScript: the names
in capitals below come from a prelude that decideScript
(src/store/redis/scripts.ts) puts in front of this comment, on its first
line, one `local NAME = n` for each code of src/store/redis/script-codes.ts:
  ALGO_<algorithm>   ALGO_SLIDING_WINDOW_COUNTER, ALGO_TOKEN_BUCKET, ALGO_FIXED_WINDOW,
                     ALGO_SLIDING_WINDOW_LOG, ALGO_LEAKY_BUCKET
  ACTION_<action>    ACTION_REJECT, ACTION_THROTTLE, ACTION_LOG_ONLY
  MODE_<flag>        MODE_DRY_RUN, MODE_RESERVE, MODE_RELEASE (MODE_DECIDE is no flag: 0)
  RELEASE_<outcome>  RELEASE_RESTORED, RELEASE_SUBTRACTED, RELEASE_NOTHING_LEFT
  WEIGHT_ONE         the sliding window counter's weight of one (fixed point)

KEYS   per rule, in the order of the rules in ARGV:
         SLIDING_WINDOW_LOG   1 key:  the bucket's log, a list of release times in ms,
                                      oldest first
         any other algorithm  2 keys: the page pair holding the bucket, two hashes
                                      (see "Pages" below)
ARGV   [1] now in ms, or "" to read Redis TIME (tests pin the clock with it)
       [2] cost, units the request takes from every rule
       [3] mode, a sum of MODE_ flags:
             MODE_DECIDE                   decide, and count the request if allowed
             MODE_DRY_RUN                  decide, count nothing
             MODE_RESERVE                  reserve (see above)
             MODE_RESERVE + MODE_DRY_RUN   reserve, take nothing
             MODE_RELEASE                  give back what the receipts took
       [4] N, the number of rules
       then 6 values per rule:
         algorithm   an ALGO_ code
         limit, window_ms, capacity (burst, or limit where there is none)
         action      an ACTION_ code
         field       the bucket's field in its page ("" for SLIDING_WINDOW_LOG)
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
           then N receipts: "" where nothing was taken, else what release needs }
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

Pages. Buckets of every algorithm but the log live as fields of small hashes,
so that a bucket costs one listpack entry instead of a key of its own (a key
with a TTL costs over 100 bytes; a field about 30). A page pair is two hashes,
a and b. Each holds "_o", when it was opened, and "_u", until when its fields
can matter (every field's state is irrelevant one horizon after its last
write; the horizon depends on the algorithm). Writes go to the most recently
opened page; once that page is a horizon old, and the other page has nothing
that can still matter, the other page is wiped and opened afresh. A field
written to the new page is removed from the old one. So a bucket lives in
exactly one page, dead buckets disappear with their page, and each page's TTL
is its "_u": an idle page pair frees itself.

Twins. A function computing what src/domain/algorithms computes bears the
snake_case name of its TypeScript twin; a helper private to a TypeScript
module is prefixed with the module's name.
  Lua                                        TypeScript                     src/domain/algorithms/
  div_floor, div_ceil                        divFloor, divCeil              integer.ts
  admitted, refused                          admitted, refused              types.ts
  evaluate_fixed_window                      evaluateFixedWindow            fixed-window.ts
  fixed_window_age                           age                            fixed-window.ts
  fixed_window_usage                         usage (a closure)              fixed-window.ts
  evaluate_sliding_window_counter            evaluateSlidingWindowCounter   sliding-window-counter.ts
  sliding_window_counter_weight              weight                         sliding-window-counter.ts
  sliding_window_counter_earliest_in_window  earliestInWindow               sliding-window-counter.ts
  sliding_window_counter_age                 age                            sliding-window-counter.ts
  sliding_window_counter_usage               usage (a closure), resetAt     sliding-window-counter.ts
  evaluate_meter                             evaluateMeter (both buckets)   meter.ts
  meter_settle                               settle                         meter.ts
  meter_usage                                usage (a closure)              meter.ts
  evaluate_sliding_window_log                evaluateSlidingWindowLog       sliding-window-log.ts
  sliding_window_log_live                    live                           sliding-window-log.ts
  sliding_window_log_usage                   usage (a closure)              sliding-window-log.ts
  the main chunk's `allowed`                 combine                        index.ts
Inlined here: beyondCapacity (refused with the rule's window), both
rollForwards (in the evaluate functions), earliestRelease (the loop in
evaluate_sliding_window_counter). With no twin, as they handle Redis's
storage: int, parse_state, read_state, meter_state, horizon_ms, read_pages,
write_page, append_log and the release's functions.
]]

-- Every quantity here is an integer below 2^53 (src/domain/algorithms/integer.ts),
-- which '%d' prints exactly, at about half the cost of '%.0f'.
local function int(x)
  return string.format('%d', x)
end

local function div_floor(a, b)
  local q = math.floor(a / b)
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

local function parse_state(value)
  if not value then return nil end
  local state = {}
  for part in string.gmatch(value, '[^:]+') do state[#state + 1] = tonumber(part) end
  return state
end

-- What an algorithm reads of its stored state: its first 4 or 5 parts (nil
-- when it has fewer), in one match instead of a split. parse_state stays for
-- release, which compares whole states.
local function read_state(value, parts)
  if not value then return nil end
  if parts == 4 then
    local a, b, c, d = string.match(value, '^([^:]+):([^:]+):([^:]+):([^:]+)')
    if a then return { tonumber(a), tonumber(b), tonumber(c), tonumber(d) } end
  else
    local a, b, c, d, e = string.match(value, '^([^:]+):([^:]+):([^:]+):([^:]+):([^:]+)')
    if a then return { tonumber(a), tonumber(b), tonumber(c), tonumber(d), tonumber(e) } end
  end
  return nil
end

-- Each algorithm returns a verdict: conforming, delay, retry (ms or nil),
-- remaining and reset if admitted, remaining and reset as things stand, and
-- the state to store if admitted. The window counters also say at which index
-- of that state the request's units are counted (current or next), so that a
-- release can find them again.
local function admitted(next, delay, if_remaining, if_reset, remaining, reset, counted_at)
  return { conforming = true, delay = delay, retry = nil, if_remaining = if_remaining, if_reset = if_reset,
           remaining = remaining, reset = reset, next = next, counted_at = counted_at }
end

local function refused(retry, remaining, reset)
  return { conforming = false, delay = 0, retry = retry, if_remaining = remaining, if_reset = reset,
           remaining = remaining, reset = reset }
end

-- A state aged to `window` (an index of the window length it was counted in).
local function fixed_window_age(stored, current, next, window)
  if stored >= window then return stored, current, next end
  if stored == window - 1 then return window, next, 0 end
  return window, 0, 0
end

-- What a fixed window leaves with `curr` counted in the window ending at
-- `window_end` and `queued` in the next, and when it is empty again. This and
-- the other usage functions take their inputs as arguments rather than
-- closing over the algorithm's locals: a closure is an allocation per call.
local function fixed_window_usage(limit, window_ms, window_end, now, curr, queued)
  local reset = now
  if queued > 0 then
    reset = window_end + window_ms
  elseif curr > 0 then
    reset = window_end
  end
  return math.max(0, limit - curr - queued), reset
end

local function evaluate_fixed_window(state, now, p, cost)
  local limit, window_ms = p.limit, p.window_ms
  local window, current, next = math.floor(now / window_ms), 0, 0
  if state then
    local aged, curr, queued = fixed_window_age(state[1], state[2], state[3], math.floor(now / state[4]))
    if state[4] ~= window_ms then
      current = curr + queued
    else
      window, current, next = aged, curr, queued
    end
  end
  local window_end = (window + 1) * window_ms
  local remaining, reset = fixed_window_usage(limit, window_ms, window_end, now, current, next)
  if cost > limit then return refused(window_ms, remaining, reset) end
  if current + cost <= limit then
    local if_remaining, if_reset = fixed_window_usage(limit, window_ms, window_end, now, current + cost, next)
    local stored = string.format('%d:%d:%d:%d', window, current + cost, next, window_ms)
    return admitted(stored, 0, if_remaining, if_reset, remaining, reset, 2)
  end
  local throttle = p.action == ACTION_THROTTLE
  if throttle and next + cost <= limit then
    local if_remaining, if_reset = fixed_window_usage(limit, window_ms, window_end, now, current, next + cost)
    local stored = string.format('%d:%d:%d:%d', window, current, next + cost, window_ms)
    return admitted(stored, window_end - now, if_remaining, if_reset, remaining, reset, 3)
  end
  local wait_windows = 1
  if throttle or next + cost <= limit then wait_windows = 0 end
  return refused(window_end + wait_windows * window_ms - now, remaining, reset)
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
  if at < window_ms then return math.max(at, from) end
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
  local remaining = math.max(0, limit - curr - queued - carried)
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

local function evaluate_sliding_window_counter(state, now, p, cost)
  local limit, window_ms = p.limit, p.window_ms
  local window = math.floor(now / window_ms)
  local previous, current, next = 0, 0, 0
  if state then
    local aged, prev, curr, queued = sliding_window_counter_age(state[1], state[2], state[3], state[4], math.floor(now / state[5]))
    if state[5] ~= window_ms then
      current = prev + curr + queued
    else
      window, previous, current, next = aged, prev, curr, queued
    end
  end
  local elapsed = math.max(0, now - window * window_ms)
  local weight = sliding_window_counter_weight(elapsed, window_ms)
  -- A request never counts in the previous window: what it carries is the
  -- same before and after.
  local carried = div_ceil(previous * weight, WEIGHT_ONE)
  local remaining, reset = sliding_window_counter_usage(limit, window, window_ms, now, carried, previous, current, next)
  if cost > limit then return refused(window_ms, remaining, reset) end

  -- The earliest release: in this window, else the next, else the one after
  -- (each seen from its start, where the previous window weighs WEIGHT_ONE, with
  -- the counts it will have then).
  local throttle = p.action == ACTION_THROTTLE
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
  local curr, queued, counted_at = current, next, 3
  if not throttle then
    if wait > 0 then return refused(wait, remaining, reset) end
    curr = current + cost
  else
    if wait > window_ms then return refused(wait - window_ms, remaining, reset) end
    if windows_ahead == 0 then curr = current + cost else queued, counted_at = next + cost, 4 end
  end
  local if_remaining, if_reset = sliding_window_counter_usage(limit, window, window_ms, now, carried, previous, curr, queued)
  local stored = string.format('%d:%d:%d:%d:%d', window, previous, curr, queued, window_ms)
  return admitted(stored, wait, if_remaining, if_reset, remaining, reset, counted_at)
end

-- TOKEN_BUCKET and LEAKY_BUCKET: a debt, in 1/window_ms token units, draining
-- at `limit` units per ms, forgotten once drained under the rule it was
-- taken under (see src/domain/algorithms/meter.ts).

-- The debt at `now`, and the time the stored state counts from.
local function meter_settle(state, now, p)
  local debt, since = 0, now
  if state and #state >= 4 then
    since = math.max(now, state[2])
    if now < state[4] then
      debt = state[1]
      if state[3] ~= p.window_ms then debt = math.ceil((state[1] / state[3]) * p.window_ms) end
      local elapsed = now - state[2]
      if elapsed > 0 then
        if elapsed >= div_ceil(debt, p.limit) then debt = 0 else debt = debt - elapsed * p.limit end
      end
    end
  end
  return debt, since
end

local function meter_state(owed, since, p)
  return string.format('%d:%d:%d:%d', owed, since, p.window_ms, since + div_ceil(owed, p.limit))
end

-- What a meter of `full` units leaves owing `owed`, and when it is drained.
local function meter_usage(full, limit, window_ms, now, owed)
  return div_floor(math.max(0, full - owed), window_ms), now + div_ceil(owed, limit)
end

local function evaluate_meter(state, now, p, cost, leaky)
  local limit, window_ms, capacity = p.limit, p.window_ms, p.capacity
  local debt, since = meter_settle(state, now, p)
  local full = capacity * window_ms
  local remaining, reset = meter_usage(full, limit, window_ms, now, debt)
  if cost > capacity then return refused(window_ms, remaining, reset) end
  local throttle = p.action == ACTION_THROTTLE
  local line = 0
  if throttle and not leaky then line = limit * window_ms end
  local owed = debt + cost * window_ms
  if owed > full + line then return refused(div_ceil(owed - full - line, limit), remaining, reset) end
  local delay = 0
  if throttle then
    if leaky then delay = div_ceil(debt, limit) else delay = div_ceil(math.max(0, owed - full), limit) end
  end
  local if_remaining, if_reset = meter_usage(full, limit, window_ms, now, owed)
  return admitted(meter_state(owed, since, p), delay, if_remaining, if_reset, remaining, reset)
end

-- The index of the log's first entry released after `cutoff` (the list is
-- sorted): one LINDEX in the usual case, a binary search over a dead prefix.
local function sliding_window_log_live(key, cutoff, length)
  if length == 0 or tonumber(redis.call('LINDEX', key, 0)) > cutoff then return 0 end
  local lo, hi = 1, length
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('LINDEX', key, mid)) > cutoff then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- What a log leaves holding `n` entries, the newest released at `newest`,
-- and when it is empty again.
local function sliding_window_log_usage(limit, window_ms, now, n, newest)
  if n > 0 then return math.max(0, limit - n), newest + window_ms end
  return limit, now
end

-- SLIDING_WINDOW_LOG reads its list directly and changes nothing; entries
-- that have left the window are dropped by the call that appends.
local function evaluate_sliding_window_log(key, now, p, cost)
  local limit, window_ms = p.limit, p.window_ms
  local length = redis.call('LLEN', key)
  local first = sliding_window_log_live(key, now - window_ms, length)
  local count = length - first
  p.dead = first
  local last = nil
  if count > 0 then last = tonumber(redis.call('LINDEX', key, -1)) end
  local remaining, reset = sliding_window_log_usage(limit, window_ms, now, count, last)
  if cost > limit then return refused(window_ms, remaining, reset) end
  local throttle = p.action == ACTION_THROTTLE
  local must_leave = count + cost - limit
  local not_before = now
  if throttle and last then not_before = math.max(now, last) end
  local release = not_before
  if must_leave > 0 then
    release = math.max(not_before, tonumber(redis.call('LINDEX', key, first + must_leave - 1)) + window_ms)
  end
  local wait = release - now
  local allowed_wait = 0
  if throttle then allowed_wait = window_ms end
  if wait > allowed_wait then return refused(wait - allowed_wait, remaining, reset) end
  -- Units queued by an earlier THROTTLE may lie ahead of now: never record a
  -- unit before them, so the log stays sorted.
  local stamp = release
  if last then stamp = math.max(release, last) end
  local if_remaining, if_reset = sliding_window_log_usage(limit, window_ms, now, count + cost, stamp)
  return admitted(stamp, wait, if_remaining, if_reset, remaining, reset)
end

local function append_log(key, dead, release, cost, now, window_ms)
  if dead > 0 then redis.call('LTRIM', key, dead, -1) end
  local chunk = {}
  local stamp = int(release)
  local left = cost
  while left > 0 do
    local n = math.min(left, 1000)
    for i = 1, n do chunk[i] = stamp end
    for i = n + 1, #chunk do chunk[i] = nil end
    redis.call('RPUSH', key, unpack(chunk))
    left = left - n
  end
  redis.call('PEXPIRE', key, int(release + window_ms - now))
end

local function horizon_ms(p)
  if p.algorithm == ALGO_FIXED_WINDOW then return 2 * p.window_ms end
  if p.algorithm == ALGO_SLIDING_WINDOW_COUNTER then return 3 * p.window_ms end
  return div_ceil((p.capacity + p.limit) * p.window_ms, p.limit)
end

-- The page pair `keys` as read for `field`, and the field's value.
local function read_pages(keys, field)
  local a = redis.call('HMGET', keys[1], '_o', '_u', field)
  local b = redis.call('HMGET', keys[2], '_o', '_u', field)
  local opened_a, opened_b = tonumber(a[1]), tonumber(b[1])
  local current = 1
  if (opened_b or -1) > (opened_a or -1) then current = 2 end
  local values = { a[3], b[3] }
  local found = nil
  if values[current] then
    found = current
  elseif values[3 - current] then
    found = 3 - current
  end
  local page = { keys = keys, opened = { opened_a, opened_b }, open_until = { tonumber(a[2]), tonumber(b[2]) }, current = current, found = found }
  return page, found and values[found]
end

local function write_page(page, field, value, now, horizon)
  local cur = page.current
  local other = 3 - cur
  if not page.opened[cur] then
    redis.call('HSET', page.keys[cur], '_o', int(now))
    page.opened[cur] = now
  elseif now - page.opened[cur] >= horizon and (not page.opened[other] or now >= (page.open_until[other] or 0)) then
    redis.call('DEL', page.keys[other])
    redis.call('HSET', page.keys[other], '_o', int(now))
    page.opened[other], page.open_until[other] = now, nil
    if page.found == other then page.found = nil end
    cur, other = other, cur
  end
  redis.call('HSET', page.keys[cur], field, value)
  if page.found == other then redis.call('HDEL', page.keys[other], field) end
  local open_until = page.open_until[cur]
  if not open_until or open_until < now + horizon then
    redis.call('HSET', page.keys[cur], '_u', int(now + 2 * horizon))
    redis.call('PEXPIRE', page.keys[cur], int(2 * horizon))
  end
end

-- Release: the units a reservation took, given back (see the header).

local function serialize(state)
  local parts = {}
  for i = 1, #state do parts[i] = int(state[i]) end
  return table.concat(parts, ':')
end

-- A window counter's units, counted at index `counted_at` of the state the
-- reservation wrote, are one index lower for every window the state has moved
-- on since; below the first count they no longer count at all.
local function give_back_count(state, taken, counted_at, cost)
  if not state or #state ~= #taken or state[#state] ~= taken[#taken] then return nil end
  local index = counted_at - (state[1] - taken[1])
  if index < 2 or index > #state - 1 then return nil end
  state[index] = math.max(0, state[index] - cost)
  return serialize(state)
end

-- A meter's debt drains from the front: what is left of the reservation is
-- its units minus what has drained since beyond the debt ahead of it.
local function give_back_debt(state, taken, cost, now, p)
  if not state or #state < 4 or state[3] ~= p.window_ms or taken[3] ~= p.window_ms then return nil end
  local debt, since = meter_settle(state, now, p)
  local units = cost * p.window_ms
  local ahead = taken[1] - units
  local drained = math.max(0, now - taken[2]) * p.limit
  local left = math.min(units, math.max(0, ahead + units - drained))
  if left == 0 then return nil end
  return meter_state(math.max(0, debt - left), since, p)
end

-- A log's entries that left the window are dropped by the call that appends;
-- a reservation records them as runs ("stamp*count,..."), so that a release
-- can put them back: a later, longer window would count them again.
local function dead_runs(key, dead)
  if dead == 0 then return '' end
  local runs = {}
  local stamp, count = nil, 0
  for _, entry in ipairs(redis.call('LRANGE', key, 0, dead - 1)) do
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
    for j = i, math.max(1, i - 999), -1 do chunk[#chunk + 1] = entries[j] end
    redis.call('LPUSH', key, unpack(chunk))
    i = i - #chunk
  end
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, window_ms) end
end

local function release(p, receipt, now, cost)
  if receipt == '' then return RELEASE_NOTHING_LEFT end
  if p.algorithm == ALGO_SLIDING_WINDOW_LOG then
    local stamp, runs = string.match(receipt, '^([^/]*)/(.*)$')
    local removed = redis.call('LREM', p.key, -cost, stamp)
    if runs ~= '' then restore_dead(p.key, runs, p.window_ms) end
    if removed > 0 then return RELEASE_RESTORED end
    return RELEASE_NOTHING_LEFT
  end
  local written, previous, counted_at = string.match(receipt, '^([^/]*)/([^/]*)/(%d*)$')
  local page, value = read_pages(p.keys, p.field)
  if not value then return RELEASE_NOTHING_LEFT end
  local key = page.keys[page.found]
  if value == written then
    if previous == '' then redis.call('HDEL', key, p.field) else redis.call('HSET', key, p.field, previous) end
    return RELEASE_RESTORED
  end
  local given
  if p.algorithm == ALGO_SLIDING_WINDOW_COUNTER or p.algorithm == ALGO_FIXED_WINDOW then
    given = give_back_count(parse_state(value), parse_state(written), tonumber(counted_at), cost)
  else
    given = give_back_debt(parse_state(value), parse_state(written), cost, now, p)
  end
  if not given then return RELEASE_NOTHING_LEFT end
  redis.call('HSET', key, p.field, given)
  return RELEASE_SUBTRACTED
end

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local cost = tonumber(ARGV[2])
local mode = tonumber(ARGV[3])
local count = tonumber(ARGV[4])

local params = {}
local key_index = 1
for i = 1, count do
  local base = 4 + (i - 1) * 6
  local p = {
    algorithm = tonumber(ARGV[base + 1]),
    limit = tonumber(ARGV[base + 2]),
    window_ms = tonumber(ARGV[base + 3]),
    capacity = tonumber(ARGV[base + 4]),
    action = tonumber(ARGV[base + 5]),
    field = ARGV[base + 6],
  }
  if p.algorithm == ALGO_SLIDING_WINDOW_LOG then
    p.key = KEYS[key_index]
    key_index = key_index + 1
  else
    p.keys = { KEYS[key_index], KEYS[key_index + 1] }
    key_index = key_index + 2
  end
  params[i] = p
end

if bit.band(mode, MODE_RELEASE) ~= 0 then
  local reply = { now }
  for i = 1, count do reply[i + 1] = release(params[i], ARGV[4 + count * 6 + i], now, cost) end
  return reply
end

local verdicts = {}
local allowed = true
for i = 1, count do
  local p = params[i]
  local v
  if p.algorithm == ALGO_SLIDING_WINDOW_LOG then
    v = evaluate_sliding_window_log(p.key, now, p, cost)
  else
    local page, value = read_pages(p.keys, p.field)
    p.page, p.previous = page, value
    if p.algorithm == ALGO_SLIDING_WINDOW_COUNTER then
      v = evaluate_sliding_window_counter(read_state(value, 5), now, p, cost)
    elseif p.algorithm == ALGO_FIXED_WINDOW then
      v = evaluate_fixed_window(read_state(value, 4), now, p, cost)
    else
      v = evaluate_meter(read_state(value, 4), now, p, cost, p.algorithm == ALGO_LEAKY_BUCKET)
    end
  end
  if not v.conforming and p.action ~= ACTION_LOG_ONLY then allowed = false end
  verdicts[i] = v
end

local writes = bit.band(mode, MODE_DRY_RUN) == 0
local reserving = bit.band(mode, MODE_RESERVE) ~= 0
local reply = { now, 0 }
if allowed then reply[2] = 1 end
for i = 1, count do
  local p, v = params[i], verdicts[i]
  local counted = allowed and v.conforming
  local receipt = ''
  if counted and writes then
    if p.algorithm == ALGO_SLIDING_WINDOW_LOG then
      if reserving then receipt = int(v.next) .. '/' .. dead_runs(p.key, p.dead) end
      append_log(p.key, p.dead, v.next, cost, now, p.window_ms)
    else
      write_page(p.page, p.field, v.next, now, horizon_ms(p))
      if reserving then receipt = v.next .. '/' .. (p.previous or '') .. '/' .. (v.counted_at or '') end
    end
  end
  local conforming = 0
  if v.conforming then conforming = 1 end
  if reserving then
    local base = 2 + (i - 1) * 7
    reply[base + 1] = conforming
    reply[base + 2] = v.if_remaining
    reply[base + 3] = v.if_reset
    reply[base + 4] = v.retry or -1
    reply[base + 5] = v.delay
    reply[base + 6] = v.remaining
    reply[base + 7] = v.reset
    reply[2 + count * 7 + i] = receipt
  else
    local remaining, reset, delay = v.remaining, v.reset, 0
    if counted then remaining, reset, delay = v.if_remaining, v.if_reset, v.delay end
    local base = 2 + (i - 1) * 5
    reply[base + 1] = conforming
    reply[base + 2] = remaining
    reply[base + 3] = reset
    reply[base + 4] = v.retry or -1
    reply[base + 5] = delay
  end
end
return reply
