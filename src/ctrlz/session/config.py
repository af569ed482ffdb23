"""Configuration: defaults, a user TOML file, a workspace TOML file, then ``CTRLZ_<KEY>``.

Later sources override earlier ones key by key, and :class:`Config` remembers where each value
came from, so ``ctrlz config`` can say. Key names follow the seeds where they exist (Capsem's
``auto_max``/``manual_max``/``auto_interval``, Moat's ``disable_*`` triggers,
``idle_threshold_seconds``, ``max_count``, ``delete_initial``, the SnapshotManager's exclusion
and limit keys). A bad file or value is a :class:`ConfigError` naming the key and the file.
"""

from __future__ import annotations

import os

from ..errors import ConfigError
from ..platform import user_dir

# the rules and limits load with the engine that uses them: opening a workspace to list its
# snapshots, or to hand a snapshot to its daemon, never matches a path; and neither ``re`` nor
# ``pathlib`` loads here (~8 ms of a command that the daemon serves: docs/decisions/0010-*.md)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from ..state.ignore.exclude import Rules
    from ..state.scan import Limits

WORKSPACE_FILE = ".ctrlz.toml"
ENV_PREFIX = "CTRLZ_"

DEFAULTS: dict[str, Any] = {
    # what a snapshot covers
    "use_gitignore": True,
    "exclude_patterns": [],
    "exclude_globs": [],
    "force_include": [],
    # limits
    "max_entries": 2_000_000,  # files (folders not counted): a large monorepo fits
    "max_bytes": 2 << 30,
    "max_file_size": 256 << 20,
    # over max_bytes the largest new files are left out and listed; true refuses the snapshot
    "refuse_over_max_bytes": False,
    # pools and retention
    "auto_max": 10,
    "manual_max": 12,
    "safety_max": 10,
    "tool_max": 50,
    "max_count": 100,
    "store_cap": 5 << 30,  # the workspace store's snapshots (not the agents' pre-images)
    "delete_initial": False,
    # agent tool-call pre-images (<store>/toolcalls/), all sessions together; their own budget,
    # so they never push out workspace snapshots
    # (ctrlz.state.store.toolcall_store.DEFAULT_PREIMAGE_CAP)
    "preimage_cap": 1 << 30,
    # automatic snapshots (ctrlz run)
    "auto_interval": 300,
    "idle_threshold_seconds": 30,
    "disable_pre_run": False,
    "disable_git_commits": False,
    "disable_builds": False,
    "disable_idle": False,
    "disable_auto": False,
    "disable_exec": False,
    # the workspace daemon: a resident watcher that keeps snapshots incremental; the CLI and
    # agent hooks start it unless this is false (see ctrlz.session.daemon.daemon)
    "daemon": True,
    "daemon_idle_seconds": 1800,
    # the most inotify watches (one per folder) the daemon takes; 0: as many as the kernel's
    # fs.inotify.max_user_watches leaves. Folders past it are listed at every snapshot
    "daemon_max_watches": 0,
    # the ctrlz service's web gateway on 127.0.0.1 (the next free port when taken; 0: any)
    "gateway_port": 19322,
    # store
    "hash": "blake3",
    # remotes: `[remote] auto_push = "origin"` makes `ctrlz run` and the daemon push new
    # snapshots in the background, at most auto_push_bandwidth bytes per second
    "auto_push": "",
    "auto_push_bandwidth": 8 << 20,
    # `ctrlz run --sandbox` (docs/sandbox.md): `[sandbox] enabled = true` sandboxes every
    # run; the rest are the defaults of --sandbox=MODE, --allow-write, --deny-read, --net and
    # --allow-host (the command line adds to the lists and overrides the rest)
    "sandbox_enabled": False,
    "sandbox_mode": "auto",
    "sandbox_allow_write": [],
    "sandbox_deny_read": [],
    "sandbox_net": "on",
    "sandbox_allow_hosts": [],
}

_SIZE_KEYS = {"max_bytes", "max_file_size", "store_cap", "preimage_cap", "auto_push_bandwidth"}
_SIZE_PATTERN = r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$"
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "ki": 1 << 10,
          "m": 1000**2, "mb": 1000**2, "mib": 1 << 20, "mi": 1 << 20,
          "g": 1000**3, "gb": 1000**3, "gib": 1 << 30, "gi": 1 << 30,
          "t": 1000**4, "tb": 1000**4, "tib": 1 << 40, "ti": 1 << 40}


def user_config_path() -> Path:
    from pathlib import Path

    return Path(user_config_file())


def user_config_file(env: Mapping[str, str] | None = None) -> str:
    """The user's configuration file (``env``: another process's environment, see
    :func:`~ctrlz.platform.user_dir`)."""
    return os.path.join(user_dir("config", env), "config.toml")


def parse_size(value: Any, key: str, source: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key} in {source} must be a size like 5GiB or a number of bytes")
    if isinstance(value, int):
        return value
    import re  # only for a size written as text

    m = re.match(_SIZE_PATTERN, str(value), re.IGNORECASE)
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"{key} in {source} must be a size like 5GiB or a number of bytes, "
                          f"not {value!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _coerce(key: str, value: Any, source: str, from_env: bool) -> Any:
    default = DEFAULTS[key]
    if key in _SIZE_KEYS:
        size = parse_size(value, key, source)
        if size < 0:
            raise ConfigError(f"{key} in {source} must not be negative")
        return size
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if from_env and str(value).lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return str(value).lower() in ("1", "true", "yes", "on")
        raise ConfigError(f"{key} in {source} must be true or false, not {value!r}")
    if isinstance(default, int):
        try:
            number = int(value) if (from_env or isinstance(value, int)) and not isinstance(
                value, bool) else None
        except ValueError:
            number = None
        if number is None or number < 0:
            raise ConfigError(f"{key} in {source} must be a whole number >= 0, not {value!r}")
        return number
    if isinstance(default, list):
        if from_env:
            return [p.strip() for p in str(value).split(",") if p.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key} in {source} must be a list of strings")
        return list(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key} in {source} must be a string")
    return value


class Config:
    """Every setting's value and where it came from (a file, an environment variable, a
    caller, or ``default``)."""

    def __init__(self, values: dict[str, Any] | None = None,
                 sources: dict[str, str] | None = None) -> None:
        self.values: dict[str, Any] = dict(DEFAULTS) if values is None else values
        self.sources: dict[str, str] = (dict.fromkeys(DEFAULTS, "default") if sources is None
                                        else sources)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self.values == other.values and self.sources == other.sources

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was

    def __repr__(self) -> str:
        return f"Config(values={self.values!r}, sources={self.sources!r})"

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def set(self, key: str, value: Any, source: str, from_env: bool = False) -> None:
        if key not in DEFAULTS:
            raise ConfigError(f"unknown key {key!r} in {source}; known keys: "
                              f"{', '.join(sorted(DEFAULTS))}")
        self.values[key] = _coerce(key, value, source, from_env)
        self.sources[key] = source

    @property
    def rules(self) -> Rules:
        from ..state.ignore.exclude import Rules

        return Rules(
            use_gitignore=self["use_gitignore"],
            exclude_patterns=tuple(self["exclude_patterns"]),
            exclude_globs=tuple(self["exclude_globs"]),
            force_include=tuple(self["force_include"]),
        )

    @property
    def limits(self) -> Limits:
        from ..state.scan import Limits

        return Limits(self["max_entries"], self["max_bytes"], self["max_file_size"],
                      self["refuse_over_max_bytes"])

    def to_json(self) -> dict[str, Any]:
        return {k: {"value": self.values[k], "source": self.sources[k]} for k in DEFAULTS}


def _load_file(config: Config, path: str | os.PathLike[str]) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from exc
    import tomllib  # only where there is a file to parse

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    # accept both flat keys and a [ctrlz] / [snapshots] table
    if isinstance(data.get("remote"), dict):  # remote.auto_push = "origin", or [remote]
        data = {**{k: v for k, v in data.items() if k != "remote"}, **data["remote"]}
    if "sandbox" in data:  # [sandbox] mode = "bwrap" is the key sandbox_mode
        table = data["sandbox"]
        if not isinstance(table, dict):
            raise ConfigError(f"sandbox in {path} must be a table: write [sandbox] and its "
                              "keys (mode, allow_write, deny_read, net, allow_hosts) below it")
        data = {**{k: v for k, v in data.items() if k != "sandbox"},
                **{f"sandbox_{k}": v for k, v in table.items()}}
    for table in ("ctrlz", "snapshots"):
        if isinstance(data.get(table), dict):
            data = {**{k: v for k, v in data.items() if k != table}, **data[table]}
    for key, value in data.items():
        config.set(key, value, os.fspath(path))


def load_config(workspace: str | os.PathLike[str] | None = None,
                env: Mapping[str, str] | None = None,
                user_file: str | os.PathLike[str] | None = None) -> Config:
    """The settings of ``workspace`` for a process with environment ``env`` (default: this
    one's), whose user file is ``user_file`` (default: the one ``env`` names)."""
    config = Config()
    if user_file is None and env is not None:
        user_file = user_config_file(env)
    _load_file(config, user_file or user_config_file())
    if workspace is not None:
        _load_file(config, os.path.join(workspace, WORKSPACE_FILE))
    env = os.environ if env is None else env
    for name, value in env.items():
        if name.startswith(ENV_PREFIX):
            key = name[len(ENV_PREFIX):].lower()
            if key in DEFAULTS:
                config.set(key, value, f"${name}", from_env=True)
    return config
