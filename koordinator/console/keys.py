"""The console's keyboard: the terminal in cbreak mode (keys arrive one by one, unechoed; Ctrl-C still
interrupts) and a thread that puts each key on a queue, until :meth:`KeyReader.stop` restores the terminal."""

from __future__ import annotations

import os
import queue
import select
import termios
import threading
import tty


class KeyReader:
    """Reads keys from the terminal ``fd`` on a thread of its own; :attr:`keys` receives them as strings."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.keys: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._saved: list | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "KeyReader":
        """Switch the terminal to cbreak mode and start reading."""
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSANOW)
        self._thread = threading.Thread(target=self._run, name="console-keys", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            # A short select timeout, so that stop() is noticed without a key being pressed.
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 64)
            except OSError:
                return
            if not data:
                return
            text = data.decode("utf-8", "replace")
            # An escape sequence (an arrow key) is one key, not an ESC followed by letters.
            if text.startswith("\x1b") and len(text) > 1:
                self.keys.put(text)
                continue
            for ch in text:
                self.keys.put(ch)

    def stop(self) -> None:
        """Stop the thread and restore the terminal as it was."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None
