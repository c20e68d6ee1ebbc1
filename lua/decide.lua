--[[
decide.lua: decides one request against every rule that applies to it, in one
atomic call. The request is allowed only if every enforcing rule conforms; then
each conforming rule counts it. When it is denied, nothing is counted anywhere.
The arithmetic mirrors src/domain/algorithms (same formulas, same rounding); the
conformance and property tests run both against the same cases.

KEYS   per rule, in the order of the rules in ARGV:
         SLIDING_WINDOW_LOG   1 key:  the bucket's log, a list of release times in ms,
                                      oldest first
         any other algorithm  2 keys: the page pair holding the bucket, two hashes
                                      (see "Pages" below)
ARGV   [1] now in ms, or "" to read Redis TIME (tests pin the clock with it)
       [2] cost, units the request takes from every rule
       [3] "1" for a dry run (decide, count nothing), else "0"
       [4] N, the number of rules
       then 6 values per rule:
         algorithm   1 SLIDING_WINDOW_COUNTER, 2 TOKEN_BUCKET, 3 FIXED_WINDOW,
                     4 SLIDING_WINDOW_LOG, 5 LEAKY_BUCKET
         limit, window_ms, capacity (burst, or limit where there is none)
         action      1 REJECT, 2 THROTTLE, 3 LOG_ONLY
         field       the bucket's field in its page ("" for SLIDING_WINDOW_LOG)
Reply  { now_ms, allowed (1 or 0),
         then 5 integers per rule: conforming (1 or 0), remaining, reset_at_ms,
         retry_after_ms (-1 when conforming), delay_ms }

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
]]

local ALGO_SLIDING_WINDOW_COUNTER, ALGO_TOKEN_BUCKET, ALGO_FIXED_WINDOW, ALGO_SLIDING_WINDOW_LOG, ALGO_LEAKY_BUCKET = 1, 2, 3, 4, 5
local ACTION_THROTTLE, ACTION_LOG_ONLY = 2, 3
local ONE = 65536 -- the sliding window counter's fixed-point unit

local function int(x)
  return string.format('%.0f', x)
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

-- Each algorithm returns a verdict: conforming, delay, retry (ms or nil),
-- remaining and reset if admitted, remaining and reset as things stand, and
-- the state to store if admitted.
local function verdict_admitted(next, delay, if_remaining, if_reset, remaining, reset)
  return { conforming = true, delay = delay, retry = nil, if_remaining = if_remaining, if_reset = if_reset,
           remaining = remaining, reset = reset, next = next }
end

local function verdict_refused(retry, remaining, reset)
  return { conforming = false, delay = 0, retry = retry, if_remaining = remaining, if_reset = reset,
           remaining = remaining, reset = reset }
end

-- A state aged to `window` (an index of the window length it was counted in).
local function fw_age(stored, current, next, window)
  if stored >= window then return stored, current, next end
  if stored == window - 1 then return window, next, 0 end
  return window, 0, 0
end

local function fixed_window(state, now, p, cost)
  local limit, window_ms = p.limit, p.window_ms
  local window, current, next = math.floor(now / window_ms), 0, 0
  if state and #state >= 4 then
    local aged, curr, queued = fw_age(state[1], state[2], state[3], math.floor(now / state[4]))
    if state[4] ~= window_ms then
      current = curr + queued
    else
      window, current, next = aged, curr, queued
    end
  end
  local window_end = (window + 1) * window_ms
  local function usage(curr, queued)
    local reset = now
    if queued > 0 then
      reset = window_end + window_ms
    elseif curr > 0 then
      reset = window_end
    end
    return math.max(0, limit - curr - queued), reset
  end
  local function stored(curr, queued)
    return int(window) .. ':' .. int(curr) .. ':' .. int(queued) .. ':' .. int(window_ms)
  end
  local remaining, reset = usage(current, next)
  if cost > limit then return verdict_refused(window_ms, remaining, reset) end
  if current + cost <= limit then
    local if_remaining, if_reset = usage(current + cost, next)
    return verdict_admitted(stored(current + cost, next), 0, if_remaining, if_reset, remaining, reset)
  end
  local throttle = p.action == ACTION_THROTTLE
  if throttle and next + cost <= limit then
    local if_remaining, if_reset = usage(current, next + cost)
    return verdict_admitted(stored(current, next + cost), window_end - now, if_remaining, if_reset, remaining, reset)
  end
  local wait_windows = 1
  if throttle or next + cost <= limit then wait_windows = 0 end
  return verdict_refused(window_end + wait_windows * window_ms - now, remaining, reset)
end

local function swc_weight(elapsed, window_ms)
  return div_ceil((window_ms - elapsed) * ONE, window_ms)
end

-- The earliest elapsed time >= from, within one window, at which
-- prev * weight + (curr + cost) fits the limit; nil when none does.
local function swc_earliest_in_window(prev, curr, from, window_ms, limit, cost)
  local room = (limit - cost - curr) * ONE
  if room < 0 then return nil end
  if prev * swc_weight(from, window_ms) <= room then return from end
  local k = div_floor(room, prev)
  local at = window_ms - div_floor(k * window_ms, ONE)
  if at < window_ms then return math.max(at, from) end
  return nil
end

local function swc_age(stored, previous, current, next, window)
  if stored >= window then return stored, previous, current, next end
  if stored == window - 1 then return window, current, next, 0 end
  if stored == window - 2 then return window, next, 0, 0 end
  return window, 0, 0, 0
end

local function sliding_window_counter(state, now, p, cost)
  local limit, window_ms = p.limit, p.window_ms
  local window = math.floor(now / window_ms)
  local previous, current, next = 0, 0, 0
  if state and #state >= 5 then
    local aged, prev, curr, queued = swc_age(state[1], state[2], state[3], state[4], math.floor(now / state[5]))
    if state[5] ~= window_ms then
      current = prev + curr + queued
    else
      window, previous, current, next = aged, prev, curr, queued
    end
  end
  local elapsed = math.max(0, now - window * window_ms)
  local function usage(prev, curr, queued)
    local remaining = math.max(0, limit - curr - queued - div_ceil(prev * swc_weight(elapsed, window_ms), ONE))
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
  local remaining, reset = usage(previous, current, next)
  if cost > limit then return verdict_refused(window_ms, remaining, reset) end

  local throttle = p.action == ACTION_THROTTLE
  local candidates = { { previous, current, elapsed }, { current, next, 0 }, { next, 0, 0 } }
  local release, windows_ahead = (window + 3) * window_ms, 3
  local first = 1
  if throttle and next > 0 then first = 2 end
  for ahead = first, 3 do
    local c = candidates[ahead]
    local at = swc_earliest_in_window(c[1], c[2], c[3], window_ms, limit, cost)
    if at then
      release, windows_ahead = (window + ahead - 1) * window_ms + at, ahead - 1
      break
    end
  end
  local wait = release - now
  local curr, queued = current, next
  if not throttle then
    if wait > 0 then return verdict_refused(wait, remaining, reset) end
    curr = current + cost
  else
    if wait > window_ms then return verdict_refused(wait - window_ms, remaining, reset) end
    if windows_ahead == 0 then curr = current + cost else queued = next + cost end
  end
  local if_remaining, if_reset = usage(previous, curr, queued)
  local stored = int(window) .. ':' .. int(previous) .. ':' .. int(curr) .. ':' .. int(queued) .. ':' .. int(window_ms)
  return verdict_admitted(stored, wait, if_remaining, if_reset, remaining, reset)
end

-- TOKEN_BUCKET and LEAKY_BUCKET: a debt, in 1/window_ms token units, draining
-- at `limit` units per ms, forgotten once drained under the rule it was
-- taken under (see src/domain/algorithms/meter.ts).
local function meter(state, now, p, cost, leaky)
  local limit, window_ms, capacity = p.limit, p.window_ms, p.capacity
  local debt, since = 0, now
  if state and #state >= 4 then
    since = math.max(now, state[2])
    if now < state[4] then
      debt = state[1]
      if state[3] ~= window_ms then debt = math.ceil((state[1] / state[3]) * window_ms) end
      local elapsed = now - state[2]
      if elapsed > 0 then
        if elapsed >= div_ceil(debt, limit) then debt = 0 else debt = debt - elapsed * limit end
      end
    end
  end
  local full = capacity * window_ms
  local function usage(owed)
    return div_floor(math.max(0, full - owed), window_ms), now + div_ceil(owed, limit)
  end
  local remaining, reset = usage(debt)
  if cost > capacity then return verdict_refused(window_ms, remaining, reset) end
  local throttle = p.action == ACTION_THROTTLE
  local line = 0
  if throttle and not leaky then line = limit * window_ms end
  local owed = debt + cost * window_ms
  if owed > full + line then return verdict_refused(div_ceil(owed - full - line, limit), remaining, reset) end
  local delay = 0
  if throttle then
    if leaky then delay = div_ceil(debt, limit) else delay = div_ceil(math.max(0, owed - full), limit) end
  end
  local if_remaining, if_reset = usage(owed)
  local stored = int(owed) .. ':' .. int(since) .. ':' .. int(window_ms) .. ':' .. int(since + div_ceil(owed, limit))
  return verdict_admitted(stored, delay, if_remaining, if_reset, remaining, reset)
end

-- The index of the log's first entry released after `cutoff` (the list is
-- sorted): one LINDEX in the usual case, a binary search over a dead prefix.
local function first_live(key, cutoff, length)
  if length == 0 or tonumber(redis.call('LINDEX', key, 0)) > cutoff then return 0 end
  local lo, hi = 1, length
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('LINDEX', key, mid)) > cutoff then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- SLIDING_WINDOW_LOG reads its list directly and changes nothing; entries
-- that have left the window are dropped by the call that appends.
local function sliding_window_log(key, now, p, cost)
  local limit, window_ms = p.limit, p.window_ms
  local length = redis.call('LLEN', key)
  local first = first_live(key, now - window_ms, length)
  local count = length - first
  p.dead = first
  local last = nil
  if count > 0 then last = tonumber(redis.call('LINDEX', key, -1)) end
  local function usage(n, newest)
    if n > 0 then return math.max(0, limit - n), newest + window_ms end
    return limit, now
  end
  local remaining, reset = usage(count, last)
  if cost > limit then return verdict_refused(window_ms, remaining, reset) end
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
  if wait > allowed_wait then return verdict_refused(wait - allowed_wait, remaining, reset) end
  -- Units queued by an earlier THROTTLE may lie ahead of now: never record a
  -- unit before them, so the log stays sorted.
  local stamp = release
  if last then stamp = math.max(release, last) end
  local if_remaining, if_reset = usage(count + cost, stamp)
  return verdict_admitted(stamp, wait, if_remaining, if_reset, remaining, reset)
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

local function read_pages(key_a, key_b, field)
  local a = redis.call('HMGET', key_a, '_o', '_u', field)
  local b = redis.call('HMGET', key_b, '_o', '_u', field)
  local page = { keys = { key_a, key_b }, opened = { tonumber(a[1]), tonumber(b[1]) }, open_until = { tonumber(a[2]), tonumber(b[2]) } }
  local current = 1
  if (page.opened[2] or -1) > (page.opened[1] or -1) then current = 2 end
  page.current = current
  local values = { a[3], b[3] }
  if values[current] then
    page.found = current
  elseif values[3 - current] then
    page.found = 3 - current
  end
  return page, page.found and values[page.found]
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

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local cost = tonumber(ARGV[2])
local dry_run = ARGV[3] == '1'
local count = tonumber(ARGV[4])

local rules = {}
local allowed = true
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
  local v
  if p.algorithm == ALGO_SLIDING_WINDOW_LOG then
    p.key = KEYS[key_index]
    key_index = key_index + 1
    v = sliding_window_log(p.key, now, p, cost)
  else
    local page, value = read_pages(KEYS[key_index], KEYS[key_index + 1], p.field)
    key_index = key_index + 2
    p.page = page
    local state = parse_state(value)
    if p.algorithm == ALGO_SLIDING_WINDOW_COUNTER then
      v = sliding_window_counter(state, now, p, cost)
    elseif p.algorithm == ALGO_FIXED_WINDOW then
      v = fixed_window(state, now, p, cost)
    else
      v = meter(state, now, p, cost, p.algorithm == ALGO_LEAKY_BUCKET)
    end
  end
  if not v.conforming and p.action ~= ACTION_LOG_ONLY then allowed = false end
  rules[i] = { p = p, v = v }
end

local reply = { now, 0 }
if allowed then reply[2] = 1 end
for i = 1, count do
  local p, v = rules[i].p, rules[i].v
  local counted = allowed and v.conforming
  if counted and not dry_run then
    if p.algorithm == ALGO_SLIDING_WINDOW_LOG then
      append_log(p.key, p.dead, v.next, cost, now, p.window_ms)
    else
      write_page(p.page, p.field, v.next, now, horizon_ms(p))
    end
  end
  local conforming, retry, remaining, reset, delay = 0, v.retry or -1, v.remaining, v.reset, 0
  if v.conforming then conforming = 1 end
  if counted then remaining, reset, delay = v.if_remaining, v.if_reset, v.delay end
  local base = 2 + (i - 1) * 5
  reply[base + 1] = conforming
  reply[base + 2] = remaining
  reply[base + 3] = reset
  reply[base + 4] = retry
  reply[base + 5] = delay
end
return reply
