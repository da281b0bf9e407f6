"""Worker entry point: `python -m kcoral._worker` (started by kcoral-server)."""

import os
import signal


def main() -> None:
    from kcoral import _core
    from kcoral._worker import sandbox

    # The socket is the one thing read from the environment: everything else comes in the
    # server's start message on it (src/ipc/messages.h).
    fd = int(os.environ["KCORAL_WORKER_FD"])
    try:
        # First: this process's settings, which the modules imported below read.
        spec = _core.receive_start(fd)
        from kcoral._worker import bootstrap

        if spec is not None and spec.sandboxed:
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
        if spec is not None:
            sandbox.enter(spec, fd)
        engine = bootstrap.ready_engine()
    except BaseException as error:  # noqa: BLE001 - reported to the server, then exit
        sandbox.report_failure(fd, error)
        os._exit(1)
    _core.serve(engine, fd)


if __name__ == "__main__":
    main()
