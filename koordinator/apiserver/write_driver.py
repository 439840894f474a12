"""Runs client writes: at once when no admission webhook is called, else across the webhook calls.

Client writes run as steps (``writer.Steps``): they yield where admission webhooks must be
called, and only when some webhook matches. ``WriteDriver.write`` drives them: to the end at once
when nothing is called (the usual case, no extra cost), else on a task of the event loop that
awaits the calls (made on worker threads) and continues the write after each.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from koordinator.apiserver import errors
from koordinator.apiserver.encoding import Presenter, warning_headers
from koordinator.apiserver.http import HttpConnection, Request, Response
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Store
from koordinator.apiserver.webhooks import Call, Webhooks
from koordinator.apiserver.writer import Steps
from koordinator.apis.selectors import SelectorError

log = logging.getLogger("koordinator.apiserver")


class WriteDriver:
    """Drives write steps for requests, on the server's event loop (``loop``, set once it runs)."""

    def __init__(self, store: Store, hooks: Webhooks, presenter: Presenter,
                 schedule_commit: Callable[[], None]) -> None:
        self.store = store
        self.webhooks = hooks
        self.presenter = presenter
        self.schedule_commit = schedule_commit
        self.loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Task] = set()

    def write(self, req: Request, conn: HttpConnection, rt: ResourceType, steps: Steps, code: int,
              user: dict[str, Any]) -> Response | None:
        """Run a client write: its response now, or None when it continues after webhook calls."""
        try:
            call = next(steps)
        except StopIteration as done:
            return self.presenter.write_response(req, rt, done.value, code, [])
        assert self.loop is not None
        task = self.loop.create_task(self._write_async(req, conn, rt, steps, call, code, user))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return None

    async def _write_async(self, req: Request, conn: HttpConnection, rt: ResourceType, steps: Steps,
                           call: Call, code: int, user: dict[str, Any]) -> None:
        warnings: list[str] = []
        try:
            while True:
                try:
                    outcome = await self.webhooks.run(call, user)
                finally:
                    warnings += call.warnings
                # Back on the loop: the write goes on, and may need more calls.
                call = steps.send(outcome)
        except StopIteration as done:
            try:
                resp = self.presenter.write_response(req, rt, done.value, code, warnings)
            except errors.StatusError as err:
                resp = Response.error(err)
        except errors.StatusError as err:
            resp = Response.error(err)
            resp.headers.update(warning_headers(warnings))
        except SelectorError as err:
            resp = Response.error(errors.bad_request(str(err)))
        except Exception as exc:  # a bug must cost this request only
            log.exception("request failed: %s %s", req.method, req.path)
            resp = Response.error(errors.internal(str(exc)))
        finally:
            steps.close()
        self.store.after_commit(lambda: conn.respond(resp))
        self.schedule_commit()
