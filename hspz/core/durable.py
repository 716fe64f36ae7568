"""Every file or folder a command creates, replaces, truncates or removes goes through here.

Four rules, so that no command writes or removes what it did not make:

* `guard`: a path about to be written is never an input.  `register_inputs` (called by
  `outdir.check_disjoint`, which every command runs before any work) records the command's
  inputs; every write here checks its path against each of them, by resolved path and, for
  existing files, by (st_dev, st_ino), so symbolic and hard links are seen through.
* Locks and staged files are opened without following a symbolic link (O_NOFOLLOW), staged
  files exclusively (O_EXCL); a lock file is refused when it is not a regular file, has other
  hard links, or holds bytes that are not an hspZ lock record (`open_lock`, `check_lock`), so a
  lock is never truncated unless hspZ made it.
* `replaced` / `write_file` / `write_text`: a temporary name beside the destination (hidden,
  unique across hosts: uuid4), written, fsynced, renamed, the folder fsynced: the destination
  holds the old bytes or the complete new ones.  `write_new` writes a new file inside a folder
  hspZ made (a stage or build folder), fsynced.
* `make_marked` / `remove_marked`: a folder hspZ makes to stage or build in carries a token file
  (MARK) written when it is made; only a folder carrying it is ever removed, never a path
  matched by name alone (or one a SIGKILL stopped `make_marked` in: nothing but part of
  its MARK).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from hspz.core.errors import InputError, UsageError

MARK = ".hspz-made"
MARK_TEXT = b"hspZ made this folder; it is removed by hspZ only\n"
PathArg = str | os.PathLike

_inputs: list[tuple[str, str]] = []  # (label, path) of the running command's inputs
_keys: dict[object, tuple[str, str]] = {}  # realpath or (st_dev, st_ino) -> (label, path)
_folders: list[tuple[str, str, str]] = []  # input folders: (realpath, label, path)


# --------------------------------------------------------------------------------------------
# Inputs are never written
# --------------------------------------------------------------------------------------------


def register_inputs(inputs: Mapping[str, PathArg | Sequence[PathArg] | None]) -> None:
    """Record the running command's inputs (label -> path(s)) for every later `guard`: their
    resolved paths, inodes and (for folders) resolved folders, so a guard costs one realpath
    and one stat however many inputs there are."""
    for label, paths in inputs.items():
        for p in _paths(paths):
            q = os.fspath(p)
            if (label, q) in _inputs:
                continue
            _inputs.append((label, q))
            _keys.setdefault(os.path.realpath(q), (label, q))
            try:
                st = os.stat(q)
            except (OSError, ValueError):
                continue
            _keys.setdefault((st.st_dev, st.st_ino), (label, q))
            if stat.S_ISDIR(st.st_mode):
                _folders.append((os.path.realpath(q), label, q))


def reset_inputs() -> None:
    """Forget the inputs (a new command starts: `cli.main`)."""
    _inputs.clear()
    _keys.clear()
    _folders.clear()


def input_label(label: str) -> str:
    """An input's flag (`--query`, `RESULT`) as a phrase; other labels are phrases already."""
    return f"the {label} input" if label.startswith("-") or label.isupper() else label


def guard(flag: str, path: PathArg) -> None:
    """Refuse to write `path` when it is, or lies in, a registered input."""
    if not _keys:
        return
    real = os.path.realpath(path)
    hit = _keys.get(real)
    if hit is None:
        try:
            st = os.stat(path)
            hit = _keys.get((st.st_dev, st.st_ino))
        except (OSError, ValueError):
            pass
    if hit is not None:
        label, q = hit
        # another name of the input: its own path first, then what it is ("ref.hard is
        # /x/ref.fa, the reference of --plan"), which cannot read as the value of a flag
        also = "" if os.fspath(path) == q else f"{q}, "
        raise UsageError(
            f"{flag}: {os.fspath(path)} is {also}{input_label(label)}; an input is never written"
        )
    for folder, label, q in _folders:
        if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
            raise UsageError(
                f"{flag}: {os.fspath(path)} lies in {q}, {input_label(label)} "
                f"folder; an input is never written"
            )


def _paths(paths: PathArg | Sequence[PathArg] | None) -> list[PathArg]:
    if paths is None:
        return []
    if isinstance(paths, str | os.PathLike):
        return [paths] if os.fspath(paths) else []
    return [p for p in paths if os.fspath(p)]


def same_file(a: PathArg, b: PathArg) -> bool:
    """One file: the same resolved path, or (existing) the same (st_dev, st_ino)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def within(path: PathArg, folder: PathArg) -> bool:
    """`path` is, or lies below, `folder`, an existing directory."""
    if not os.path.isdir(folder):
        return False
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(folder))
    return rel == os.curdir or not rel.startswith(os.pardir + os.sep) and rel != os.pardir


def os_path(entry: str, folder: PathArg) -> str:
    """`entry` (relative to `folder`, or absolute) as the OS opens it: its folders resolved
    (a `..` after a symbolic link climbs from the link's target, as `open` does), its last
    name kept (a query that is a link stays named as listed)."""
    joined = entry if os.path.isabs(entry) else os.path.join(os.fspath(folder), entry)
    head, name = os.path.split(joined)
    if name in ("", os.curdir, os.pardir):
        return os.path.realpath(joined)
    return os.path.join(os.path.realpath(head or os.curdir), name)


# --------------------------------------------------------------------------------------------
# Locks: never followed through a link, never truncated unless hspZ made them
# --------------------------------------------------------------------------------------------


def open_regular(path: PathArg) -> int:
    """A read-only descriptor of `path` when it is a regular file (a link to one is followed);
    OSError otherwise, never blocking: a FIFO is opened without waiting for a writer and
    refused, as are a device (/dev/zero would be read for ever) and a folder."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(path: PathArg, what: str) -> None:
    """`path`, which a later command will read (a plan's reference, verified by its work jobs),
    refused now unless `open_regular` takes it: one InputError line naming `what`."""
    try:
        os.close(open_regular(path))
    except OSError as exc:
        raise InputError(f"{what}: {os.fspath(path)}: cannot read it: {exc.strerror}") from None


def open_lock(path: PathArg, flag: str) -> int:
    """The descriptor of lock file `path`, created when missing, never through a symbolic
    link; a lock that is not a regular file, or has other hard links, is refused."""
    guard(flag, path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(
                f"{flag}: {os.fspath(path)} is a symbolic link; hspZ writes its "
                f"lock there only as a file of its own"
            ) from None
        raise UsageError(f"{flag}: cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = (
            "not a regular file"
            if not stat.S_ISREG(st.st_mode)
            else f"a file with {st.st_nlink - 1} other hard link(s)"
        )
        raise UsageError(
            f"{flag}: {os.fspath(path)} is {what}; hspZ writes its lock there "
            f"only as a file of its own"
        )
    return fd


def lock_record(**fields: object) -> bytes:
    return (json.dumps(dict(hspz="lock", **fields)) + "\n").encode()


def check_lock(fd: int, path: PathArg, flag: str) -> None:
    """Under the lock: the file is empty or holds an hspZ lock record, else it is a user's
    file that happens to bear the lock's name and is refused (never truncated)."""
    data = os.pread(fd, 1 << 16, 0)
    if not data.strip():
        return
    try:
        record = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        record = None
    if isinstance(record, dict) and "pid" in record and "host" in record:
        return
    raise UsageError(
        f"{flag}: {os.fspath(path)} exists and is not a lock hspZ wrote; hspZ "
        f"never truncates a file it did not make (move it away)"
    )


def write_lock(fd: int, record: bytes) -> None:
    """Record the holder in the lock file `check_lock` accepted."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, record, 0)


def remove_own(path: PathArg, fd: int) -> None:
    """Remove `path` when it is still the file open as `fd` (a lock being let go)."""
    try:
        st, mine = os.stat(path, follow_symlinks=False), os.fstat(fd)
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            os.unlink(path)
    except OSError:
        pass


# --------------------------------------------------------------------------------------------
# Marked folders: the only ones ever removed
# --------------------------------------------------------------------------------------------


def make_marked(path: PathArg, parents: bool = False) -> Path:
    """Create folder `path` (it must not exist) with its MARK token inside."""
    p = Path(path)
    if parents:
        p.parent.mkdir(parents=True, exist_ok=True)
    p.mkdir()
    write_new(p / MARK, MARK_TEXT)
    return p


def ensure_marked(path: PathArg) -> Path:
    """A folder hspZ makes (a stage): made with its MARK when missing; an existing one must
    carry it."""
    p = Path(path)
    try:
        return make_marked(p, parents=True)
    except FileExistsError:
        if not is_marked(p):
            raise UsageError(
                f"{p} exists and was not made by hspZ; it is never written into (move it away)"
            ) from None
        return p


def is_marked(path: PathArg) -> bool:
    """`path` is a folder (not a link) hspZ made: its MARK token is a regular file of ours."""
    p = Path(path)
    try:
        if not stat.S_ISDIR(os.lstat(p).st_mode):
            return False
        st = os.lstat(p / MARK)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(MARK_TEXT):
            return False
        return (p / MARK).read_bytes() == MARK_TEXT
    except OSError:
        return False


def check_holds_no_input(path: PathArg) -> None:
    """Refuse to remove folder `path` when one of the command's inputs lies inside it."""
    inside = os.path.realpath(path).rstrip(os.sep) + os.sep
    for label, q in _inputs:
        if os.path.realpath(q).startswith(inside):
            raise UsageError(
                f"{os.fspath(path)} holds {q}, {input_label(label)}; a folder "
                f"holding an input is never removed (move the input away)"
            )


def remove_marked(path: PathArg) -> bool:
    """Remove folder `path` and all below it when it carries hspZ's MARK; whether it did.  A
    marked folder that holds one of the command's inputs (a reference copied into a killed
    build's DIR.tmp) is refused, never removed."""
    if not is_marked(path):
        return _remove_half_made(Path(path))
    check_holds_no_input(path)
    p = Path(path)
    # the MARK goes last: a removal stopped half-way (a second Ctrl-C) leaves a folder the
    # next command still knows as hspZ's, never one holding files and no mark
    for entry in os.scandir(p):
        if entry.name != MARK:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink(missing_ok=True)
    shutil.rmtree(p, ignore_errors=True)
    return True


def _remove_half_made(p: Path) -> bool:
    """Remove a folder `make_marked` was stopped in (a SIGKILL between its mkdir and its MARK's
    last byte): one holding nothing, or only a MARK whose bytes begin MARK_TEXT, so nothing is
    lost; whether it did.  Never followed through a link; a folder anything else was put in
    meanwhile stays (rmdir refuses it)."""
    try:
        if not stat.S_ISDIR(os.lstat(p).st_mode):
            return False
        names = os.listdir(p)
        if names == [MARK]:
            st = os.lstat(p / MARK)
            if not stat.S_ISREG(st.st_mode) or not MARK_TEXT.startswith((p / MARK).read_bytes()):
                return False
            os.unlink(p / MARK)
        elif names:
            return False
        os.rmdir(p)
    except OSError:
        return False
    return True


def mark(path: PathArg) -> None:
    """Mark a folder hspZ has just published into (a query-list job's folder) as its own."""
    p = Path(path) / MARK
    if not is_marked(path):
        try:
            write_new(p, MARK_TEXT)
        except FileExistsError:
            pass


# --------------------------------------------------------------------------------------------
# Writing: a temporary name, fsync, rename
# --------------------------------------------------------------------------------------------


# open flags of a new file: never an existing one, no link followed
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_new(path: PathArg, data: bytes | memoryview | Callable[[BinaryIO], None]) -> None:
    """Create file `path` (which must not exist: O_EXCL, no link followed) with `data` (or
    what `data(fh)` writes), fsynced."""
    fd = os.open(path, NEW_FILE, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:  # numpy's tofile says only "N requested and M written"
        if exc.filename is not None or exc.strerror is not None:
            raise  # the OS's own words (File too large) are worded by the caller
        raise OSError(
            exc.errno or errno.EIO,
            f"cannot write it ({exc.strerror or exc}; a full disk or a file size limit?)",
            os.fspath(path),
        ) from exc


def create_new(path: PathArg) -> None:
    """Create the empty file `path` (which must not exist), not synced: `write_new` syncs."""
    os.close(os.open(path, NEW_FILE, 0o644))


@contextmanager
def new_file(path: PathArg) -> Iterator:
    """A binary file object on a new file `path` (O_EXCL, no link followed), fsynced when the
    block ends."""
    fd = os.open(path, NEW_FILE, 0o644)
    with os.fdopen(fd, "wb") as fh:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


def temporary_name(path: PathArg) -> Path:
    """A hidden name beside `path`, unique across hosts and PID namespaces."""
    p = Path(path)
    return p.with_name(f".{p.name}.partial-{uuid.uuid4().hex}")


@contextmanager
def replaced(path: PathArg, flag: str = "") -> Iterator[Path]:
    """A temporary name beside `path` to write (created empty, exclusively); synced and renamed
    onto `path` when the block succeeds, removed when it fails (SIGTERM included), so `path`
    holds the old bytes or the complete new ones, never a part.  `path` is checked against the
    inputs first; an OSError becomes one UsageError line (`flag` first, then ': ')."""
    path = Path(path)
    lead = f"{flag}: " if flag else ""
    guard(flag or "output", path)
    if path.is_dir() and not path.is_symlink():
        raise UsageError(f"{lead}{path} is a directory")
    tmp = temporary_name(path)
    try:
        create_new(tmp)  # not synced empty: it is synced once written, before the rename
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise UsageError(f"{lead}cannot write {path}: {exc.strerror or exc}") from exc
        raise


def write_file(path: PathArg, data: bytes | Callable[[BinaryIO], None], flag: str = "") -> None:
    """`path` replaced atomically by `data` (or what `data(fh)` writes)."""
    with replaced(path, flag) as tmp, open(tmp, "wb") as fh:
        if callable(data):
            data(fh)
        else:
            fh.write(data)


def write_text(path: PathArg, text: str, flag: str = "") -> None:
    write_file(path, text.encode("utf-8"), flag)


def append_text(path: PathArg, text: str, flag: str = "") -> None:
    """`path` replaced atomically by its bytes (a regular file, when there is one) and `text`."""
    p = Path(path)
    old = b""
    if p.exists():
        if not p.is_file():
            raise UsageError(f"{flag}: {p} is not a regular file")
        old = p.read_bytes()
    write_file(p, old + text.encode("utf-8"), flag)


def fsync_dir(folder: PathArg) -> None:
    """Make the folder's entries (renames, new files) durable.  A failed sync raises an
    OSError naming the folder (os.fsync's names none: the CLI's line said only
    'Input/output error')."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):  # a file system without it
            raise OSError(exc.errno, f"cannot sync the folder: {exc.strerror}", folder) from exc
    finally:
        os.close(fd)


SYNC_THREADS = 16  # folders synced at once (`fsync_dirs`)


def fsync_dirs(folders: Iterable[PathArg]) -> None:
    """`fsync_dir` of every folder, at once on threads: where a folder's sync waits for the
    disk (a journal commit, a network file system's round trip), concurrent syncs share the
    wait.  Where syncs cost nothing the threads cost a little: 20 folders took 3.5 ms at once
    against 0.7 ms one after another on the H200 machine's /tmp (benchmarks/sync_and_hash.py)."""
    todo = list(dict.fromkeys(os.fspath(f) for f in folders))
    if len(todo) <= 1:
        for folder in todo:
            fsync_dir(folder)
        return
    with ThreadPoolExecutor(min(len(todo), SYNC_THREADS), thread_name_prefix="sync") as pool:
        for done in [pool.submit(fsync_dir, f) for f in todo]:
            done.result()


def holder() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"
