"""Worker processes for work on untrusted bytes: one that crashes, hangs or eats memory is killed
and replaced, and the plugin process never notices.

    run_job(job) -> result      `job.fn(*job.args)` in a worker process, in a lane (below)
    WorkerCrashed               the worker died during the job (signal, abort, exit)

Each worker is a fresh interpreter (`sys.executable -I -c ...`, never a fork of this threaded,
async process), started with an allow-listed environment (no LangBot debug key, registration
capability or runtime URLs), stdin/stdout/stderr on /dev/null (LangBot talks to the plugin over
its stdio: the protocol pipes are moved off fds 0 and 1 before anything else runs), an
address-space cap (RLIMIT_AS) and, on Linux, death with the plugin. Its log records come back
with each answer and are logged here. Plain data crosses: `job.fn` is pickled by reference (a
module-level function), its arguments and result by value.

Lanes: GENERAL_LANES workers take any job; QUICK_LANES take only small jobs, and only when no
general lane is free, for at most QUICK_CAP_S each (then the job is killed there and waits for a
general lane with the rest of its time). A free lane goes to the waiting job whose owner holds
the fewest general lanes (or, for the quick lane, had it longest ago), then to the oldest: one
owner (a knowledge base) never holds every lane while another waits, and a small job always gets
a turn within QUICK_CAP_S per owner ahead of it.

Cancelling `run_job` (the ingest's deadline, its hook cancelled, its KB deleted) kills the worker
running the job at once; the lane starts a fresh one. A worker is replaced after RECYCLE_JOBS jobs
or once its memory passed RECYCLE_RSS_BYTES, and stopped after IDLE_STOP_S without a job.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lucidrag.base import limits

logger = logging.getLogger(__name__)

# The lanes (docs/DESIGN.md "Parse workers" has the measurements behind each number). Two quick
# lanes, not one: with two hostile small files uploading, a third KB's 45-byte file took 8.0 s
# behind both their turns in one quick lane, 2.7 s with two (bench_lanes.py --hostile 2, load 14).
GENERAL_LANES = 2  # any job; as many as the old parse threads (OCR uses every core per page)
QUICK_LANES = 2  # small jobs only, each for at most QUICK_CAP_S: one per hostile small file at once
QUICK_MAX_BYTES = 1 << 20
QUICK_CAP_S = 5.0
# CPU priority (nice) of the workers: below the plugin's own (answers, embedding batches), and a
# long parse below a small file's, so that on a busy machine the quick lane still gets the CPU.
GENERAL_NICE = 10
QUICK_NICE = 5
RECYCLE_JOBS = 200
RECYCLE_RSS_BYTES = 600 << 20
IDLE_STOP_S = 600.0
# What a worker keeps of the plugin's environment: locale, paths and thread-count knobs; never
# LangBot's keys, tokens or URLs.
ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP",
               "SYSTEMROOT", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_MAX_LOG_RECORDS = 50
_HEADER = struct.Struct(">Q")


@dataclass(frozen=True)
class WorkerJob:
    """`fn(*args)` in a worker. `fn` must be importable by name (module level); `owner` is who
    the fairness between lanes counts by; `size` decides whether the quick lane may take it."""
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    owner: str
    size: int


class WorkerCrashed(Exception):
    """The worker process died during the job. `signal_number` is set when a signal ended it
    (SIGKILL also when the kernel killed it for memory); `out_of_memory` when it reported running
    out of its address space before dying."""

    def __init__(self, exit_code: int | None, out_of_memory: bool = False) -> None:
        self.exit_code = exit_code
        self.signal_number = -exit_code if exit_code is not None and exit_code < 0 else None
        self.out_of_memory = out_of_memory
        super().__init__(f"worker died (exit code {exit_code})")

    @property
    def signal_name(self) -> str:
        if self.signal_number is None:
            return ""
        try:
            return signal.Signals(self.signal_number).name
        except ValueError:
            return f"signal {self.signal_number}"


class _DiedIdle(Exception):
    """The worker was dead before it took the job (killed while idle): the job goes to a fresh one."""


class WorkerKilled(Exception):
    """The worker was killed on purpose (its job's time ran out or was cancelled)."""


class WorkerUnavailable(Exception):
    """No worker could be started (the reason is logged)."""


def memory_cap_bytes() -> int:
    return int(limits.PARSE_WORKER_MEMORY_MIB) << 20


# ---------------------------------------------------------------------------------- the worker
def _serve(read_fd: int, write_fd: int, memory_bytes: int, preload: tuple[str, ...], nice: int) -> None:
    """The worker's main loop (in the child): a job per frame, its answer per frame, until EOF."""
    _die_with_parent()
    with contextlib.suppress(AttributeError, OSError):
        os.nice(nice)
    if memory_bytes > 0:
        with contextlib.suppress(ImportError, ValueError, OSError):
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    records: list[tuple[str, int, str]] = []
    _collect_logs(records)
    started = time.perf_counter()
    reader = os.fdopen(read_fd, "rb")
    writer = os.fdopen(write_fd, "wb")
    try:
        for name in preload:
            __import__(name)
    except BaseException:  # noqa: BLE001 - the plugin logs why its workers cannot start
        import traceback

        _send(writer, ("failed", traceback.format_exc()))
        return
    _send(writer, ("ready", os.getpid(), time.perf_counter() - started, _rss()))
    while True:
        request = _receive(reader)
        if request is None:
            return
        fn, args = request
        _send(writer, ("started",))
        records.clear()
        try:
            answer: tuple[Any, ...] = ("ok", fn(*args))
        except MemoryError:
            answer = ("memory", None)
        except BaseException as error:  # noqa: BLE001 - everything goes back to the plugin
            answer = ("raised", _picklable(error))
        try:
            _send(writer, (*answer, list(records), _rss()))
        except MemoryError:
            _send(writer, ("memory", None, [], _rss()))


def _picklable(error: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - an exception type that cannot cross: its text can
        return RuntimeError(f"{type(error).__name__}: {error}")


def _collect_logs(records: list[tuple[str, int, str]]) -> None:
    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if len(records) < _MAX_LOG_RECORDS:
                text = record.getMessage()
                if record.exc_info and record.exc_info[1] is not None:
                    text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
                records.append((record.name, record.levelno, text))

    root = logging.getLogger()
    root.handlers[:] = [Collect(logging.INFO)]
    root.setLevel(logging.INFO)


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the plugin's thread that started it ends (the
    plugin killed), so that a hung worker never outlives it."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(0)


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        try:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        except ImportError:
            return 0


def _send(stream: Any, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: Any) -> Any:
    """The next message, or None at the end of the stream (the other side is gone)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


# ---------------------------------------------------------------------------- the plugin's side
# The worker's first lines: the protocol pipes leave fds 0 and 1, which (with 2) then point to
# /dev/null before anything else is imported; a failure to start is reported as a frame.
_BOOT = """\
import os
r, w = os.dup(0), os.dup(1)
n = os.open(os.devnull, os.O_RDWR)
for f in (0, 1, 2):
    os.dup2(n, f)
os.close(n)
import sys
sys.path[:] = {path!r}
try:
    from lucidrag.base.workers import _serve
except BaseException:
    import pickle, struct, traceback
    d = pickle.dumps(("failed", traceback.format_exc()))
    os.write(w, struct.pack(">Q", len(d)) + d)
    raise SystemExit(1)
_serve(r, w, {memory}, {preload!r}, {nice})
"""


# The plugin's root (lucidrag/ is in it): the runtime has it on sys.path only while it imports the
# plugin's components (HOST_CONTRACT), so a worker gets it first in its own.
_PLUGIN_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_sys_path() -> list[str]:
    return [_PLUGIN_ROOT] + [entry for entry in sys.path if entry != _PLUGIN_ROOT]


def worker_environment() -> dict[str, str]:
    kept = {name: value for name in ENV_ALLOWED if (value := os.environ.get(name)) is not None}
    # glibc reserves 64 MiB of address space per malloc arena, up to 8 per core: on a big machine
    # that alone would reach the RLIMIT_AS cap. Two arenas keep a worker's address space near
    # what it uses.
    return {**kept, "MALLOC_ARENA_MAX": "2"}


class WorkerProcess:
    """One running worker, driven from one thread (its lane's)."""

    def __init__(self, memory_bytes: int, preload: tuple[str, ...], nice: int = 0) -> None:
        boot = _BOOT.format(path=worker_sys_path(), memory=memory_bytes, preload=preload, nice=nice)
        flags = ["-I"] + (["-B"] if sys.dont_write_bytecode else [])
        self.process = subprocess.Popen(
            [sys.executable, *flags, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=worker_environment(), close_fds=True,
            start_new_session=True)  # a Ctrl-C in `lbp run`'s terminal is the plugin's to handle
        self.jobs = 0
        self.rss = 0
        self.killed = False
        try:
            ready = _receive(self.process.stdout)
        except Exception:  # noqa: BLE001 - garbage instead of a frame
            ready = None
        if not (isinstance(ready, tuple) and ready[:1] == ("ready",)):
            self.kill()
            code = self.process.wait()
            why = ready[1] if isinstance(ready, tuple) and ready[:1] == ("failed",) else f"exit code {code}"
            logger.error("a parse worker process could not start: %s", why)
            raise WorkerUnavailable(why)
        _, self.pid, self.start_s, self.rss = ready

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], started: Callable[[], None]) -> Any:
        try:
            _send(self.process.stdin, (fn, args))
            ack = _receive(self.process.stdout)
        except (OSError, ValueError):
            ack = None
        if ack is None and not self.killed:
            self.process.wait()
            raise _DiedIdle()
        if ack is not None:
            started()
        try:
            answer = _receive(self.process.stdout) if ack is not None else None
        except (OSError, ValueError):
            answer = None
        if answer is None:
            code = self.process.wait()
            if self.killed:
                raise WorkerKilled()
            raise WorkerCrashed(code)
        status, value, records, self.rss = answer
        self.jobs += 1
        for name, level, text in records:
            logging.getLogger(name).log(level, "(parse worker) %s", text)
        if status == "ok":
            return value
        if status == "memory":
            raise MemoryError("the worker ran out of memory")
        raise value

    def kill(self) -> None:
        self.killed = True
        with contextlib.suppress(OSError):
            self.process.kill()

    def stop(self) -> None:
        """End the worker (recycled, idle, shutdown): it holds nothing worth a graceful exit, and an
        interpreter with the OCR models loaded takes seconds to tear down."""
        self.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()


@dataclass
class _Run:
    """A job handed to a lane's thread; `done` is called there with (result, error)."""
    job: WorkerJob
    done: Callable[[Any, BaseException | None], None]
    started: Callable[[], None]  # the worker took the job
    worker: WorkerProcess | None = None
    cancelled: bool = False


@dataclass
class _Lane:
    quick: bool
    preload: tuple[str, ...]
    inbox: queue.SimpleQueue[_Run | None] = field(default_factory=queue.SimpleQueue)
    worker: WorkerProcess | None = None
    holder: str | None = None
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="lucidrag-parse-lane", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        with contextlib.suppress(Exception):  # started ahead: the first file finds it ready
            self._ready_worker()
        while True:
            try:
                run = self.inbox.get(timeout=IDLE_STOP_S)
            except queue.Empty:
                self._retire()  # idle: the memory goes back until the next job
                continue
            if run is None:
                self._retire()
                return
            try:
                result = self._call(run)
            except BaseException as error:  # noqa: BLE001 - handed to the waiting coroutine
                run.done(None, error)
            else:
                run.done(result, None)
            self._after_job()

    def _call(self, run: _Run) -> Any:
        try:
            return self._worker_for(run).call(run.job.fn, run.job.args, run.started)
        except _DiedIdle:
            pass
        worker = self._worker_for(run)  # once more, on a fresh worker
        try:
            return worker.call(run.job.fn, run.job.args, run.started)
        except _DiedIdle:
            raise WorkerCrashed(worker.process.returncode) from None

    def _worker_for(self, run: _Run) -> WorkerProcess:
        worker = self._ready_worker()
        with self.lock:
            if run.cancelled:
                raise WorkerKilled()
            run.worker = worker
        return worker

    def _ready_worker(self) -> WorkerProcess:
        with self.lock:
            worker = self.worker
        if worker is not None and worker.process.poll() is None and not worker.killed:
            return worker
        if worker is not None:
            worker.process.wait()
        fresh = WorkerProcess(memory_cap_bytes(), self.preload, QUICK_NICE if self.quick else GENERAL_NICE)
        with self.lock:
            self.worker = fresh
        return fresh

    def _after_job(self) -> None:
        with self.lock:
            worker = self.worker
        if worker is None:
            return
        if worker.killed or worker.process.poll() is not None:
            worker.process.wait()
            with self.lock:
                self.worker = None
        elif worker.jobs >= RECYCLE_JOBS or worker.rss > RECYCLE_RSS_BYTES:
            self._retire()
        if self.inbox.empty():  # the next job finds a worker started
            with contextlib.suppress(Exception):
                self._ready_worker()

    def _retire(self) -> None:
        with self.lock:
            worker, self.worker = self.worker, None
        if worker is not None:
            worker.stop()

    def cancel(self, run: _Run) -> None:
        """`run` is no longer wanted: its worker is killed (or it never starts)."""
        with self.lock:
            run.cancelled = True
            run.done, run.started = _ignore, _nothing
            if run.worker is not None:
                run.worker.kill()


@dataclass
class _Waiter:
    owner: str
    quick_ok: bool
    seq: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[_Lane]


class _Pool:
    """The lanes, and who waits for them (fairly: see the module's docstring). Lanes live as long
    as the process; waiters belong to the event loop that made them."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        self.lanes = [_Lane(quick=False, preload=preload) for _ in range(GENERAL_LANES)] + [
            _Lane(quick=True, preload=preload) for _ in range(QUICK_LANES)]
        self.lock = threading.Lock()
        self.waiting: list[_Waiter] = []
        self.seq = itertools.count()
        self.quick_turn: dict[str, int] = {}  # owner → when it last got the quick lane
        for lane in self.lanes:
            lane.start()

    async def acquire(self, owner: str, quick_ok: bool) -> _Lane:
        loop = asyncio.get_running_loop()
        with self.lock:
            waiter = _Waiter(owner, quick_ok, next(self.seq), loop, loop.create_future())
            self.waiting.append(waiter)
            self._grant()
        try:
            return await waiter.future
        except asyncio.CancelledError:
            with self.lock:
                if waiter in self.waiting:
                    self.waiting.remove(waiter)
                elif waiter.future.done() and not waiter.future.cancelled():
                    self._free(waiter.future.result())
            raise

    def release(self, lane: _Lane) -> None:
        with self.lock:
            self._free(lane)

    def _free(self, lane: _Lane) -> None:
        lane.holder = None
        self._grant()

    def _grant(self) -> None:
        """Hand every free lane to the waiter it is owed to (called with the lock held)."""
        for lane in sorted(self.lanes, key=lambda ln: ln.quick):  # the quick lane last: no cap elsewhere
            if lane.holder is not None:
                continue
            self.waiting = [w for w in self.waiting if not w.loop.is_closed() and not w.future.done()]
            candidates = [w for w in self.waiting if w.quick_ok or not lane.quick]
            if not candidates:
                continue
            if lane.quick:
                chosen = min(candidates, key=lambda w: (self.quick_turn.get(w.owner, -1), w.seq))
                self.quick_turn[chosen.owner] = next(self.seq)
            else:
                held = {}
                for other in self.lanes:
                    if other.holder is not None and not other.quick:
                        held[other.holder] = held.get(other.holder, 0) + 1
                chosen = min(candidates, key=lambda w: (held.get(w.owner, 0), w.seq))
            self.waiting.remove(chosen)
            lane.holder = chosen.owner
            chosen.loop.call_soon_threadsafe(_resolve, chosen.future, lane)

    def shutdown(self) -> None:
        for lane in self.lanes:
            with lane.lock:
                worker = lane.worker
            if worker is not None:
                worker.kill()
            lane.inbox.put(None)


def _resolve(future: asyncio.Future[_Lane], lane: _Lane) -> None:
    if not future.done():
        future.set_result(lane)
    elif future.cancelled():  # cancelled after the grant: the lane goes to the next waiter
        _POOL_OWNER.release(lane)


class _PoolHolder:
    def __init__(self) -> None:
        self.pool: _Pool | None = None
        self.preload: tuple[str, ...] = ()
        self.lock = threading.Lock()

    def get(self) -> _Pool:
        with self.lock:
            if self.pool is None:
                self.pool = _Pool(self.preload)
            return self.pool

    def release(self, lane: _Lane) -> None:
        if self.pool is not None:
            self.pool.release(lane)

    def shutdown(self) -> None:
        with self.lock:
            pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown()


_POOL_OWNER = _PoolHolder()
atexit.register(_POOL_OWNER.shutdown)


def preload_in_workers(*modules: str) -> None:
    """Modules every worker imports when it starts (before its first job)."""
    _POOL_OWNER.preload = tuple(dict.fromkeys(_POOL_OWNER.preload + modules))


def shutdown_workers() -> None:
    """Kill every worker (the plugin stops; tests). The next job starts them again."""
    _POOL_OWNER.shutdown()


def worker_pids() -> list[int]:
    """The pids of the running workers (tests, the console)."""
    pool = _POOL_OWNER.pool
    if pool is None:
        return []
    pids = []
    for lane in pool.lanes:
        with lane.lock:
            if lane.worker is not None and lane.worker.process.poll() is None:
                pids.append(lane.worker.process.pid)
    return pids


def general_lane_holders() -> list[str]:
    """The owners holding a general lane now, sorted (tests, the console)."""
    pool = _POOL_OWNER.pool
    if pool is None:
        return []
    with pool.lock:
        return sorted(lane.holder for lane in pool.lanes if not lane.quick and lane.holder is not None)


async def run_job(job: WorkerJob) -> Any:
    """`job.fn(*job.args)` in a worker process (see the module's docstring). Raises what the job
    raised, or WorkerCrashed; cancelled, it kills the worker."""
    pool = _POOL_OWNER.get()
    if job.size <= QUICK_MAX_BYTES:
        lane = await pool.acquire(job.owner, quick_ok=True)
        try:
            return await _run_on(lane, job, QUICK_CAP_S if lane.quick else None)
        except _PastCap:
            pass  # past the quick lane's time: on to a general lane, with the time left
        finally:
            pool.release(lane)
    lane = await pool.acquire(job.owner, quick_ok=False)
    try:
        return await _run_on(lane, job)
    finally:
        pool.release(lane)


class _PastCap(Exception):
    """The job ran past the quick lane's time (its worker was killed)."""


async def _run_on(lane: _Lane, job: WorkerJob, cap_s: float | None = None) -> Any:
    """The job's result from `lane`; with `cap_s`, at most that long from when its worker took it
    (a worker's start is not the job's time)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    began = asyncio.Event()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def done(result: Any, error: BaseException | None) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, result, error)

    def started() -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(began.set)

    run = _Run(job, done, started)
    lane.inbox.put(run)
    try:
        if cap_s is None:
            return await asyncio.shield(future)
        beginning = asyncio.ensure_future(began.wait())
        try:
            await asyncio.wait((future, beginning), return_when=asyncio.FIRST_COMPLETED)
        finally:
            beginning.cancel()
        try:
            async with asyncio.timeout(cap_s):
                return await asyncio.shield(future)
        except TimeoutError:
            lane.cancel(run)
            raise _PastCap() from None
    except asyncio.CancelledError:
        lane.cancel(run)
        raise


def _ignore(result: Any, error: BaseException | None) -> None:
    pass


def _nothing() -> None:
    pass
