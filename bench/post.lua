-- wrk script: POST one JSON body (file $BENCH_BODY) on every request; done() prints one
-- "BENCH_JSON {...}" line with the figures the harness reads.
--
-- No response() callback: defining one makes wrk copy every answer's headers and body into Lua
-- and run the callback on the same two cores as the server under test, which throttled the load
-- and compressed the differences between servers (bench/NOTES.md, "Fair peers"). wrk itself
-- counts answers that are not 2xx/3xx, socket errors and timeouts; the answers are checked in
-- full outside the timed run and sampled during it by the harness (bench/measure.py, Sampler).
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

-- With $BENCH_PATHS (a file of URL paths, one a line), requests go to those paths in turn, each
-- thread starting at its own place (the many-models scenario); without it wrk sends the one
-- prepared request and runs no Lua per request.
local list = os.getenv("BENCH_PATHS")
if list then
  local paths = {}
  for line in io.lines(list) do
    table.insert(paths, line)
  end
  local started = 0
  function setup(thread)
    started = started + 1
    thread:set("next_path", (started * 7919) % #paths)
  end
  function request()
    next_path = next_path % #paths + 1
    return wrk.format(nil, paths[next_path])
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"non_2xx":%d,"socket_errors":%d,"timeouts":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.status, e.connect + e.read + e.write, e.timeout))
end
