"""One writer per directory: a lock file holding the owner's pid and host.

A second process that opens the same run or sweep directory fails at once, naming the owner;
a lock left by a process that no longer runs (same host, dead pid) is taken over with a warning.
"""

import json
import os
import pathlib
import socket

from absl import logging

LOCK_NAME = '.lock'


class WorkdirError(RuntimeError):
    """The directory cannot be used as asked (locked by another process, or it holds another run)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkdirLock:
    """Context manager: `with WorkdirLock(dir): ...` holds `dir/.lock` for this process."""

    def __init__(self, directory: os.PathLike):
        self.path = pathlib.Path(directory) / LOCK_NAME
        self._held = False

    def acquire(self) -> None:
        """Takes the lock, or raises `WorkdirError` naming the process that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = {'pid': os.getpid(), 'host': socket.gethostname()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                if owner.get('pid') == me['pid'] and owner.get('host') == me['host']:
                    return  # this process already holds it (a sweep running its runs in-process)
                if owner.get('host') == me['host'] and not _alive(int(owner.get('pid', -1))):
                    logging.warning('Taking over the stale lock %s of process %s (no longer running).',
                                    self.path, owner.get('pid'))
                    self.path.unlink(missing_ok=True)
                    continue
                raise WorkdirError(
                    f'{self.path.parent} is in use by process {owner.get("pid")} on {owner.get("host")} '
                    f'(lock file {self.path}); wait for it to finish, or stop it, then rerun.') from None
            with os.fdopen(fd, 'w') as f:
                json.dump(me, f)
            self._held = True
            return
        raise WorkdirError(f'Could not take the lock {self.path}.')

    def _owner(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._held:
            self.path.unlink(missing_ok=True)
            self._held = False

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
