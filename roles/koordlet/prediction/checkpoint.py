"""Model checkpoints on disk: one JSON file ``<uid>.json`` per model UID in one directory.

Writes are atomic (a ``.tmp`` file beside, fsync, rename), so a crash leaves the old checkpoint or
the new one, never half of one. Left-over ``.tmp`` files are removed when the directory is read.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Iterator

log = logging.getLogger("koordinator.koordlet.prediction")

SUFFIX = ".json"
TMP_SUFFIX = ".tmp"


def valid_uid(uid: str) -> bool:
    """Whether ``uid`` can name a checkpoint file (no path separators, no hidden or empty name)."""
    return bool(uid) and "/" not in uid and "\\" not in uid and "\0" not in uid and not uid.startswith(".")


class CheckpointStore:
    """The checkpoint directory of the peak predictor."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def path(self, uid: str) -> str:
        """The file of ``uid``'s checkpoint."""
        return os.path.join(self.directory, uid + SUFFIX)

    def save(self, uid: str, document: dict[str, Any]) -> None:
        """Write ``document`` as ``uid``'s checkpoint, atomically. Raises OSError / ValueError."""
        if not valid_uid(uid):
            raise ValueError(f"model UID {uid!r} cannot name a checkpoint file")
        os.makedirs(self.directory, exist_ok=True)
        final = self.path(uid)
        tmp = final + TMP_SUFFIX
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(document, f, separators=(",", ":"), allow_nan=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            _unlink(tmp)
            raise

    def remove(self, uid: str) -> None:
        """Remove ``uid``'s checkpoint if there is one."""
        if valid_uid(uid):
            _unlink(self.path(uid))

    def remove_file(self, path: str) -> None:
        """Remove one file of the directory (an unknown or corrupt checkpoint)."""
        _unlink(path)

    def scan(self) -> Iterator[tuple[str, str, Any]]:
        """Yield ``(uid, path, document-or-error)`` for every file of the directory.

        The third item is the decoded JSON, or an ``Exception`` when the file cannot be read or
        parsed; files not named ``*.json`` give uid ``""``. A missing directory yields nothing.
        """
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        except OSError as err:
            log.warning("cannot list prediction checkpoints in %s: %s", self.directory, err)
            return
        for name in names:
            path = os.path.join(self.directory, name)
            if not os.path.isfile(path):
                continue
            if name.endswith(TMP_SUFFIX):
                log.info("removing unfinished prediction checkpoint %s", path)
                _unlink(path)
                continue
            if not name.endswith(SUFFIX):
                yield "", path, ValueError("not a checkpoint file name (<uid>.json)")
                continue
            uid = name[: -len(SUFFIX)]
            try:
                with open(path, encoding="utf-8") as f:
                    document: Any = json.load(f)
            except (OSError, ValueError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                document = err
            yield uid, path, document


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        log.warning("cannot remove %s: %s", path, err)
