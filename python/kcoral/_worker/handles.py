"""What some handles of a request are: markers the engine creates at get_function and upload,
and the runtimes recognise (a cpu_only function runs off the GPU lease, gpu_runtime.py).

Their own module, so that the runtimes need not import the engine that drives them.
"""


class CudaSource:
    """A `language: "cuda"` module upload (E2 form used by the seed)."""

    def __init__(self, source: str):
        self.source = source


class CudaFunctionSource:
    """get_function on a CUDA source module: what uploaded compilers read."""

    def __init__(self, name: str, source: str):
        self.name = name
        self.source = source

    def __repr__(self) -> str:
        return f"CudaFunctionSource(name={self.name!r})"


class CpuOnlyFunction:
    """Marks a get_function handle whose calls must not touch the GPU."""

    def __init__(self, fn):
        self.fn = fn
