--[[
reset.lua: `reset` forgets one bucket, whatever its algorithm. A part of the
library decide.lua opens (see its header).

keys   [1] page a, [2] page b of the bucket's page pair, [3] the bucket's log,
       [4] the bucket's leases
args   [1] the bucket's field in its page
Reply  the number of things removed: 0 when the bucket held nothing
]]

local function reset(keys, args)
  return redis.call('HDEL', keys[1], args[1]) + redis.call('HDEL', keys[2], args[1]) + redis.call('DEL', keys[3], keys[4])
end
