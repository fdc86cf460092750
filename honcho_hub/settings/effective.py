"""The one way the plugin's effective Settings are built: config layers, secrets, environment.

Inside Agent Zero the layers are three config files (`read_layers`), on the command line its
`--config` file; `effective_settings` puts the HONCHO_* variables and secrets on top.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..errors import ConfigFileError
from .config import Settings, build_settings
from .files import load_config_file, read_config_file
from .spec import FIELDS_BY_NAME


class ConfigLayers(NamedTuple):
    """Settings as saved, lowest first: the plugin's defaults file, the global settings, the
    project's."""

    global_config: Mapping[str, Any] | None = None
    project_config: Mapping[str, Any] | None = None
    default_config: Mapping[str, Any] | None = None


def read_layers(default_file: str, global_file: str, project_file: str | None = None, *,
                strict: bool = False) -> ConfigLayers:
    """The config files as layers; a missing file is an empty layer (not saved yet is normal).

    A file that is there but unusable is, by default, an empty layer with one warning; `strict`
    raises ConfigFileError instead, for a caller that would rather keep what it built last (Agent
    Zero may be caught writing the file)."""
    def read(path: str) -> dict[str, Any]:
        if not strict:
            return read_config_file(path)
        try:
            return load_config_file(path)
        except ConfigFileError as exc:
            if exc.missing:
                return {}
            raise

    return ConfigLayers(global_config=read(global_file),
                        project_config=read(project_file) if project_file else None,
                        default_config=read(default_file))


def effective_settings(layers: ConfigLayers, *, secrets: Mapping[str, Any] | None,
                       environ: Mapping[str, str] | None = None,
                       load_secrets: Callable[[], Mapping[str, Any]] | None = None) -> Settings:
    """Settings for (global | project config, secrets, environment): defaults < the defaults file <
    the global settings < the project's allowed settings; then HONCHO_* variables, then secrets.

    `secrets` are the global ones (identity and the API key are global: a project's secrets must
    not switch them); `load_secrets` re-reads them when the key is needed. Never raises on bad
    values: each problem is a warning, logged once."""
    plugin = {name: value for name, value in dict(layers.default_config or {}).items()
              if name in FIELDS_BY_NAME}
    # unknown names here are warned about by build_settings
    plugin.update(layers.global_config or {})
    return build_settings(plugin, secrets, os.environ if environ is None else environ,
                          project_settings=layers.project_config, load_secrets=load_secrets)
