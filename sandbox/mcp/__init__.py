"""The codemode in-sandbox API.

    from mcp import runtime          # discovery helpers, call_tool, capability_summary
    from mcp import ToolError        # raised when a tool reports an error (an MCPError)
    from mcp import MCPError         # the base of every error a call into the host raises
    from mcp.servers.<alias> import <tool>
    from skills import <name>        # a saved skill (runtime.save_skill, runtime.list_skills)

Every configured server is also a global `mcp_<alias>` and an entry in `mcp_servers[name]`.
"""
from codemode_runtime.rpc import MCPError, ToolError
from codemode_runtime.values import MimeBytes

from . import runtime, servers

__all__ = ["runtime", "servers", "MCPError", "MimeBytes", "ToolError"]
