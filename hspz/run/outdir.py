"""The output side of every command: which paths may be written, the lock on OUT, and the
journal that makes a publish atomic as a whole.  Every write it makes goes through `durable`
(the inputs it registers, the lock file's checks, the stage folders' token).

* `check_disjoint`: no output (a file, or a name a publish into a directory replaces or removes)
  is an input, compared by resolved path and, for existing files, by (st_dev, st_ino), so links
  are seen through; two outputs never name one file.  `check_output_file` proves a file can be
  written there.  Both run before any work; a refusal is one UsageError line naming the flags.
* `OutLock`: the exclusive lock on one OUT (`fcntl.flock` on OUT/.hspz.lock), taken before any
  work and held until the command's last publish has ended.  Taking it creates OUT when
  missing (so an OUT that cannot be created or written is refused before any computation) and
  records the holder (pid, host, command, start) in the lock file for a second process to name;
  that process is refused at once, or waits (`--wait`).  A lock holder is the only process
  that writes in OUT, so taking the lock first completes a publish a killed holder left half
  done (`complete`) and then removes the stage folders of runs that died (`sweep`).
* `publish`: moves a complete, synced set of staged files into place.  It writes the journal
  OUT/.hspz-journal (atomically: a temporary name, fsync, rename) naming the stage, every
  (source, destination) move and every stale file to remove, then does the moves and removals,
  syncs, and removes the journal.  While the journal exists OUT is mid-publish; whoever takes
  the lock next repeats the journal's steps (each is idempotent), so a SIGKILL at any instant
  leaves OUT, once the next command has taken its lock, with the complete earlier result or the
  complete new one, never a mixture.

OUT is one lock however many jobs publish into it (query-list mode publishes job folders under one
OUT lock): the lock is per OUT; `run --query-list` publishes a job at a time (the emitter's, as
it completes), `merge` every job in one (`execute.Emitters`, a batch: one journal in OUT whose
moves go into the job folders), so each folder is synced once.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from hspz.core import durable, faults
from hspz.core.durable import fsync_dir, same_file
from hspz.core.errors import RunError, UsageError, interrupts_held
from hspz.run.report import say

DEFAULT_TARBALL = "segments.tar.gz"
LOCK = ".hspz.lock"
JOURNAL = ".hspz-journal"
STAGE_PREFIX = ".hspz-stage-"
RETIRED = ".hspz-retired"  # a query-list run under way: the job entries hspZ wrote (`batch`)
JOURNAL_FORMAT = 1

PathArg = str | os.PathLike


def segments_name(n: int, query_bin: int, ref_bin: int, strand: str) -> str:
    return f"tmp{n}.block{query_bin}.r{ref_bin}.{strand}.segments"


# the names `segments_name` gives, and their -D splits (`emit.Emitter._pieces`)
OUR_NAMES = re.compile(r"tmp\d+\.block\d+\.r\d+\.(plus|minus)(\.split\d+)?\.segments")


def publish_claims(name: str) -> bool:
    """Whether a run or merge into OUT may create, replace or remove the entry `name` of OUT
    (a segments file, the default archive, the lock, the journal, a stage folder)."""
    return (
        bool(OUR_NAMES.fullmatch(name))
        or name in (DEFAULT_TARBALL, LOCK, JOURNAL)
        or name.startswith(STAGE_PREFIX)
    )


JOB_FOLDER = re.compile(r"\d{6}")  # a query-list job's folder in OUT (`joblist.job_name`)


def query_list_claims(name: str) -> bool:
    """Whether a query-list run or merge into OUT may create, replace or remove the entry `name`:
    a job's folder or archive, queries.tsv, the lock, the journal, a stage folder."""
    return (
        bool(JOB_FOLDER.fullmatch(name))
        or bool(re.fullmatch(r"\d{6}\.tar\.gz", name))
        or name in ("queries.tsv", LOCK, JOURNAL, RETIRED)
        or name.startswith(STAGE_PREFIX)
    )


def reserved(name: str) -> bool:
    """An entry of OUT that only a publish itself writes or removes: the lock, the journal,
    a query-list run's record, a stage folder, a segments file, a job's folder or archive,
    queries.tsv.  No output a command is asked for (`-Z PATH`) may take one of these names."""
    return (
        name in (LOCK, JOURNAL, RETIRED, "queries.tsv")
        or name.startswith(STAGE_PREFIX)
        or bool(OUR_NAMES.fullmatch(name))
        or bool(JOB_FOLDER.fullmatch(name))
        or bool(re.fullmatch(r"\d{6}\.tar\.gz", name))
    )


@dataclass(frozen=True)
class Tree:
    """A directory an output writes into, the entries of it the writer may replace or remove
    (by the first component of a path below it), and the output files the writer itself
    produces there (a run's -Z archive: claimed, but not a collision with the run)."""

    path: PathArg
    claims: Callable[[str], bool] = publish_claims
    writes: tuple[PathArg, ...] = ()


# --------------------------------------------------------------------------------------------
# Paths: outputs never inputs
# --------------------------------------------------------------------------------------------


def check_disjoint(
    inputs: Mapping[str, PathArg | Sequence[PathArg] | None],
    outputs: Mapping[str, PathArg | Sequence[PathArg] | None],
    trees: Mapping[str, Tree | None] | None = None,
) -> None:
    """Refuse an output that is an input, or that a tree's writer would replace, and two
    outputs naming one file.  `inputs`: flag (or a phrase: "the reference of --plan") ->
    path(s) read; `outputs`: flag -> file(s) written (a query-list run's per-job dumps: every
    derived name); `trees`: flag -> directory written into.  None values are flags not given.  The
    inputs are registered with `durable`, which checks every later write against them."""
    durable.register_inputs(inputs)
    ins = [(flag, p) for flag, paths in inputs.items() for p in _paths(paths)]
    outs = [(flag, p) for flag, paths in outputs.items() for p in _paths(paths)]
    dirs = [(flag, t) for flag, t in (trees or {}).items() if t is not None]
    for flag, p in [(flag, t.path) for flag, t in dirs] + outs:
        if not os.fspath(p):
            raise UsageError(f"{flag}: an empty path")
    for flag, tree in dirs:
        for in_flag, p in ins:
            if (entry := _claimed_entry(tree, p)) is not None:
                raise UsageError(
                    f"{flag}: publishing into {tree.path} would replace or remove "
                    f"{entry}, {_input(in_flag)}; an input is never written"
                )
            if _within(tree.path, p):
                raise UsageError(
                    f"{flag}: {tree.path} lies in {p}, {_input(in_flag)} folder; "
                    f"an input is never written"
                )
        for out_flag, p in outs:
            entry = _claimed_entry(tree, p)
            if any(same_file(p, w) for w in tree.writes) and (
                entry is None or not reserved(entry.name)
            ):
                continue  # the writer's own file (-Z); never OUT's lock, journal, a stage, ...
            if entry is not None:
                raise UsageError(
                    f"{out_flag}: {p} lies in the {flag} folder under a name its "
                    f"publish replaces or removes ({entry})"
                )
    seen: dict[object, str] = {}  # an output's resolved path and inode -> its flag
    for flag, p in outs:
        durable.guard(flag, p)  # by resolved path, inode and input folder
        keys: list[object] = [os.path.realpath(p)]
        try:
            st = os.stat(p)
            keys.append((st.st_dev, st.st_ino))
        except (OSError, ValueError):
            pass
        for key in keys:
            if key in seen and seen[key] != flag:
                raise UsageError(f"{flag}: {p} is also the {seen[key]} output")
        for key in keys:
            seen.setdefault(key, flag)


_input = durable.input_label
_paths = durable._paths
_within = durable.within


def _claimed_entry(tree: Tree, path: PathArg) -> Path | None:
    """The entry of `tree` that `path` is or lies in, when the tree's writer claims it: by the
    path as given (its folders resolved, so a link in the tree counts) and as resolved."""
    root = os.path.realpath(tree.path)
    given = os.path.abspath(path)
    for where in (
        os.path.join(os.path.realpath(os.path.dirname(given)), os.path.basename(given)),
        os.path.realpath(path),
    ):
        rel = os.path.relpath(where, root)
        first = rel.split(os.sep)[0]
        if first not in (os.curdir, os.pardir) and tree.claims(first):
            return Path(tree.path) / first
    return None


def check_output_file(flag: str, path: PathArg, make_folders: bool = False) -> None:
    """Prove before any work that `path` can be written: not empty, not a directory, its
    folder exists (or, with `make_folders`, its nearest existing ancestor is a folder) and a
    file can be created there."""
    if not os.fspath(path):
        raise UsageError(f"{flag}: an empty path")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag}: {p} is a directory")
    folder = Path(os.path.abspath(p)).parent
    probe = folder
    while not probe.exists() and not probe.is_symlink():
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{flag}: {probe} is not a directory")
    if probe != folder and not make_folders:
        raise UsageError(f"{flag}: cannot write {p}: the folder {folder} does not exist")
    _probe(probe, flag, p)


def _probe(folder: Path, flag: str, target: PathArg) -> None:
    """Create and remove a file in `folder`: the only sure test of writing there (root passes
    every access() check; /proc and read-only mounts refuse only the creation)."""
    name = folder / f".hspz-probe-{uuid.uuid4().hex}"
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(name)
    except OSError as exc:
        raise UsageError(
            f"{flag}: cannot write {target}: {exc.strerror or exc} (in {folder})"
        ) from None


# --------------------------------------------------------------------------------------------
# The lock on OUT
# --------------------------------------------------------------------------------------------


class OutputBusy(UsageError):
    """Another process holds OUT's lock."""


class OutLock:
    """The exclusive lock on OUT, as a context: entered before any work, left when the
    command's last publish has ended.  Entering creates OUT when missing (its missing parents
    too), takes the lock (at once, or after waiting with `wait`), records this process as the
    holder, completes an interrupted publish and removes dead stages, printing one line for
    each it found.  Leaving removes the lock file and, when OUT was created here and is empty,
    OUT again: always after a failure, and after success unless `keep_empty` (OUT is the
    result, even with no files in it)."""

    def __init__(
        self,
        path: PathArg,
        flag: str = "--output",
        wait: bool = False,
        command: str = "",
        keep_empty: bool = True,
    ):
        self.path, self.flag, self.wait, self.keep_empty = path, flag, wait, keep_empty
        self.command = command or "hspZ"
        self.root = Path(os.path.abspath(path)) if os.fspath(path) else Path()
        self.created: list[Path] = []  # folders made here, outermost first
        self.fd: int | None = None

    def __enter__(self) -> OutLock:
        try:
            # a SIGTERM or Ctrl-C between a mkdir, or the lock file's creation, and their
            # records here left OUT behind: held until both are recorded (not while --wait waits)
            with interrupts_held():
                self.created = make_folder(self.path, self.flag)
            with nullcontext() if self.wait else interrupts_held():
                self.fd = self._acquire()
            self._record(self.fd)
            say(complete(self.root))  # may remove a query-list run's stale job folders
            say(sweep(self.root))
            for folder in job_folders(self.root):
                say(complete(folder))
                say(sweep(folder))
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release(failed=kind is not None)

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK

    def _open(self) -> int:
        """The lock file, never through a link nor a user's file (`durable.open_lock`)."""
        if not os.path.lexists(self.lock_path):
            durable.guard(self.flag, self.lock_path)
            try:  # the same probe as before: OUT cannot be written at all
                os.close(
                    os.open(
                        self.lock_path,
                        os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                        0o644,
                    )
                )
            except FileExistsError:
                pass
            except OSError as exc:
                raise UsageError(
                    f"{self.flag}: cannot write in {self.path}: {exc.strerror or exc}"
                ) from None
        return durable.open_lock(self.lock_path, self.flag)

    def _acquire(self) -> int:
        """The lock file's descriptor, locked.  A holder removes the file before it lets go, so
        a waiter that wakes on a removed file tries again on the current one."""
        while True:
            fd = self._open()
            try:
                self._lock(fd)
                current = os.stat(self.lock_path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            except BaseException:
                os.close(fd)
                raise
            mine = os.fstat(fd)
            if current is not None and (current.st_dev, current.st_ino) == (
                mine.st_dev,
                mine.st_ino,
            ):
                try:
                    durable.check_lock(fd, self.lock_path, self.flag)
                except BaseException:
                    os.close(fd)
                    raise
                return fd
            os.close(fd)

    def _lock(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError as exc:  # ENOLCK: a file system without locks; never run unlocked
            raise UsageError(
                f"{self.flag}: cannot lock {self.path}: {exc.strerror or exc}"
            ) from None
        holder = read_holder(self.lock_path)
        if not self.wait:
            raise OutputBusy(
                f"{self.flag}: {self.path} is in use by {holder}; wait for it to "
                f"finish, or pass --wait"
            )
        say(f"output: waiting for {self.path}, in use by {holder}")
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _record(self, fd: int) -> None:
        durable.write_lock(
            fd,
            durable.lock_record(
                pid=os.getpid(),
                host=socket.gethostname(),
                command=self.command[:2000],
                started=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            ),
        )

    def _release(self, failed: bool) -> None:
        if self.fd is not None:
            durable.remove_own(self.lock_path, self.fd)  # while still held: see `_acquire`
            os.close(self.fd)
            self.fd = None
        if failed or not self.keep_empty:
            for folder in reversed(self.created):
                try:
                    folder.rmdir()
                except OSError:  # not empty: it holds something (or someone else's now)
                    break
        self.created = []


def make_folder(path: PathArg, flag: str) -> list[Path]:
    """Create `path` (and its missing parents) as `mkdir -p` would; the folders made, outermost
    first.  One UsageError line for what cannot be a folder."""
    if not os.fspath(path):
        raise UsageError(f"{flag}: an empty path")
    p = Path(os.path.abspath(path))
    missing = []
    probe = p
    while not probe.is_dir():
        if probe.is_symlink() and not probe.exists():
            raise UsageError(
                f"{flag}: {probe} is a symbolic link to {os.readlink(probe)}, which does not exist"
            )
        if probe.exists():
            raise UsageError(f"{flag}: {probe} is not a directory")
        missing.append(probe)
        probe = probe.parent
    made: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:  # made meanwhile by someone else
            if not folder.is_dir():
                raise UsageError(f"{flag}: {folder} is not a directory") from None
            continue
        except OSError as exc:
            for done in reversed(made):
                done.rmdir()
            raise UsageError(f"{flag}: cannot create {path}: {exc.strerror or exc}") from None
        made.append(folder)
    return made


def read_holder(lock_path: Path, patience_s: float = 1.0) -> str:
    """Who holds the lock, as its lock file records it.  The holder writes its record just
    after it takes the lock, so a record missing, unreadable or naming a dead process of this
    host is read again for a moment before it is reported as such."""
    deadline = time.monotonic() + patience_s
    while True:
        record = _parse_record(lock_path)
        live = record is not None and not _dead_here(record)
        if live or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if record is None:
        return "another process (it has not recorded itself)"
    return (
        f"pid {record.get('pid')} on {record.get('host')} since {record.get('started')} "
        f"({record.get('command')})"
    )


def _parse_record(lock_path: Path) -> dict | None:
    try:
        record = json.loads(lock_path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _dead_here(record: dict) -> bool:
    if record.get("host") != socket.gethostname() or not isinstance(record.get("pid"), int):
        return False
    try:
        os.kill(record["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


def job_folders(root: Path) -> list[Path]:
    """The query-list job folders in OUT: each publishes under OUT's lock with a journal of its
    own."""
    return sorted(
        Path(e.path)
        for e in os.scandir(root)
        if JOB_FOLDER.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
    )


def sweep(root: Path) -> str | None:
    """Remove the stage folders in OUT (only a lock holder stages there, so under the lock
    every one belongs to a run that died); only those carrying hspZ's mark (`durable`): a
    folder merely named like one is kept.  A line saying so, or None."""
    stale = sorted(
        e.name
        for e in os.scandir(root)
        if e.name.startswith(STAGE_PREFIX) and durable.remove_marked(root / e.name)
    )
    if stale:
        return (
            f"output: removed {len(stale)} stage folder(s) that stopped runs left in "
            f"{root} ({stale[0]})"
        )
    return None


# --------------------------------------------------------------------------------------------
# Publishing through the journal
# --------------------------------------------------------------------------------------------


def new_stage(root: Path) -> Path:
    """A stage folder's path in OUT: unique across hosts and PID namespaces (uuid4)."""
    return root / f"{STAGE_PREFIX}{uuid.uuid4().hex}"


def publish(
    root: Path,
    stage: Path,
    moves: Sequence[tuple[Path, Path]],
    remove: Iterable[Path],
    digest: str = "",
    folders: Iterable[Path] = (),
) -> None:
    """Move every staged file onto its destination and remove the stale files, as one step
    for any reader that takes OUT's lock (see the module docstring).  The sources must be
    complete and synced.  A destination that is a directory fails before anything moves.
    `folders`: a query-list run's stale job folders, removed with all they hold."""
    check_moves(root, moves)
    journal = dict(
        format=JOURNAL_FORMAT,
        stage=stage.name,
        digest=digest,
        pid=os.getpid(),
        host=socket.gethostname(),
        moves=[[_stored(root, s), _stored(root, d)] for s, d in moves],
        remove=[_stored(root, r) for r in remove] + [_stored(root, f) + "/" for f in folders],
    )
    durable.fsync_dirs(f for f in {stage, *(s.parent for s, _ in moves)} if f.is_dir())
    durable.ensure_marked(stage)
    tmp = stage / f".journal.partial-{uuid.uuid4().hex}"
    durable.write_new(tmp, json.dumps(journal).encode())
    os.replace(tmp, root / JOURNAL)
    fsync_dir(root)
    faults.point("journal")
    _roll(root, journal)


def check_moves(root: Path, moves: Sequence[tuple[Path, Path]]) -> None:
    """Refuse, before anything moves, a destination that is an input or a directory."""
    for _, dst in moves:
        durable.guard("--output", dst)
        if dst.is_dir() and not dst.is_symlink():
            raise RunError(f"cannot write the output in {root}: {dst.name} is a directory")


def journal_of(root: Path) -> dict | None:
    """OUT's journal, or None when there is none; RunError when it cannot be read."""
    path = root / JOURNAL
    try:
        journal = json.loads(path.read_text(encoding="utf-8"))
        if not _well_formed(journal):
            raise ValueError("not a journal of this hspZ")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RunError(
            f"{path}: an interrupted publish's journal cannot be read ({exc}); "
            f"OUT may hold a mixture of two results: remove the journal and rerun"
        ) from None
    return journal


def _well_formed(journal: object) -> bool:
    def strings(xs: object) -> bool:
        return isinstance(xs, list) and all(isinstance(x, str) for x in xs)

    return (
        isinstance(journal, dict)
        and journal.get("format") == JOURNAL_FORMAT
        and isinstance(journal.get("stage"), str)
        and strings(journal.get("remove"))
        and isinstance(journal.get("moves"), list)
        and all(strings(m) and len(m) == 2 for m in journal["moves"])
        and _confined(journal)
    )


_PARTIAL = re.compile(r"\..+\.partial-[0-9a-f]{32}")  # `durable.temporary_name`, emit's too


def _confined(journal: dict) -> bool:
    """What a journal may touch: its stage (a stage name in OUT); removals inside OUT; moves
    from inside OUT, or from a hidden temporary name beside a destination outside OUT.  A
    journal asking for anything else was not written by hspZ and is never followed."""

    def inside(stored: str) -> bool:
        return (
            bool(stored)
            and not os.path.isabs(stored)
            and os.pardir not in Path(stored.rstrip("/")).parts
        )

    return (
        journal["stage"].startswith(STAGE_PREFIX)
        and "/" not in journal["stage"]
        and all(inside(r) for r in journal["remove"])
        and all(
            (inside(s) or _PARTIAL.fullmatch(os.path.basename(s)))
            and (inside(d) or os.path.isabs(d))
            for s, d in journal["moves"]
        )
    )


def complete(root: Path) -> str | None:
    """Finish the publish an interrupted holder's journal describes; a line saying so, or
    None when OUT holds no journal."""
    journal = journal_of(root)
    if journal is None:
        return None
    _roll(root, journal)
    return (
        f"output: completed the publish that an interrupted run (pid {journal.get('pid')} "
        f"on {journal.get('host')}) left in {root}: {len(journal['moves'])} file(s) moved "
        f"in, {len(journal['remove'])} removed, digest {journal.get('digest') or '-'}"
    )


def discard_stage(root: Path, stage: Path) -> bool:
    """Remove a stage folder of OUT (`root`) after a failure, whether True.  A publish stopped
    after its journal was written (an error, or Ctrl-C, between two renames) is completed
    instead: the journal promised it.  Where the journal cannot be read or completed, it and
    the stage stay for the next command to complete (False)."""
    try:
        journal = journal_of(root)
        if journal is not None and journal["stage"] == stage.name:
            complete(root)
    except (OSError, RunError):
        return False
    durable.remove_marked(stage)
    return True


def _roll(root: Path, journal: dict) -> None:
    """Do the journal's moves and removals (skipping what was done), sync, remove the journal,
    then the stage.  Each folder a move or a removal changed (or a folder made for a move was
    made in) is synced once, after all of them, however many jobs' files the journal moves."""
    touched: set[Path] = set()
    for src, dst in journal["moves"]:
        s, d = _located(root, src), _located(root, dst)
        if s.exists() or s.is_symlink():
            _make_folders(d.parent, touched)
            os.replace(s, d)
            touched.add(d.parent)
            faults.point("publish")
        elif not d.exists():
            raise RunError(f"cannot complete the publish into {root}: neither {s} nor {d} exists")
    for name in journal["remove"]:
        gone = _located(root, name.rstrip("/"))
        if name.endswith("/"):  # a query-list run's stale job folder (`job_entries.sweep_stale`)
            if JOB_FOLDER.fullmatch(gone.name) and gone.is_dir() and not gone.is_symlink():
                shutil.rmtree(gone)
        elif not durable.remove_marked(gone) and (not gone.is_dir() or gone.is_symlink()):
            gone.unlink(missing_ok=True)
        touched.add(gone.parent)
    durable.fsync_dirs(touched)
    faults.point("published")
    (root / JOURNAL).unlink()
    fsync_dir(root)
    faults.point("done")
    durable.remove_marked(root / journal["stage"])


def _make_folders(folder: Path, touched: set[Path]) -> None:
    """`folder` and its missing parents made; the folders that gained an entry added to
    `touched`."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
        touched.add(made.parent)


def _stored(root: Path, path: Path) -> str:
    """A journal path: relative to OUT when inside it (OUT may be moved before the roll), else
    absolute."""
    path = Path(os.path.abspath(path))
    return os.path.relpath(path, root) if path.is_relative_to(root) else str(path)


def _located(root: Path, stored: str) -> Path:
    return Path(stored) if os.path.isabs(stored) else root / stored
