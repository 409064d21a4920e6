/**
 * The sandbox side of the hop study (hop_stages_probe.ts in-process, hop_stages_serve.ts through a real
 * serve): Python that wraps the runtime's channel and rpc functions to mark each stage of `calls`
 * `runtime.list_servers()` hops on the wall clock, and prints the marks as JSON.
 * @module
 */

/** The Python a probe runs for `calls` hops. */
export function hopSandboxCode(calls: number): string {
  return `
import gc, json, time
from mcp import runtime
from codemode_runtime import channel as cm, rpc as rm
ch = [o for o in gc.get_objects() if isinstance(o, cm.Channel)][0]
marks = {"call": [], "sendIn": [], "encoded": [], "written": [], "wake": [], "deliver": [], "settled": [], "back": []}
rec = [False]
ns = time.time_ns
enc = cm.encode
def encode(frame):
    data = enc(frame)
    if rec[0]: marks["encoded"].append(ns())
    return data
cm.encode = encode
send = cm.Channel.send
def timed_send(self, frame):
    if rec[0]: marks["sendIn"].append(ns())
    send(self, frame)
    if rec[0]: marks["written"].append(ns())
cm.Channel.send = timed_send
pump = ch._pump_in_loop
def timed_pump():
    if rec[0]: marks["wake"].append(ns())
    pump()
loop = ch._loop
loop.remove_reader(ch._read_fd); loop.add_reader(ch._read_fd, timed_pump)
deliver = rm._deliver
def timed_deliver(lp, fut, frame):
    if rec[0]: marks["deliver"].append(ns())
    deliver(lp, fut, frame)
    if rec[0]: marks["settled"].append(ns())
rm._deliver = timed_deliver
# the kernel's RpcClient sent through Channel.send bound at start: route it through the timed one
for o in gc.get_objects():
    if isinstance(o, rm.RpcClient):
        o._send = ch.send
for i in range(300):
    await runtime.list_servers()
rec[0] = True
cpu = time.process_time()
for i in range(${calls}):
    marks["call"].append(ns())
    await runtime.list_servers()
    marks["back"].append(ns())
rec[0] = False
cpu = (time.process_time() - cpu) / ${calls} * 1e6
print(json.dumps({**{k: [x // 1000 for x in v] for k, v in marks.items()}, "cpu": [cpu]}))`;
}
