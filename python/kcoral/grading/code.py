"""What `grade` runs: a module's Python source and the name of a callable in it."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    """`source`: a Python module's text; `name`: a callable in it. With `factory`, the callable
    is `make(shape) -> callable`, called once per shape in each process (None: the declared
    sizes; else one dict of cfg `shapes`): how a model is built once and called on each set."""

    source: str
    name: str
    factory: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise TypeError("Code.source must be a module's Python source (a non-empty str)")
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Code.name must name a callable in the source, got {self.name!r}")
