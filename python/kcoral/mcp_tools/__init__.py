"""`kcoral mcp`: KCoral's tools for agents over the Model Context Protocol (issue 45, docs/mcp.md).

A client of a KCoral server or cluster, never a runner of code: every tool builds a program and
sends it through kcoral.Client, so the server's keys, quotas and defences hold as for any client.

    command.py        the `kcoral mcp` flags, and which transport serves
    server.py         the MCP server and its five tools (target, compile, evaluate, run, usage)
    worker_side.py    the module the compile and evaluate programs upload (runs on a worker)
    programs.py       the compile and evaluate programs, built from a tool's checked arguments
    wire_program.py   a program in the protocol's JSON, for the run tool
    answers.py        outcomes turned into answers an agent can act on
    tool_errors.py    refusals that name the field and the fix (a 429 keeps its Retry-After)
    libraries.py      the compiled libraries of this session, by blob hash
"""
