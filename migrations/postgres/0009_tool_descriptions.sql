-- What each worker says its tools are (name, title, description, input
-- schema, task support), so that `taskstore mcp` lists them to MCP clients.
-- A JSON array, refreshed with every heartbeat like the rest of the row.
--
-- Rolling upgrade: a worker or replica from before this migration writes no
-- descriptions (the default), and its tools are listed as taking any
-- arguments, task optional, until a newer worker describes them.
ALTER TABLE workers ADD COLUMN tool_descriptions jsonb NOT NULL DEFAULT '[]';
