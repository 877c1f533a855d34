-- wrk script: POST one JSON body (file $BENCH_BODY) and check every response.
-- Each thread keeps the predictions array (field $BENCH_FIELD) of its first 200 answer and counts
-- answers whose predictions differ from it (numbers compared to 1e-6 relative: a batched float32
-- matrix product may round the last bit differently), and answers that are not 200; done() prints
-- one "BENCH_JSON {...}" line the harness parses and checks against the in-process prediction.
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
local pattern = '"' .. os.getenv("BENCH_FIELD") .. '"%s*:%s*(%b[])'

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  first = nil
  mismatches = 0
  not_ok = 0
  answers = 0
end

local function numbers(text)
  local out = {}
  for token in string.gmatch(text, "[^%[%],%s]+") do
    table.insert(out, tonumber(token) or token)
  end
  return out
end

local function close(a, b)
  local x, y = numbers(a), numbers(b)
  if #x ~= #y then return false end
  for i = 1, #x do
    local u, v = x[i], y[i]
    if type(u) == "number" and type(v) == "number" then
      if math.abs(u - v) > 1e-6 * math.max(1, math.abs(v)) then return false end
    elseif u ~= v then
      return false
    end
  end
  return true
end

function response(status, headers, body)
  answers = answers + 1
  if status ~= 200 then
    not_ok = not_ok + 1
    return
  end
  local got = string.match(body, pattern)
  if got == nil then
    mismatches = mismatches + 1
  elseif first == nil then
    first = got
  elseif got ~= first and not close(got, first) then
    mismatches = mismatches + 1
  end
end

function done(summary, latency, requests)
  local firsts, mism, bad, n = {}, 0, 0, 0
  for _, t in ipairs(threads) do
    local fb = t:get("first")
    table.insert(firsts, fb == nil and "null" or fb)
    mism = mism + t:get("mismatches")
    bad = bad + t:get("not_ok")
    n = n + t:get("answers")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"non_2xx":%d,"socket_errors":%d,"timeouts":%d,"answers":%d,"not_ok":%d,' ..
    '"mismatches":%d,"firsts":[%s]}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.status, e.connect + e.read + e.write, e.timeout, n, bad, mism,
    table.concat(firsts, ",")))
end
