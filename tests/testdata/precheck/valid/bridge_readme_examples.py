# The Python bridge's README examples (its "Usage" and "Examples" sections), as programs: the servers they
# call are in ../servers.json. Each `# ---` starts another program.
from mcp import runtime

matches = await runtime.search_tool_docs("calendar events", limit=5)
for hit in matches:
    print(hit["server"], hit["tool"], hit.get("description", ""))
# ---
mcp_servers["search"]  # Dynamic lookup
mcp_search  # Attribute access
from mcp.servers.search import *  # Module import
# ---
# Use MCP tools in sandboxed code
result = await mcp_filesystem.read_file(path='/tmp/test.txt')
# Complex workflows
data = await mcp_search.search(query="TODO")
await mcp_github.create_issue(repo='owner/repo', title=data.title)
# ---
# List and filter files
files = await mcp_filesystem.list_directory(path='/tmp')
for file in files:
    content = await mcp_filesystem.read_file(path=file)
    if 'TODO' in content:
        print(f"TODO in {file}")
# ---
# Extract data
transcript = await mcp_google_drive.get_document(documentId='abc123')
# Process
summary = transcript[:500] + "..."
# Store
await mcp_salesforce.update_record(
    objectType='SalesMeeting',
    recordId='00Q5f000001abcXYZ',
    data={'Notes': summary}
)
# ---
# Jira -> GitHub migration
issues = await mcp_jira.search_issues(project='API', status='Open')
for issue in issues:
    details = await mcp_jira.get_issue(id=issue.id)
    if 'bug' in details.description.lower():
        await mcp_github.create_issue(
            repo='owner/repo',
            title=f"Bug: {issue.title}",
            body=details.description
        )
# ---
from mcp import runtime

print("Discovered:", runtime.discovered_servers())
print("Cached servers:", runtime.list_servers_sync())
print("Loaded metadata:", runtime.list_loaded_server_metadata())
print("Selectable via RPC:", await runtime.list_servers())

# Peek at tool docs for a server that's already loaded in this run
loaded = runtime.list_loaded_server_metadata()
if loaded:
    first = runtime.describe_server(loaded[0]["name"])
    for tool in first["tools"]:
        print(tool["alias"], "->", tool.get("description", ""))

# Ask for summaries or full schemas only when needed
if loaded:
    summaries = await runtime.query_tool_docs(loaded[0]["name"])
    detailed = await runtime.query_tool_docs(
        loaded[0]["name"],
        tool=summaries[0]["toolAlias"],
        detail="full",
    )
    print("Summaries:", summaries)
    print("Cached tools:", runtime.list_tools_sync(loaded[0]["name"]))
    print("Detailed doc:", detailed)

# Fuzzy search across loaded servers without rehydrating every schema
results = await runtime.search_tool_docs("calendar events", limit=3)
for result in results:
    print(result["server"], result["tool"], result.get("description", ""))

# Synchronous helpers for quick answers without extra awaits
print("Capability summary:", runtime.capability_summary())
print("Docs from cache:", runtime.query_tool_docs_sync(loaded[0]["name"]) if loaded else [])
print("Search from cache:", runtime.search_tool_docs_sync("calendar"))
