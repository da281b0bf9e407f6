"""The worker zygote: a prepared parent that forks fresh workers in milliseconds.

Started once by kcoral-server (`python -m kcoral._worker.zygote`). It reads
its settings from the server's start message (src/ipc/worker_settings.h;
its workers have them too), then imports what workers need (kcoral's core
and engine, plus the modules of its settings' preload, KCORAL_PRELOAD on the
server, default tvm_ffi and numpy on CPU, torch and numpy on GPU) and then, for every `fork` frame carrying a new
worker socket, forks a child that serves programs on that socket. With one
request per process (the default) this replaces a ~0.1-0.5 s interpreter
start with a fork (DESIGN.md "The GPU machine": fork from a prepared parent).
The zygote never runs user code and reaps its children.
"""

import importlib
import os
import select
import signal
import socket
import sys


_workers: set[int] = set()  # pids this zygote forked; any other child is an orphan
_init_of: dict[int, int] = {}  # sandboxed worker -> its PID namespace's pid 1
_network_of: dict[int, int] = {}  # pid 1 -> the network namespace lent to its worker


def _reap() -> None:
    """Reaps every child that has exited. Called by the main loop only, never from a signal
    handler: SIGCHLD may land on any thread of the zygote (the imports start some), and
    Python then runs its handler only at the main thread's next bytecode, which a main thread
    blocked in recvmsg may never reach. A worker's pid 1 exits only once its worker is reaped,
    and the server waits for that exit: a missed SIGCHLD held a seat for 10 s (issue 41's CI)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        _workers.discard(pid)
        _end_namespace(pid)
    _kill_orphans()


def _end_namespace(pid: int) -> None:
    """A sandboxed worker's pid 1 is killed when the worker is reaped (the
    kernel then kills the rest of its namespace); once pid 1 is reaped too,
    nothing of the namespace is left, and its network namespace can be lent
    again (src/worker/network_namespaces.h)."""
    from kcoral import _core

    init = _init_of.pop(pid, None)
    if init is not None:  # not reaped yet: it exits only after its worker is reaped
        os.kill(init, signal.SIGKILL)
    if pid in _network_of:
        _core.forget_namespace_init(pid)
        network_fd = _network_of.pop(pid)
        if network_fd >= 0:
            _core.release_network_namespace(network_fd)


def _kill_orphans() -> None:
    """The zygote is a child subreaper: what user code started and left behind
    when its unsandboxed worker died is reparented here, not to init, and
    killed (a sandboxed worker's PID namespace does this in the kernel). The
    orphans' own children come back here in turn when they die."""
    for pid in _children():
        if pid not in _workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _children() -> list[int]:
    """This process's live children. The kernel lists them per thread, and
    orphans are reparented to the main thread; /proc is scanned only where
    that list is missing (kernels without CONFIG_PROC_CHILDREN)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:
        pass
    me, found = str(os.getpid()).encode(), []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.isdigit() and fields[1] == me and fields[0] != b"Z":
            found.append(int(entry))
    return found


def _serve_forked(socket_fd: int, spec) -> None:
    from kcoral import _core
    from kcoral._worker import bootstrap, sandbox

    try:
        os.setsid()
        if spec is not None:
            sandbox.enter(spec, socket_fd)
        _core.serve(bootstrap.ready_engine(), socket_fd)
    except BaseException as error:  # noqa: BLE001 - reported to the server, then exit
        sandbox.report_failure(socket_fd, error)
    finally:
        os._exit(0)  # never run the zygote's exit handlers


def main() -> None:
    from kcoral import _core

    control = socket.socket(fileno=int(os.environ["KCORAL_WORKER_FD"]))
    # First: the settings, which the imports below read (kcoral.builtins picks its timer by them).
    _core.receive_start(control.fileno())
    import kcoral.builtins  # noqa: F401 - every worker binds it (integrity.py); import it once here
    from kcoral._worker import bootstrap  # noqa: F401 - imported once here, for every child

    settings = _core.worker_settings()
    device = settings.device
    # GPU: torch only. Some libraries touch CUDA at import, and a CUDA context
    # must never exist in the zygote (a forked child could not use CUDA).
    default = ["torch", "numpy"] if device == "gpu" else ["tvm_ffi", "numpy"]
    for name in settings.preload if settings.preload is not None else default:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    torch = sys.modules.get("torch")
    if torch is not None and device == "gpu":
        from kcoral._worker import warm_up

        warm_up.host(torch)
    if torch is not None and torch.cuda.is_initialized():
        raise SystemExit("kcoral zygote: CUDA was initialized while preloading; cannot fork workers")
    import warnings

    # torch's import starts helper threads; forking before any CUDA use is
    # what DESIGN.md measured (5 ms to the child's first line).
    warnings.filterwarnings("ignore", message=".*use of fork\\(\\) may lead to deadlocks.*")
    from kcoral._worker import sandbox

    sandbox.interpreter_paths()  # once here; every forked worker inherits it
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    # SIGCHLD wakes the loop through a pipe, whichever thread it lands on; the loop reaps.
    woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # the wake-up byte is the news
    control.send(_core.ready_message(os.getpid()))
    while True:
        ready, _, _ = select.select([control, woken], [], [])
        if woken in ready:
            _drain(woken)
            _reap()
        if control not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 65536, 1)
        if not message or len(fds) != 1:
            return  # the server closed the socket
        try:
            spec, failure = sandbox.complete(_core.fork_spec(message)), None
        except Exception as error:  # noqa: BLE001 - the child reports it to the server
            spec, failure = None, error
        sandboxed = spec is not None and spec.sandboxed
        pid, init = -1, None
        try:
            if sandboxed:
                _core.unshare_pid_namespace()
                init = _core.start_namespace_init()  # pid 1 of the new namespace
                _workers.add(init)
                _network_of[init] = spec.network_fd
            pid = os.fork()  # the worker: pid 2 when sandboxed
        finally:
            if sandboxed and pid != 0:
                _core.restore_pid_namespace()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (woken, wake):
                os.close(fd)
            control.close()
            if failure is not None:
                sandbox.report_failure(fds[0], failure)
                os._exit(0)
            _serve_forked(fds[0], spec)
        if init is not None:
            _init_of[pid] = init
        _workers.add(pid)
        os.close(fds[0])
        # The server watches and kills a sandboxed worker through its pid 1.
        control.send(_core.forked_message(pid, init))


def _drain(fd: int) -> None:
    """Empties the non-blocking pipe `fd`."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


if __name__ == "__main__":
    main()
