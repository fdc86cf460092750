"""Agent Zero plugin hooks: config read/save, install, pre_update, uninstall.

All hooks are sync (Agent Zero runs async hooks through asyncio.run), safe to call twice, and never
raise: Agent Zero deletes a plugin whose install() raises; a raising config hook breaks settings.
"""

import logging
import math
import os
import time

PLUGIN_DIR = os.path.dirname(os.path.abspath(__file__))
PLUGIN_NAME = "honcho"
DEFAULT_CONFIG = os.path.join(PLUGIN_DIR, "default_config.yaml")
GLOBAL_CONFIG = os.path.join(PLUGIN_DIR, "config.json")
# Uninstall's wait for the plugin's threads, in all: a thread whose request still hangs is signalled
# and ends with that request, and the report says it has not stopped yet (Agent Zero's page waits on
# us).
UNINSTALL_WAIT_S = 5.0

log = logging.getLogger("honcho_hub.hooks")


def get_plugin_config(default=None, project_name=None):
    """Saved settings merged over the defaults (Agent Zero hands us the first file, unmerged)."""
    try:
        from usr.plugins.honcho.honcho_hub.settings.effective import read_layers
        from usr.plugins.honcho.honcho_hub.settings.files import merged_config

        project_config = _project_config(project_name) if project_name else None
        layers = read_layers(DEFAULT_CONFIG, GLOBAL_CONFIG, project_config)
        return merged_config(layers.default_config, layers.global_config, layers.project_config)
    except Exception:
        log.exception("honcho: could not merge settings; using Agent Zero's")
        return default


def save_plugin_config(settings=None, project_name=None):
    """Known settings only; never a credential; a project keeps only what it may change."""
    try:
        from usr.plugins.honcho.honcho_hub.settings import files as plugin_config

        return plugin_config.config_to_save(settings, is_project=bool(project_name))
    except Exception:
        log.exception("honcho: settings not saved")
        return None


def install():
    """Install requirements with Agent Zero's interpreter and create or migrate the outbox."""
    try:
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        installed = lifecycle.install_requirements(os.path.join(PLUGIN_DIR, "requirements.txt"))
        outbox = lifecycle.migrate_outbox(_global_settings().outbox_path)
        log.info("honcho install finished: requirements %s (%s), outbox %s", installed.outcome,
                 installed.installer or "no installer ran", outbox)
        return {"requirements": installed.outcome, "installer": installed.installer,
                "outbox": outbox}
    except Exception:
        log.exception("honcho install: incomplete; the plugin stays installed and runs degraded")
        return {"requirements": "error"}


def pre_update():
    """Before `git pull`: drain at most 5 s, then stop this plugin's workers; none starts again
    until the updated modules load (or a bounded time passes: a failed pull reloads nothing)."""
    from usr.plugins.honcho.honcho_hub.delivery.lifecycle import UPDATE_HOLD_S

    return _stop_workers(drain_s=5.0, hold_s=UPDATE_HOLD_S, reason="pre_update")


def uninstall():
    """Stop workers for good (the next message or job-loop tick must not start one); remote memory,
    the outbox file and shared packages are kept."""
    started = time.monotonic()
    report = _stop_workers(drain_s=0.0, hold_s=math.inf, reason="uninstall")
    _stop_hub(UNINSTALL_WAIT_S - (time.monotonic() - started))
    log.info("honcho uninstall: remote memory, the outbox file and installed packages were kept")
    return report


def _stop_workers(drain_s, hold_s, reason):
    try:
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        return lifecycle.stop_workers(drain_s=drain_s, hold_s=hold_s, reason=reason)
    except Exception:
        log.exception("honcho: workers not stopped")
        return {"workers": 0, "drained": 0, "stopped": 0}


def _stop_hub(timeout_s):
    """Every other thread the Hub started (the capture writer, recall's pools), its connections;
    waits at most `timeout_s` for them (none left: each is signalled to stop)."""
    try:
        from usr.plugins.honcho.honcho_hub import hub

        hub.shutdown(max(0.0, timeout_s))
    except Exception:
        log.exception("honcho: the Hub's threads not stopped")


def _global_settings():
    from usr.plugins.honcho.honcho_hub.settings.effective import effective_settings, read_layers

    return effective_settings(read_layers(DEFAULT_CONFIG, GLOBAL_CONFIG),
                              secrets=_agent_zero_secrets(), environ=os.environ)


def _agent_zero_secrets():
    try:
        from helpers.secrets import get_default_secrets_manager  # Agent Zero's; absent outside it

        return get_default_secrets_manager().load_secrets()
    except Exception:
        return {}


def _project_config(project_name):
    from helpers import projects  # Agent Zero's; only called inside Agent Zero

    return projects.get_project_meta(project_name, "plugins", PLUGIN_NAME, "config.json")
