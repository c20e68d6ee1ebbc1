--[[
merge.lua: `state` reads a bucket's own state, for this region's instances to
ship to the other regions; `merge` keeps, in this region's Redis, another
region's state of a bucket of a GLOBAL rule (one whose limit every region
shares): decide.lua adds the counts of these copies to the bucket's own (see
its "Regions"). A part of the library decide.lua opens, whose helpers it uses.

Each region ships its own state of a bucket, whole, not what changed since
the last shipment, so merging is idempotent and order does not matter: a
state of a later window replaces the copy, one of the same window keeps the
larger of each count (a region's counts of one window only grow), one of an
earlier window is dropped. A shipment sent twice, late, or after a partition
healed counts once, and the latest state always wins.

The copy is field "<bucket field>@<region>" of the bucket's page pair,
written to the current page exactly as decide.lua writes a bucket (moved out
of the other page, the page's TTL set or lengthened on the first write of an
epoch), so a copy lives as long as the bucket would and leaves with its page.

state  keys  [1] page a, [2] page b of the bucket's page pair
       args  [1] now in ms, or "" to read Redis TIME
             [2] the rule's spec, as decide.lua takes it
             [3] the bucket's field
       Reply the bucket's state, decimal integers joined by ":" as receipts
             write them; "" when it has none
merge  keys  as state's
       args  [1] to [3] as state's
             [4] the region the state comes from
             [5] its state, as state replies it
       Reply 1 when the copy changed, 0 when it already held as much
]]

local function time_of(arg)
  if arg ~= '' then return tonumber(arg) end
  local time = call('TIME')
  return tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
end

-- A record of the bucket (or of a copy, by its field) for read_bucket and settle_page.
local function page_record(field)
  return { field = field, current = false, other = false, moved = false, previous = false }
end

-- Where a state's window starts: its index times its window length, or for a
-- calendar's (whose last number is the calendar's marker, negative: see
-- "Calendars" in decide.lua) its index itself, the period's start in ms.
local function merge_window_start(state, n)
  if state[n] < 0 then return state[1] end
  return state[1] * state[n]
end

local function state(keys, args)
  if not call then bind() end
  return state_text((read_bucket(page_record(args[3]), keys[1], keys[2], rule_spec(args[2]).horizon, false, time_of(args[1]))))
end

local function merge(keys, args)
  if not call then bind() end
  local now = time_of(args[1])
  local r = page_record(args[3] .. '@' .. args[4])
  local horizon = rule_spec(args[2]).horizon
  local stored = parse_state(state_text((read_bucket(r, keys[1], keys[2], horizon, false, now))))
  local incoming = parse_state(args[5])
  if not incoming then return 0 end
  local n = #incoming
  local merged = incoming
  if stored and #stored == n then
    local stored_start, incoming_start = merge_window_start(stored, n), merge_window_start(incoming, n)
    if stored_start > incoming_start then return 0 end
    if stored_start == incoming_start and stored[n] == incoming[n] then
      local changed = false
      merged = {}
      for i = 1, n do
        merged[i] = max(stored[i], incoming[i])
        if merged[i] ~= stored[i] then changed = true end
      end
      if not changed then return 0 end
    end
  end
  if call('HSET', r.current, r.field, pack_state(merged)) == 1 then settle_page(r, horizon, now) end
  return 1
end
