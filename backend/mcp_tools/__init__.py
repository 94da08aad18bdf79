"""MCP tools for the chat: the servers of ``mcp.json`` and their connections (the official
``mcp`` SDK), for the chat window and ``quantdesk chat`` alike."""
