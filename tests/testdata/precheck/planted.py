# Programs with one planted error each: `# expect: <kind> <line>:<col>` names the one finding the pre-run
# check must report (line and column in the program below the marker). Each `# ---` starts another program.
# expect: unknown-tool 2:7
await mcp_filesystem.write_file(path="/tmp/first.txt", content="written first")
await mcp_filesystem.wrte_file(path="/tmp/second.txt", content="misspelt")
# ---
# expect: unknown-argument 2:7
await mcp_notes.add_note(text="one")
await mcp_notes.add_note(txt="two")
# ---
# expect: missing-argument 3:11
await mcp_notes.add_note(text="one")
for n in range(2):
    await mcp_memory.create_entities()
# ---
# expect: bad-value 2:7
await mcp_notes.add_note(text="one")
await mcp_everything.get_sum(a="five", b=2)
# ---
# expect: bad-value 2:17
await mcp_notes.add_note(text="one")
message = await mcp_everything.get_annotated_message(messageType="warning")
# ---
# expect: refused 2:7
await mcp_notes.add_note(text="one")
await mcp_memory.delete_entities(entityNames=["a"])
# ---
# expect: unknown-server 2:7
await mcp_notes.add_note(text="one")
await mcp_filesytem.read_text_file(path="/tmp/a")
# ---
# expect: positional 2:7
await mcp_notes.add_note(text="one")
await mcp_everything.echo("hello")
# ---
# expect: unknown-server 2:7
await mcp_notes.add_note(text="one")
await mcp_servers["my_server"].echo(message="x")
# ---
# expect: unknown-tool 3:7
from mcp import runtime
await mcp_notes.add_note(text="one")
await runtime.call_tool("everything", "eccho", {"message": "x"})
# ---
# expect: unknown-server 2:1
await mcp_notes.add_note(text="one")
from mcp.servers.memroy import read_graph
# ---
# expect: unknown-argument 3:7
from mcp.servers.filesystem import write_file
await mcp_notes.add_note(text="one")
await write_file(path="/tmp/a", contents="x")
# ---
# expect: unknown-tool 3:11
async def main():
    await mcp_notes.add_note(text="one")
    await mcp_memory.read_graf()
async def run():
    await main()
await run()
# ---
# expect: bad-value 3:24
import asyncio
await mcp_notes.add_note(text="one")
await asyncio.gather(*[mcp_everything.get_sum(a=i, b="two") for i in range(3)])
# ---
# expect: refused 2:7
await mcp_notes.add_note(text="one")
await mcp_secret.read(path="/etc/shadow")
# ---
# expect: bad-value 2:7
await mcp_notes.add_note(text="one")
await mcp_memory.create_entities(entities=[{"name": "a", "entityType": "todo", "observations": "not a list"}])
# ---
# expect: unknown-skill 2:1
await mcp_notes.add_note(text="one")
from skills import todo_countr
# ---
# expect: unknown-function 3:7
from skills import todo_counter
await mcp_notes.add_note(text="one")
await todo_counter.cuont(path="/tmp/a")
# ---
# expect: unknown-argument 3:7
from skills.todo_counter import count
await mcp_notes.add_note(text="one")
await count(paths="/tmp/a")
# ---
# expect: missing-argument 3:1
from skills import todo_counter
await mcp_notes.add_note(text="one")
todo_counter.summary()
