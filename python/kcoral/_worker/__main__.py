"""Worker entry point: `python -m kcoral._worker` (started by kcoral-server)."""

import os


def main() -> None:
    from kcoral._core import serve
    from kcoral._worker.engine import Engine
    from kcoral._worker.runtime import make_runtime

    # Imports that user programs commonly need are done here, before the
    # worker reports ready, so a request never waits for them.
    engine = Engine(make_runtime(os.environ.get("KCORAL_WORKER_DEVICE", "cpu")))
    serve(engine)


if __name__ == "__main__":
    main()
