--[[
reset.lua: forgets one bucket, whatever its algorithm.

KEYS   [1] page a, [2] page b of the bucket's page pair, [3] the bucket's log
ARGV   [1] the bucket's field in its page
Reply  the number of things removed: 0 when the bucket held nothing
]]

return redis.call('HDEL', KEYS[1], ARGV[1]) + redis.call('HDEL', KEYS[2], ARGV[1]) + redis.call('DEL', KEYS[3])
