"""Remote functions: a plain ``def`` run on a KCoral server (protocol §5.6).

``@client.function(...)`` checks the function once, when it is decorated, and
keeps the module source to upload. Every call of ``build_program`` then writes
the same wire shape as the reference client (PyPI ``kcoral`` 0.1.1), so a
program built by either client runs on either server:

    upload        id "module", kind module: the function's source without its
                  decorators, defaults and annotations, after
                  ``from __future__ import annotations``, plus the trampoline
                  ``_kcoral_invoke_<name>(nargs, names, literals, *values)``
    get_function  id "function", name "_kcoral_invoke_<name>" (cpu_only if asked)
    upload        id "arg_<i>", kind bytes or tensor, for each such argument
    run           id "output": [len(positional), [keyword names], [literal flags], *values]
    return        key "output"

Arguments are bound to the signature with defaults applied here, on the
client, which is why the uploaded source carries no defaults (they may name
things that exist only on this side). A JSON argument travels as the literal
``{"value": ...}``, so data that looks like ``{"$ref": ...}`` is never read as
a reference; the trampoline unwraps it.

Usage::

    @client.function(timeout=60)
    def norm(values, scale=1.0):
        import math
        return math.sqrt(sum(v * v for v in values)) * scale

    norm([3, 4])           # runs here: 5.0
    norm.remote([3, 4])    # runs on the server: 5.0
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import math
import symtable
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from .errors import ProtocolError, RemoteExecutionError
from .program import Program

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client
    from .result import ProgramResult

__all__ = ["RemoteFunction", "function_decorator"]

P = ParamSpec("P")
R = TypeVar("R")

MODULE_ID = "module"
FUNCTION_ID = "function"
OUTPUT_ID = "output"
OUTPUT_KEY = "output"
TRAMPOLINE_PREFIX = "_kcoral_invoke_"

# Names a remote function may use without defining them: the builtins, but not
# the builtins module's own attributes (__name__, __doc__, ...), which would
# mean something else in the uploaded module.
_BUILTIN_NAMES = frozenset(name for name in vars(builtins) if not name.startswith("_")) | {
    "__import__",
    "__build_class__",
    "__debug__",
}

_JSON_HINT = (
    "pass JSON values (None, bool, int, float, str, list, dict with str keys), "
    "or bytes and tensors (numpy arrays, DLPack objects) as whole arguments"
)


# ----------------------------------------------------------------- decorator
def function_decorator(
    client: Client,
    *,
    timeout: float | None = None,
    output_limit_bytes: int | None = None,
    cpu_only: bool = False,
) -> Callable[[Callable[P, R]], RemoteFunction[P, R]]:
    """The decorator behind ``Client.function``; checks its own options first."""
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
    if output_limit_bytes is not None:
        if isinstance(output_limit_bytes, bool) or not isinstance(output_limit_bytes, int):
            raise TypeError(f"output_limit_bytes must be an int or None, not {type(output_limit_bytes).__name__}")
        if output_limit_bytes < 0:
            raise ValueError(f"output_limit_bytes must be non-negative, got {output_limit_bytes}")
    if not isinstance(cpu_only, bool):
        raise TypeError(f"cpu_only must be a bool, not {type(cpu_only).__name__}")

    def decorate(fn: Callable[P, R]) -> RemoteFunction[P, R]:
        return RemoteFunction(client, fn, timeout=timeout, output_limit_bytes=output_limit_bytes, cpu_only=cpu_only)

    return decorate


class RemoteFunction(Generic[P, R]):
    """A function that runs locally when called and remotely through
    ``remote``/``execute``. Immutable after construction; safe to share
    between threads (each call builds its own Program)."""

    def __init__(
        self,
        client: Client,
        fn: Callable[P, R],
        *,
        timeout: float | None = None,
        output_limit_bytes: int | None = None,
        cpu_only: bool = False,
    ) -> None:
        _check_callable(fn)
        functools.update_wrapper(self, fn)  # first: it copies fn.__dict__ onto self
        self._client = client
        self._fn = fn
        self._name = fn.__code__.co_name
        self._signature = inspect.signature(fn)
        self._source = module_source(fn)
        self._timeout = timeout
        self._output_limit_bytes = output_limit_bytes
        self._cpu_only = cpu_only

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here, in this process."""
        return self._fn(*args, **kwargs)

    def build_program(self, *args: P.args, **kwargs: P.kwargs) -> Program:
        """The program that calls the function with these arguments remotely."""
        positional, keywords = self._bind(args, kwargs)
        program = Program()
        module = program.upload(id=MODULE_ID, kind="module", source=self._source)
        fn = program.get_function(
            id=FUNCTION_ID, module=module, name=TRAMPOLINE_PREFIX + self._name, cpu_only=self._cpu_only
        )
        values: list[Any] = []
        literals: list[bool] = []
        for index, (label, value) in enumerate(positional + [(label, value) for _, label, value in keywords]):
            wire, literal = self._encode(program, index, label, value)
            values.append(wire)
            literals.append(literal)
        names = [name for name, _, _ in keywords]
        output = program.run(id=OUTPUT_ID, fn=fn, args=[len(positional), names, literals, *values])
        program.return_(key=OUTPUT_KEY, value=output)
        return program

    def execute(self, *args: P.args, **kwargs: P.kwargs) -> ProgramResult:
        """Run the function remotely and return the whole ProgramResult."""
        return self._client.execute(
            self.build_program(*args, **kwargs),
            timeout_seconds=self._timeout,
            output_limit_bytes=self._output_limit_bytes,
        )

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function remotely and return its value. Raises
        RemoteExecutionError (with ``.result``) when the program did not
        complete, ProtocolError when the result has no ``output``."""
        result = self.execute(*args, **kwargs)
        if not result.completed:
            raise RemoteExecutionError(result)
        if OUTPUT_KEY not in result.results:
            raise ProtocolError(f"the remote function's result has no {OUTPUT_KEY!r} entry")
        return result.results[OUTPUT_KEY]

    def __repr__(self) -> str:
        return f"<RemoteFunction {self.__qualname__} on {self._client!r}>"

    # ---------------------------------------------------------- arguments
    def _bind(self, args: tuple, kwargs: dict) -> tuple[list[tuple[str, Any]], list[tuple[str, str, Any]]]:
        """The positional arguments as (label, value) and the keyword ones as
        (name, label, value), in the order of inspect.BoundArguments.args and
        .kwargs, defaults applied. Labels name values in error messages."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._name}(): {exc}") from None
        bound.apply_defaults()
        positional: list[tuple[str, Any]] = []
        keywords: list[tuple[str, str, Any]] = []
        for param in self._signature.parameters.values():
            value = bound.arguments[param.name]
            if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                positional.append((param.name, value))
            elif param.kind is param.VAR_POSITIONAL:
                positional.extend((f"{param.name}[{i}]", item) for i, item in enumerate(value))
            elif param.kind is param.KEYWORD_ONLY:
                keywords.append((param.name, param.name, value))
            else:  # VAR_KEYWORD
                keywords.extend((key, f"{param.name}[{key!r}]", item) for key, item in value.items())
        return positional, keywords

    def _encode(self, program: Program, index: int, label: str, value: Any) -> tuple[Any, bool]:
        """The run argument for one value and whether it is a literal."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            return program.upload(id=f"arg_{index}", kind="bytes", value=value), False
        if _is_tensor(value):
            try:
                return program.upload(id=f"arg_{index}", kind="tensor", value=value), False
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{self._name}(): argument {label}: {exc}") from exc
        return {"value": _json_copy(value, str(label), self._name)}, True


def _is_tensor(value: object) -> bool:
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray):
        return True
    return hasattr(type(value), "__dlpack__")


def _json_copy(value: Any, path: str, fname: str) -> Any:
    """A copy of a JSON value made of exact JSON types (subclasses such as
    IntEnum or OrderedDict are refused, as the reference client does), with
    finite floats and str keys only."""
    active: set[int] = set()  # containers on the current path (cycles)

    def walk(item: Any, where: str) -> Any:
        kind = type(item)
        if item is None or kind in (bool, int, str):
            return item
        if kind is float:
            if not math.isfinite(item):
                raise ValueError(f"{fname}(): argument {where} is {item!r}, which JSON cannot carry")
            return item
        if kind is list or kind is dict:
            if id(item) in active:
                raise ValueError(f"{fname}(): argument {where} contains itself (a circular container)")
            active.add(id(item))
            try:
                if kind is list:
                    return [walk(element, f"{where}[{i}]") for i, element in enumerate(item)]
                copied = {}
                for key, element in item.items():
                    if type(key) is not str:
                        raise TypeError(
                            f"{fname}(): argument {where} has a key {key!r} that is not a str; {_JSON_HINT}"
                        )
                    copied[key] = walk(element, f"{where}[{key!r}]")
                return copied
            finally:
                active.discard(id(item))
        if isinstance(item, (bytes, bytearray, memoryview)) or _is_tensor(item):
            what = "a tensor" if _is_tensor(item) else "bytes-like"
            raise TypeError(f"{fname}(): argument {where} is {what} inside a container; {_JSON_HINT}")
        raise TypeError(f"{fname}(): argument {where} has unsupported type {kind.__name__}; {_JSON_HINT}")

    try:
        return walk(value, path)
    except RecursionError:
        raise ValueError(f"{fname}(): argument {path} is nested too deeply to send") from None


# ------------------------------------------------------- decoration checks
def _check_callable(fn: object) -> None:
    """TypeError/ValueError unless ``fn`` is a plain synchronous ``def``
    without closures (protocol §5.6)."""
    if hasattr(fn, "__wrapped__"):
        raise ValueError(
            f"remote functions cannot have other decorators: {fn!r} wraps another function; "
            "apply @client.function directly to a def"
        )
    if not inspect.isfunction(fn):
        what = "a bound method" if inspect.ismethod(fn) else f"a {type(fn).__name__}"
        raise TypeError(f"remote functions must be plain Python functions defined with def, not {what}")
    name = fn.__code__.co_name
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"remote functions must be synchronous: {name} is an async function")
    if inspect.isgeneratorfunction(fn):
        raise TypeError(f"remote functions cannot be generators: {name} contains yield")
    if name == "<lambda>":
        raise ValueError("remote functions require a def statement, not a lambda")
    if fn.__code__.co_freevars:
        raise ValueError(
            f"remote function {name} captures variables of an enclosing scope: "
            f"{', '.join(fn.__code__.co_freevars)}; pass them as arguments"
        )


def _find_definition(fn: Any) -> ast.FunctionDef:
    """The ``def`` node of ``fn``, parsed from its whole source file (a nested
    function is not dedented, so its multi-line strings keep their text)."""
    name = fn.__code__.co_name
    try:
        lines, _ = inspect.findsource(fn)
        tree = ast.parse("".join(lines))
    except (OSError, TypeError, SyntaxError) as exc:
        raise ValueError(
            f"the source of remote function {name} cannot be retrieved ({exc}); remote functions need "
            "their source in a file (not exec or a bare interactive prompt); build a Program otherwise"
        ) from None
    first_line = fn.__code__.co_firstlineno  # the first decorator's line, if decorated
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start == first_line:
                return node
    raise ValueError(
        f"the source of remote function {name} cannot be found at line {first_line} of its file "
        "(was the file changed after it was imported?)"
    )


def _strip(node: ast.FunctionDef) -> ast.FunctionDef:
    """A copy of the def without decorators, defaults or annotations (of the
    function itself; nested ones stay, unevaluated under future annotations)."""
    node = copy.deepcopy(node)
    node.decorator_list = []
    node.returns = None
    node.type_comment = None
    if hasattr(node, "type_params"):  # Python 3.12+: only annotations could use them
        node.type_params = []
    args = node.args
    args.defaults = []
    args.kw_defaults = [None] * len(args.kwonlyargs)
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
            arg.type_comment = None
    return node


def _external_globals(source: str, name: str) -> list[str]:
    """Names the function (or anything nested in it) reads or writes as
    globals that the uploaded module will not have."""
    table = symtable.symtable(source, "<remote function>", "exec")
    found: set[str] = set()
    pending = [child for child in table.get_children() if child.get_name() == name]
    while pending:
        scope = pending.pop()
        pending.extend(scope.get_children())
        for symbol in scope.get_symbols():
            if symbol.is_global() and (symbol.is_referenced() or symbol.is_assigned()):
                found.add(symbol.get_name())
    # The function's own name is defined in the uploaded module (recursion).
    return sorted(found - _BUILTIN_NAMES - {name})


def _trampoline(name: str) -> str:
    """The module-level entry point the run instruction calls. Everything it
    uses comes from ``builtins`` and its parameters, because the user's
    function may be named like any of them (``zip``, ``values``, ...)."""
    return f"""def {TRAMPOLINE_PREFIX}{name}(nargs, names, literals, *values):
    import builtins
    if (builtins.len(literals) != builtins.len(values)
            or nargs + builtins.len(names) != builtins.len(values)):
        raise builtins.TypeError("malformed remote function call: nargs + len(names) "
                                 "and len(literals) must both equal len(values)")
    values = [value["value"] if literal else value
              for literal, value in builtins.zip(literals, values)]
    keywords = builtins.dict(builtins.zip(names, values[nargs:]))
    return builtins.globals()[{name!r}](*values[:nargs], **keywords)
"""


def module_source(fn: Any) -> str:
    """The module uploaded for ``fn``; ValueError when its source has other
    decorators or uses globals the server will not have."""
    node = _find_definition(fn)
    if len(node.decorator_list) > 1:
        others = ", ".join("@" + ast.unparse(d) for d in node.decorator_list)
        raise ValueError(
            f"remote functions cannot have other decorators: {node.name} has {others}; " "apply @client.function alone"
        )
    body = ast.unparse(_strip(node))
    source = f"from __future__ import annotations\n\n{body}\n\n\n{_trampoline(node.name)}"
    external = _external_globals(source, node.name)
    if external:
        raise ValueError(
            f"remote function {node.name} uses globals that the server will not have: {', '.join(external)}; "
            "import modules inside the function and pass values as arguments"
        )
    return source
