"""The Python side of a KCoral worker process: instruction dispatch and value encoding.

The C++ core (kcoral._core) owns the socket, output capture and the workspace
switch; it calls Engine.run once per request.
"""
