"""Configuration that changes while a role runs: a mounted ConfigMap, or one watched through the API.

Both sources hold ``.current``, the last good configuration as ``{key: parsed document}`` (each key
of the ConfigMap parsed and defaulted by its schema, :mod:`koordinator.apis.config_documents`;
keys a document does not claim, such as koordlet's ``qos-plugin-extra-configs``, stay raw strings).
A new configuration is validated whole before anything changes: a valid one replaces ``.current``
(one reference swap, so readers never see a mix) and is handed to ``on_change``; an invalid one is
logged with the failing field paths, reported as a ``Warning`` Event (reason ``InvalidConfig``)
and in ``koordinator_config_reloads_total{source,result="error"}`` /
``koordinator_config_last_reload_successful{source} 0``, and the last good configuration stays in
force. ``on_change`` is called on the source's thread, also once for the initial configuration;
its exceptions are logged and do not stop the source. Treat the parsed documents as read-only.

:class:`FileConfigSource` watches the volume's directory with
:class:`~koordinator.runtime.dirwatch.DirectoryWatch` (the kubelet swaps a ConfigMap volume's
``..data`` symlink, so only a watch on the directory sees it); after a change, or a periodic
re-check, the files are re-read through their user-visible paths and compared by content hash.
Plain in-place edits (local runs, tests) produce events in the same directory and take the same
path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from typing import Any, Callable

from koordinator.apis import config_documents
from koordinator.apis.schemas import FieldError
from koordinator.runtime.dirwatch import DirectoryWatch
from koordinator.runtime.metrics import RuntimeMetrics

log = logging.getLogger("koordinator.runtime.configsource")

Obj = dict[str, Any]
OnChange = Callable[[dict[str, Any]], None]

#: Event reason for a rejected configuration.
INVALID_CONFIG_REASON = "InvalidConfig"


class ConfigError(Exception):
    """The configuration cannot be used (at start): ``errors`` are the field errors, if any."""

    def __init__(self, message: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(message)
        self.errors = list(errors or [])


def parse_configmap(configmap: str, data: dict[str, str]) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """Validate the ``data`` of ConfigMap ``configmap`` and parse each key: ``(parsed, [])`` or ``(None, errors)``.

    Error paths start with ``data.<key>``. A ConfigMap name that is none of ours is not validated and
    its keys stay raw strings.
    """
    errors = config_documents.validate_configmap({"metadata": {"name": configmap}, "data": data})
    if errors:
        return None, errors
    docs = config_documents.documents_of(configmap)
    by_key = {d.config.get("key"): d for d in docs}
    any_key = next((d for d in docs if d.config.get("anyKey")), None)
    passthrough = {k for d in docs for k in d.config.get("passthroughKeys", ())}
    parsed: dict[str, Any] = {}
    for key, text in data.items():
        doc = by_key.get(key) or (any_key if key not in passthrough else None)
        if doc is None:
            parsed[key] = text
            continue
        # An empty value is an empty document: the defaults (as validate_configmap treats it).
        value, errs = config_documents.validate_document(doc.name, text if text.strip() else {})
        errors += [FieldError(f"data.{key}.{e.path}" if e.path else f"data.{key}", e.message) for e in errs]
        parsed[key] = value
    return (None, errors) if errors else (parsed, [])


def _digest(data: dict[str, str], errors: list[FieldError]) -> str:
    payload = json.dumps([sorted(data.items()), [str(e) for e in errors]], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _key_of(path: str, keys: list[str]) -> str | None:
    """The ConfigMap key a field path ``data.<key>...`` is about (keys may contain dots)."""
    best = None
    for key in keys:
        prefix = f"data.{key}"
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            if best is None or len(key) > len(best):
                best = key
    return best


class _Source:
    """What both sources share: validate, swap or keep, notify, report."""

    def __init__(self, configmap: str, source: str, *, on_change: OnChange | None, recorder: Any,
                 metrics: RuntimeMetrics | None) -> None:
        self.configmap = configmap
        self.source = source
        self.on_change = on_change
        self.recorder = recorder
        self.metrics = metrics or RuntimeMetrics()
        #: The last good configuration, ``{key: parsed document}``; None until one was loaded.
        self.current: dict[str, Any] | None = None
        self._seen: str | None = None   # digest of the last content looked at (good or bad)
        self._good: str | None = None   # digest of the content of .current
        self._lock = threading.RLock()

    def _describe(self, key: str | None) -> str:
        raise NotImplementedError

    def _explain(self, errors: list[FieldError], keys: list[str]) -> str:
        """The errors joined with "; ", each followed by the file (or object) it came from."""
        parts = []
        for e in errors:
            where = self._describe(_key_of(e.path, keys))
            parts.append(f"{e} ({where})" if where else str(e))
        return "; ".join(parts)

    def _process(self, data: dict[str, str], read_errors: list[FieldError], involved: Obj | None, *,
                 initial: bool = False) -> bool:
        """Take in a new snapshot of the data. True if ``.current`` changed.

        With ``initial`` an invalid configuration raises :class:`ConfigError` instead of being reported.
        """
        with self._lock:
            digest = _digest(data, read_errors)
            if digest == self._seen:
                return False
            self._seen = digest
            parsed, errors = (None, read_errors) if read_errors else parse_configmap(self.configmap, data)
            if errors:
                message = self._explain(errors, list(data))
                if initial:
                    raise ConfigError(f"invalid {self.configmap} from {self.source}: {message}", errors)
                self._reject(message, involved)
                return False
            self.metrics.config_reloads_total.labels(self.source, "success").inc()
            self.metrics.config_last_reload_successful.labels(self.source).set(1)
            if digest == self._good:
                log.info("config back to the one in force source=%s configmap=%s", self.source, self.configmap)
                return False
            self._good = digest
            self.current = parsed
            log.info("config %s source=%s configmap=%s keys=%s", "loaded" if initial else "reloaded",
                     self.source, self.configmap, ",".join(sorted(parsed or {})))
            self._notify(parsed)
            return True

    def _reject(self, message: str, involved: Obj | None) -> None:
        kept = "keeping the last good config" if self.current is not None else "no valid config loaded yet"
        log.error("invalid config rejected, %s source=%s configmap=%s: %s", kept, self.source, self.configmap,
                  message)
        if self.recorder is not None and involved is not None:
            try:
                self.recorder.event(involved, "Warning", INVALID_CONFIG_REASON,
                                    f"invalid {self.configmap} from {self.source}, {kept}: {message}")
            except Exception:  # noqa: BLE001 - reporting must never break the source
                log.exception("could not record the InvalidConfig event")
        # Last, so that whoever watches the metric finds the log line written and the event queued.
        self.metrics.config_reloads_total.labels(self.source, "error").inc()
        self.metrics.config_last_reload_successful.labels(self.source).set(0)

    def _notify(self, parsed: dict[str, Any] | None) -> None:
        if self.on_change is None or parsed is None:
            return
        try:
            self.on_change(parsed)
        except Exception:  # noqa: BLE001 - a subscriber's bug must not stop reloads
            log.exception("config subscriber failed source=%s configmap=%s", self.source, self.configmap)


class FileConfigSource(_Source):
    """A ConfigMap mounted as files: ``path`` is the volume directory (one file per key) or one key's file.

    In a directory every entry that is a regular file (or a link to one) is a key; names starting
    with ``.`` are skipped (the kubelet reserves ``..``; editors' swap files start with ``.``). A
    single file is the key named by its basename (or ``key``, for a file named as its owner likes);
    its directory is what is watched. ``configmap``
    names the ConfigMap the files come from and so the schemas they are checked against.
    ``start()`` loads synchronously and raises :class:`ConfigError` if the path is missing or the
    configuration invalid. ``watch=False`` relies on the periodic re-check alone; a role that takes
    its configuration at start only calls :meth:`read` and :func:`parse_configmap` instead. The Warning
    Event for a rejected update needs both ``recorder`` and ``involved_object`` (e.g. the pod or a
    reference to the ConfigMap); without them the rejection is logged and counted only.
    """

    def __init__(self, path: str | os.PathLike, configmap: str, *, on_change: OnChange | None = None,
                 recorder: Any = None, involved_object: Obj | None = None, metrics: RuntimeMetrics | None = None,
                 debounce: float = 0.2, recheck: float | None = 60.0, watch: bool = True,
                 source: str | None = None, key: str | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.key = key
        super().__init__(configmap, source or f"file:{self.path}", on_change=on_change, recorder=recorder,
                         metrics=metrics)
        self.involved_object = involved_object
        self._single = False
        self._dir = self.path
        self._watch: DirectoryWatch | None = None
        self._watch_options = {"debounce": debounce, "recheck": recheck, "watch": watch}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Load the configuration (ConfigError if impossible), then watch for changes."""
        if self._watch is not None:
            return
        self._locate()
        watch = DirectoryWatch(self._dir, self._reload_logged, name=f"config-{os.path.basename(self.path)}",
                               **self._watch_options)
        # Watch before the first read so that no change can fall between the two.
        watch.arm()
        data, errors = self._read()
        try:
            self._process(data, errors, self.involved_object, initial=True)
        except ConfigError:
            watch.stop(5.0)
            raise
        watch.start()
        self._watch = watch

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; joins the watch's threads within ``timeout`` seconds."""
        if self._watch is not None:
            self._watch.stop(timeout)

    @property
    def watching(self) -> bool:
        """Whether changes are watched (inotify or polling), not only re-checked periodically."""
        return self._watch is not None and self._watch.watching

    def read(self) -> tuple[dict[str, str], list[FieldError]]:
        """Read the files once, neither validated nor watched: ``(text by key, errors reading them)``.

        Raises :class:`ConfigError` if the path is neither a file nor a directory.
        """
        self._locate()
        return self._read()

    def _locate(self) -> None:
        """Whether the path is a directory (one file per key) or one key's file; ConfigError if neither."""
        if os.path.isdir(self.path):
            self._single, self._dir = False, self.path
        elif os.path.isfile(self.path):
            self._single, self._dir = True, os.path.dirname(self.path)
        else:
            raise ConfigError(f"config path {self.path}: no such file or directory")

    def reload(self) -> bool:
        """Re-read now (normally done on change events and every ``recheck`` seconds); True if applied."""
        data, errors = self._read()
        return self._process(data, errors, self.involved_object)

    def _reload_logged(self) -> None:
        try:
            self.reload()
        except Exception:  # noqa: BLE001 - keep watching whatever happened
            log.exception("config reload failed source=%s", self.source)

    # -- reading --------------------------------------------------------------------------

    def _describe(self, key: str | None) -> str:
        if key is None:
            return self.path
        return self.path if self._single else os.path.join(self.path, key)

    def _read(self) -> tuple[dict[str, str], list[FieldError]]:
        """The keys and their text, read through the user-visible paths; errors if unreadable."""
        if self._single:
            key = self.key or os.path.basename(self.path)
            try:
                text = _read_text(self.path)
            except FileNotFoundError:
                return {}, [FieldError("", f"{self.path}: no such file")]
            except (OSError, UnicodeDecodeError) as err:
                return {key: ""}, [FieldError(f"data.{key}", _read_error(err))]
            return {key: text}, []
        data: dict[str, str] = {}
        errors: list[FieldError] = []
        for _ in range(5):
            # A kubelet swap between our reads would mix two versions: read again if ..data moved.
            before = _readlink(os.path.join(self._dir, "..data"))
            try:
                data, errors = self._read_dir()
            except FileNotFoundError:
                return {}, [FieldError("", f"{self.path}: no such directory")]
            except OSError as err:
                return {}, [FieldError("", f"{self.path}: {_read_error(err)}")]
            if _readlink(os.path.join(self._dir, "..data")) == before:
                break
        return data, errors

    def _read_dir(self) -> tuple[dict[str, str], list[FieldError]]:
        data: dict[str, str] = {}
        errors: list[FieldError] = []
        with os.scandir(self._dir) as entries:
            names = sorted(e.name for e in entries if not e.name.startswith("."))
        for name in names:
            full = os.path.join(self._dir, name)
            # isfile follows the key -> ..data/key link; a dangling link (a key mid-swap) or a
            # directory is no key.
            if not os.path.isfile(full):
                continue
            try:
                data[name] = _read_text(full)
            except FileNotFoundError:
                continue  # removed since the listing
            except (OSError, UnicodeDecodeError) as err:
                data[name] = ""
                errors.append(FieldError(f"data.{name}", _read_error(err)))
        return data, errors


def _read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def _read_error(err: BaseException) -> str:
    if isinstance(err, UnicodeDecodeError):
        return "is not UTF-8 text (binaryData is not supported for configuration)"
    return f"cannot be read: {getattr(err, 'strerror', None) or err}"


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


class ConfigMapSource(_Source):
    """A ConfigMap watched through the API with a shared ConfigMap informer.

    ``name`` is ``"namespace/name"``, or a bare name with ``namespace=``. The informer should be
    restricted to it (``field_selector="metadata.name=<name>"``); other objects are ignored anyway.
    :meth:`start` registers the handlers and, if the informer has synced, takes in the ConfigMap at
    once; an invalid or missing ConfigMap leaves ``.current`` None (the role runs on its defaults).
    A deleted ConfigMap keeps the last good configuration in force. The ``Warning`` Event for an
    invalid update is recorded on the ConfigMap. :meth:`for_client` builds a source that owns a
    private informer.
    """

    def __init__(self, informer: Any, name: str, *, namespace: str | None = None,
                 on_change: OnChange | None = None, recorder: Any = None, metrics: RuntimeMetrics | None = None,
                 source: str | None = None) -> None:
        if namespace:
            key = f"{namespace}/{name}"
        elif "/" in name:
            key = name
        else:
            raise ValueError(f"ConfigMapSource {name!r}: give 'namespace/name' or namespace=")
        self.namespace, _, self.name = key.partition("/")
        super().__init__(self.name, source or f"configmap:{key}", on_change=on_change, recorder=recorder,
                         metrics=metrics)
        self.key = key
        self.informer = informer
        self._owns_informer = False
        self._registered = False
        self._stopped = False

    @classmethod
    def for_client(cls, client: Any, namespace: str, name: str, **kwargs: Any) -> "ConfigMapSource":
        """A source with its own informer on exactly this ConfigMap (started and stopped with it)."""
        from koordinator.runtime.informer import SharedInformer

        informer = SharedInformer(client, "ConfigMap", namespace=namespace, field_selector=f"metadata.name={name}")
        src = cls(informer, name, namespace=namespace, **kwargs)
        src._owns_informer = True
        return src

    def start(self, sync_timeout: float = 30.0) -> None:
        """Register with the informer and take in the ConfigMap if the informer already has it."""
        with self._lock:
            self._stopped = False
            if not self._registered:
                self.informer.add_handler(on_add=self._on_add, on_update=self._on_update, on_delete=self._on_delete)
                self._registered = True
        if self._owns_informer:
            self.informer.start()
            if not self.informer.wait_for_sync(sync_timeout):
                log.warning("ConfigMap informer not synced after %.0fs, continuing source=%s", sync_timeout,
                            self.source)
        if self.informer.has_synced():
            obj = self.informer.store.get(self.key)
            if obj is None:
                log.warning("ConfigMap %s not found, running without it until it is created", self.key)
            else:
                self._take(obj)

    def stop(self, timeout: float = 5.0) -> None:
        """Ignore further notifications (and stop the informer if this source owns it)."""
        with self._lock:
            self._stopped = True
        if self._owns_informer:
            self.informer.stop(timeout)

    def _describe(self, key: str | None) -> str:
        return f"ConfigMap {self.key}"

    def _explain(self, errors: list[FieldError], keys: list[str]) -> str:
        # Every error is about the one ConfigMap already named in the message.
        return "; ".join(str(e) for e in errors)

    def _ours(self, obj: Any) -> bool:
        md = obj.get("metadata") if isinstance(obj, dict) else None
        return isinstance(md, dict) and f"{md.get('namespace')}/{md.get('name')}" == self.key

    def _take(self, obj: Obj) -> None:
        with self._lock:
            if self._stopped:
                return
            data = obj.get("data") or {}
            if not isinstance(data, dict):
                self._process({}, [FieldError("data", "must be an object of strings")], obj)
                return
            self._process(dict(data), [], obj)

    def _on_add(self, obj: Obj) -> None:
        if self._ours(obj):
            self._take(obj)

    def _on_update(self, old: Obj, new: Obj) -> None:
        if self._ours(new):
            self._take(new)

    def _on_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)  # a DeletedFinalStateUnknown carries the last state
        if not self._ours(obj):
            return
        with self._lock:
            if self._stopped:
                return
            # A re-created ConfigMap is looked at afresh, even with the content seen last.
            self._seen = None
        log.warning("ConfigMap %s deleted, keeping the last good config source=%s", self.key, self.source)
