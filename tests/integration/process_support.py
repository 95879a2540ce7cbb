"""Run a command as a terminal would, Ctrl-C it, and find every process it left behind.

``Job`` starts a command in a process group of its own (what a shell does for a foreground
job), so ``interrupt`` sends SIGINT to the whole group, as the terminal does on Ctrl-C. Every
process the command starts inherits a random marker in its environment (``TXNTABLE_TEST_JOB``),
whatever re-parents or regroups it later (a JVM left to PID 1, a local run in a session of its
own), so ``leftovers`` finds them all in ``/proc`` and ``kill_leftovers`` ends them after the
test, so that a failing test never leaks a JVM into the next.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

MARKER = "TXNTABLE_TEST_JOB"


class Job:
    """A command started in its own process group with a marker in its environment."""

    def __init__(
        self,
        argv: Sequence[str],
        directory: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.marker = uuid.uuid4().hex
        self.out = directory / f"job-{self.marker[:8]}.out"
        self.err = directory / f"job-{self.marker[:8]}.err"
        # a job that hangs can be asked where it is (``_dump_stacks``): Python's faulthandler
        # prints every thread's stack on SIGABRT
        environment = {**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {}), MARKER: self.marker}
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                list(argv),
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the job's process group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def wait(self, timeout: float = 180.0) -> int:
        """The exit status; a job still running after ``timeout`` s is killed and fails, with
        where its threads were (Python's and the JVMs') and the end of its stderr."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            jvms = self._dump_stacks()
            self.kill_leftovers()
            self.proc.wait()
            raise AssertionError(
                f"still running {timeout:g} s after Ctrl-C; stderr, with the stacks:\n"
                f"{self.stderr()[-12000:]}\n{jvms}"
            ) from None

    def _dump_stacks(self) -> str:
        """Where a hung job is: every Java thread of its JVMs (``jcmd Thread.print``, returned),
        then every Python thread of the job (SIGABRT, which its faulthandler prints to the
        job's stderr before the process dies)."""
        jvms = []
        for line in self.leftovers("java"):
            pid = line.split()[0]
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                dump = subprocess.run(
                    ["jcmd", pid, "Thread.print"],
                    check=False,
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                jvms.append(f"--- JVM {line}\n{dump.stdout[-20000:]}{dump.stderr[-2000:]}")
        with contextlib.suppress(OSError):
            os.kill(self.proc.pid, signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return "\n".join(jvms)

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def leftovers(self, command_contains: str = "") -> list[str]:
        """``pid command`` of every live process (not a zombie) carrying this job's marker."""
        needle = f"{MARKER}={self.marker}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            zombie = stat[stat.rfind(")") + 2 :].startswith("Z")
            if needle in environ and not zombie and command_contains in command:
                found.append(f"{entry.name} {command[:120]}")
        return found

    def no_leftovers_after(self, grace: float = 30.0) -> list[str]:
        """What is still running ``grace`` s after the job ended (empty as soon as nothing
        is: processes that stop by themselves get the time to)."""
        deadline = time.monotonic() + grace
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def kill_leftovers(self) -> None:
        for line in self.leftovers():
            with contextlib.suppress(OSError):
                os.kill(int(line.split()[0]), signal.SIGKILL)


def wait_until(what: Callable[[], bool], job: Job, timeout: float = 300.0) -> None:
    """Wait for ``what`` while the job runs; fail when it ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while not what():
        if job.proc.poll() is not None:
            raise AssertionError(f"ended ({job.proc.returncode}) first:\n{job.stderr()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:g} s:\n{job.stderr()[-3000:]}")
        time.sleep(0.05)


def blocking_python(directory: Path) -> tuple[Path, Path]:
    """A stand-in for Spark's Python worker (``PYSPARK_PYTHON``) that says it started, by a
    file, and then never answers: a Spark job that reaches it stays in flight until stopped.
    Returns the script and the file it creates."""
    ready = directory / "worker-started"
    script = directory / "blocking-python"
    script.write_text(f"#!/bin/sh\ntouch {ready}\nexec sleep 100000\n")
    script.chmod(0o755)
    return script, ready
