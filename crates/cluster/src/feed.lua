-- One node's round for one bucket: see FEED_SCRIPT in feed.rs for its KEYS, ARGV and
-- answer. The kinds of a log entry's records are feed.rs's: 1/3 set/delete an IPv4 peer,
-- 2/4 an IPv6 peer, 8/9 a WebTorrent peer (field: info hash and 6, 18 or 20 bytes; a set's
-- value: 25 bytes), 5 a completed total (field: info hash; value: 4 bytes), 6/7 a
-- private-mode client record (field: 36 bytes; a set's value: 21 bytes).
local versions, log, hash = KEYS[1], KEYS[2], KEYS[3]
local base, node = ARGV[1], ARGV[2]
local ttl, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
local entry = ARGV[5]
if #entry > 0 then
  redis.call('HINCRBY', versions, node, 1)
  redis.call('RPUSH', log, entry)
  redis.call('LTRIM', log, -keep, -1)
  local i, n = 1, #entry
  while i <= n do
    local kind = string.byte(entry, i)
    local a = 0
    if kind == 1 or kind == 3 then a = 6 elseif kind == 2 or kind == 4 then a = 18
    elseif kind == 6 or kind == 7 then a = 16 elseif kind == 8 or kind == 9 then a = 20 end
    local field = string.sub(entry, i + 1, i + 20 + a)
    i = i + 21 + a
    if kind == 1 or kind == 2 or kind == 8 then
      redis.call('HSET', hash, field, string.sub(entry, i, i + 24))
      i = i + 25
    elseif kind == 3 or kind == 4 or kind == 7 or kind == 9 then
      redis.call('HDEL', hash, field)
    elseif kind == 5 then
      redis.call('HSET', hash, field, string.sub(entry, i, i + 3))
      i = i + 4
    elseif kind == 6 then
      redis.call('HSET', hash, field, string.sub(entry, i, i + 20))
      i = i + 21
    else
      return redis.error_reply('shoal: a malformed log entry')
    end
  end
  redis.call('EXPIRE', versions, ttl)
  redis.call('EXPIRE', log, ttl)
  redis.call('EXPIRE', hash, ttl)
end
local held = {}
for j = 6, #ARGV, 2 do
  held[ARGV[j]] = tonumber(ARGV[j + 1])
end
local out = {tonumber(redis.call('HGET', versions, node) or 0)}
local all = redis.call('HGETALL', versions)
for j = 1, #all, 2 do
  local other, v = all[j], tonumber(all[j + 1])
  local k = held[other] or 0
  if other ~= node and k ~= v then
    local other_log = base .. ':log:' .. other
    local len = redis.call('LLEN', other_log)
    out[#out + 1] = other
    out[#out + 1] = v
    if k < v and k >= v - len then
      out[#out + 1] = 0
      out[#out + 1] = redis.call('LRANGE', other_log, len - (v - k), -1)
    else
      out[#out + 1] = 1
      out[#out + 1] = redis.call('HGETALL', base .. ':peers:' .. other)
    end
  end
end
return out
