"""The remote half of `kcoral run`: uploaded as module `tool_runner`, its `run`
is the program's one `run` instruction (spec/benchmark.md §3.1, §3.3, §3.4).

Self-contained, standard library only: it must work in any worker of any
KCoral server (ours or the reference), whatever is installed there.

In the request's workspace (the worker's current directory, where file
returns are resolved):
- `inputs/` receives the `--send` tar; it is the command's working directory
  and `$KCORAL_DIR`;
- `outputs/` receives the reports (ncu's capture, run-iket's output directory)
  and the `--fetch` copies; the program returns it as the folder `artifacts`.

The command runs with the worker's environment plus the `-e` settings, the
worker's Python `bin` first on `PATH`, stdin on /dev/null, and its stdout and
stderr those of the worker, which the server captures. It stays in the
worker's process group, so a timeout or a cancel that kills the worker kills
it and whatever it started.
"""

import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class ToolError(Exception):
    """The tool cannot run as asked; the client prints the message alone."""


def _note(message):
    print("kcoral: " + message, file=sys.stderr, flush=True)


def _parts(path, what):
    """The components of a relative path with no '', '.', '..' or backslash."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise ToolError("%s: %r is not a relative path" % (what, path))
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ToolError("%s: %r is not a relative path below the working directory" % (what, path))
    return parts


def _mode(st_mode):
    return 0o700 if st_mode & stat.S_IXUSR else 0o600


def _enter(dir_fd, name, create):
    """Opens directory `name` below `dir_fd` without following a symlink."""
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            pass
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _open_below(root, names):
    """Opens the directory `root`/`names[0]`/..., creating each of `names` that
    is missing and following no symlink there; the caller closes the fd."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in names:
            next_fd = _enter(fd, name, create=True)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_file(dir_fd, name, mode, read):
    """Creates `name` (never through a symlink, never over a file) with the
    bytes that `read(size)` gives until it gives none."""
    target = os.open(name, _NEW_FILE_FLAGS, mode, dir_fd=dir_fd)
    try:
        os.fchmod(target, mode)  # whatever the umask
        while True:
            chunk = read(1 << 20)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    finally:
        os.close(target)


def unpack_inputs(data, inputs):
    """Writes the regular files of the tar `data` below the new directory `inputs`."""
    os.mkdir(inputs, 0o700)
    if not data:
        return
    with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r:") as tar:
        for member in tar:
            if not member.isreg():
                raise ToolError("inputs: %r is not a regular file" % member.name)
            parts = _parts(member.name, "inputs")
            fd = _open_below(inputs, parts[:-1])
            try:
                _write_file(fd, parts[-1], _mode(member.mode), tar.extractfile(member).read)
            except FileExistsError:
                raise ToolError("inputs: %r appears twice" % member.name) from None
            finally:
                os.close(fd)


def _resolve(name, env, cwd):
    """The executable `name` stands for: a path with a slash is taken relative
    to `cwd` (the inputs), a bare name is looked up on the command's PATH."""
    if "/" in name:
        path = os.path.join(cwd, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        if os.path.isfile(path):
            raise ToolError("%s is not executable (send it with its exec bit set)" % name)
        raise ToolError("%s is not installed in the remote server environment (no such file in the inputs)" % name)
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise ToolError("%s is not installed in the remote server environment" % name)
    return found


class Tool:
    """What a definition's `run(args, tool)` gets: the directories, the
    environment, and `execute(command) -> exit status` (128+N for signal N)."""

    def __init__(self, inputs, outputs, env, overrides):
        self.inputs = inputs
        self.outputs = outputs
        self.env = env
        self.overrides = overrides

    def fail(self, message):
        raise ToolError(message)

    def append_cuda_bin(self):
        """Appends the CUDA toolkit's bin directories ($CUDA_HOME/bin,
        /usr/local/cuda/bin) to PATH where they are missing, so that ncu and
        compute-sanitizer are found on a server started without them on PATH.
        Appended, they never change what PATH already resolves."""
        entries = [e for e in self.env.get("PATH", "").split(os.pathsep) if e]
        for home in (self.env.get("CUDA_HOME"), self.env.get("CUDA_PATH"), "/usr/local/cuda"):
            if home and os.path.isdir(os.path.join(home, "bin")) and os.path.join(home, "bin") not in entries:
                entries.append(os.path.join(home, "bin"))
        self.env["PATH"] = os.pathsep.join(entries)

    def execute(self, command):
        if not command or not all(isinstance(word, str) for word in command):
            raise ToolError("the command must be a non-empty list of strings")
        executable = _resolve(command[0], self.env, self.inputs)
        sys.stdout.flush()
        sys.stderr.flush()
        process = subprocess.Popen(
            command, executable=executable, cwd=self.inputs, env=self.env, stdin=subprocess.DEVNULL
        )
        try:
            returncode = process.wait()
        finally:
            if process.poll() is None:  # interrupted: leave nothing behind
                process.kill()
                process.wait()
        return 128 - returncode if returncode < 0 else returncode


def _copy_tree(source_fd, target_fd, shown, missing):
    for name in sorted(os.listdir(source_fd)):
        st = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
        rel = shown + "/" + name
        if stat.S_ISDIR(st.st_mode):
            _copy_directory(source_fd, name, target_fd, rel, missing)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(source_fd, name, target_fd, rel, missing)
        else:
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            _note("--fetch: %s is %s; not returned" % (rel, kind))
            missing.append(rel)


def _copy_directory(source_dir_fd, name, target_fd, shown, missing):
    """Copies directory `name` into a directory of the same name below `target_fd`."""
    source = os.open(name, _DIR_FLAGS, dir_fd=source_dir_fd)
    try:
        target = _enter(target_fd, name, create=True)
        try:
            _copy_tree(source, target, shown, missing)
        finally:
            os.close(target)
    finally:
        os.close(source)


def _copy_file(source_dir_fd, name, target_fd, shown, missing):
    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=source_dir_fd)
    try:
        st = os.fstat(source)
        if not stat.S_ISREG(st.st_mode):
            _note("--fetch: %s is not a regular file; not returned" % shown)
            missing.append(shown)
            return
        try:
            _write_file(target_fd, name, _mode(st.st_mode), lambda size: os.read(source, size))
        except FileExistsError:
            pass  # already fetched (a path named twice, or inside a fetched directory)
    finally:
        os.close(source)


def fetch(inputs, outputs, paths):
    """Copies each path (relative to `inputs`) to the same path below
    `outputs`, never through a symlink; returns the paths not fetched."""
    missing = []
    for path in paths:
        parts = _parts(path, "--fetch")
        shown = "/".join(parts)
        fds = []
        try:
            fds.append(os.open(inputs, _DIR_FLAGS))
            for i, name in enumerate(parts):
                try:
                    st = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                except NotADirectoryError:
                    st = None
                here = "/".join(parts[: i + 1])
                if st is None:
                    missing.append(shown)
                    break
                if stat.S_ISLNK(st.st_mode):
                    _note("--fetch %s: %s is a symlink; not followed" % (shown, here))
                    missing.append(shown)
                    break
                last = i == len(parts) - 1
                if not last and not stat.S_ISDIR(st.st_mode):
                    missing.append(shown)
                    break
                if not last:
                    fds.append(os.open(name, _DIR_FLAGS, dir_fd=fds[-1]))
                    continue
                target_fd = _open_below(outputs, parts[:-1])
                try:
                    if stat.S_ISDIR(st.st_mode):
                        _copy_directory(fds[-1], name, target_fd, shown, missing)
                    elif stat.S_ISREG(st.st_mode):
                        _copy_file(fds[-1], name, target_fd, shown, missing)
                    else:
                        _note("--fetch %s: not a regular file or directory; not returned" % shown)
                        missing.append(shown)
                finally:
                    os.close(target_fd)
        except OSError as exc:
            _note("--fetch %s: %s" % (shown, exc.strerror or exc))
            missing.append(shown)
        finally:
            for fd in fds:
                os.close(fd)
    return missing


def _check_arguments(args, overrides, fetch_list):
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ToolError("the command's arguments must be a list of strings")
    if not isinstance(overrides, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()
    ):
        raise ToolError("the environment settings must map strings to strings")
    if not isinstance(fetch_list, list) or not all(isinstance(p, str) for p in fetch_list):
        raise ToolError("the --fetch paths must be a list of strings")


def run(inputs_tar, tool_run, args, env_overrides, fetch_list):
    """Unpacks the inputs, runs the tool, fetches; returns the outcome
    {"returncode": int, "missing": [str]}."""
    _check_arguments(args, env_overrides, fetch_list)
    workspace = os.getcwd()
    inputs = os.path.join(workspace, "inputs")
    outputs = os.path.join(workspace, "outputs")
    unpack_inputs(inputs_tar, inputs)
    os.mkdir(outputs, 0o700)
    env = dict(os.environ)
    env.update(env_overrides)
    env["KCORAL_DIR"] = inputs
    python_bin = os.path.dirname(sys.executable)
    env["PATH"] = python_bin + os.pathsep + env["PATH"] if env.get("PATH") else python_bin
    outcome = tool_run(list(args), Tool(inputs, outputs, env, dict(env_overrides)))
    returncode = int(outcome["returncode"])
    missing = [str(m) for m in outcome.get("missing", [])]
    missing += fetch(inputs, outputs, fetch_list)
    return {"returncode": returncode, "missing": missing}
