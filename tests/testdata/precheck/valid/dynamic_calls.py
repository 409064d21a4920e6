# Programs whose calls cannot be resolved before they run, or whose failures the program handles itself:
# none may be a finding. Each `# ---` starts another program; they run in one session, in order.
name = "read_" + "text_file"
await getattr(mcp_filesystem, name)(path="/tmp/a")
# ---
tool = "write_file"
await runtime.call_tool("filesystem", tool, {"path": "/tmp/a", "content": "x"})
# ---
args = {"path": "/tmp/a", "content": "x"}
await mcp_filesystem.write_file(**args)
# ---
payload = {"entities": []}
await runtime.call_tool("memory", "create_entities", payload)
# ---
server = "memory"
await mcp_servers[server].read_graph()
# ---
try:
    text = await mcp_filesystem.read_text_file_v2(path="/tmp/a")
except AttributeError:
    text = await mcp_filesystem.read_text_file(path="/tmp/a")
# ---
if "new_tool" in dir(mcp_everything):
    await mcp_everything.new_tool(anything=1)
# ---
tools = [t["name"] for t in await runtime.list_tools("everything")]
result = await mcp_everything.get_weather(city="Oslo") if "get_weather" in tools else None
# ---
mcp_fs = mcp_filesystem
await mcp_fs.read_text_file(path="/tmp/a")
await mcp_fs.anything_goes(at="all")
# ---
await mcp_cache.fetch(key="a")  # mcp_cache was bound in an earlier run
await mcp_earlier.not_a_filesystem_tool()  # an earlier run bound it to a proxy: not relied on either
await runtime_earlier.call_tool("everything", "not_a_tool", {})
# ---
await runtime.add_server("io.github.example/weather")
await mcp_weather.forecast(city="Oslo")
await mcp_servers["weather"].forecast(city="Oslo")
from mcp.servers.weather import forecast
# ---
async def grab(fn):
    try:
        return await fn()
    except Exception as e:
        return type(e).__name__
await grab(lambda: mcp_everything.no_such_tool())
await grab(lambda: mcp_everything.echo(wrong=1))
# ---
async def attempt(coro):
    try:
        return await coro
    except Exception as e:
        return str(e)
await attempt(mcp_notes.add_note(text="x", approved=True))
# ---
outcomes = await asyncio.gather(mcp_everything.no_such_tool(), mcp_everything.echo(message="x"),
                                return_exceptions=True)
# ---
async def later():
    await mcp_everything.not_yet_there()
# ---
async def probe():
    await mcp_everything.maybe_missing()
try:
    await probe()
except AttributeError:
    pass
# ---
globals()["mcp_second"] = mcp_memory
await mcp_second.read_graph()
# ---
exec("mcp_third = mcp_memory")
await mcp_third.read_graph()
# ---
class Notes:
    async def add(self, text):
        return await mcp_notes.add_note(texts=text)
# ---
def wrap(mcp_filesystem):
    return mcp_filesystem.whatever(x=1)
# ---
from mcp.servers.filesystem import read_text_file as read
await read(path="/tmp/a")
# ---
await mcp_everything.echo(message="x", raw=True)
await mcp_everything.echo(**{"message": "x"})
# ---
listing = await mcp_my_server.list_tools()
# ---
try:
    from skills import not_saved_yet
except ImportError:
    not_saved_yet = None
# ---
if "memory" in runtime.discovered_servers():
    from mcp.servers.memory import read_graph
    await read_graph()
# ---
coroutine = mcp_everything.never_awaited()
coroutine.close()
# ---
for mcp_s in (mcp_filesystem, mcp_memory):
    print(mcp_s)
# ---
import mcp.runtime as rt
await rt.call_tool("everything", "echo", {"message": "x"})
await rt.call_tool("my_server", "echo", {"message": "x"})
await rt.call_tool("everything", "get-sum", {"a": 1, "b": 2.5})
# ---
await mcp_servers["my-server"].get_file(path="/tmp/a")
await mcp_my_server.get_file(path="/tmp/a")
# ---
task = asyncio.create_task(mcp_everything.no_such_tool())
# ---
from contextlib import suppress
with suppress(AttributeError):
    await mcp_everything.no_such_tool()
# ---
sums = await asyncio.gather(*[mcp_everything.get_sum(a=i, b=i) for i in range(3)])
entities = [{"name": n, "entityType": "todo", "observations": []} for n in "ab"]
await mcp_memory.create_entities(entities=entities)
# ---
async def main():
    return await mcp_everything.echo(message="in main")
asyncio.run(main()) if False else await main()
# ---
def sync_helper():
    return mcp_everything.echo(message="made, awaited by the caller")
await sync_helper()
# ---
def decorate(fn):
    return fn
@decorate
async def decorated():
    await mcp_everything.no_such_tool()
# ---
async def gen():
    yield await mcp_everything.no_such_tool()
# ---
match {"kind": "note"}:
    case {"kind": "note"}:
        await mcp_notes.count_notes()
# ---
mcp = __import__("mcp")
await mcp.runtime.call_tool("nowhere", "x", {})
