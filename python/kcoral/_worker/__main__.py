"""Worker entry point: `python -m kcoral._worker` (started by kcoral-server)."""

import os
import signal


def main() -> None:
    from kcoral._core import serve
    from kcoral._worker.engine import Engine
    from kcoral._worker.runtime import make_runtime

    import json

    from kcoral import _core
    from kcoral._worker import integrity, sandbox

    fd = int(os.environ["KCORAL_WORKER_FD"])
    spec = json.loads(os.environ.pop("KCORAL_WORKER_SPEC", "{}"))
    try:
        if spec.get("sandbox") is not None:
            # Started without a zygote: this process stays outside as the
            # server's child and waits; its child is pid 2 of the new
            # namespace, beside its pid 1.
            spec = sandbox.complete(spec)
            _core.unshare_pid_namespace()
            init = _core.start_namespace_init()
            child = os.fork()
            if child != 0:
                _, status = os.waitpid(child, 0)
                os.kill(init, signal.SIGKILL)
                os.waitpid(init, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        if spec:
            sandbox.enter(spec, fd)
        # Imports that user programs commonly need are done here, before the
        # worker reports ready, so a request never waits for them.
        device = os.environ.get("KCORAL_WORKER_DEVICE", "cpu")
        engine = Engine(make_runtime(device))
        integrity.bind(device)  # before serve: the first request freezes it
        # Last, so the pages are charged to this worker's own cgroup (--worker-heap-mbytes).
        _core.warm_heap(int(os.environ.get("KCORAL_WORKER_HEAP_BYTES", "0")))
    except BaseException as error:  # noqa: BLE001 - reported to the server, then exit
        sandbox.report_failure(fd, error)
        os._exit(1)
    serve(engine)


if __name__ == "__main__":
    main()
