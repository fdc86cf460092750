"""Agent Zero plugin hooks: config read/save, install, pre_update, uninstall, project_deleted.

All hooks are sync (Agent Zero runs async hooks through asyncio.run), safe to call twice, and never
raise: Agent Zero deletes a plugin whose install() raises; a raising config hook breaks settings.
v2.x passes the config hooks `hook_context={"caller": "ui" | "agent" | "api"}`; v1.7 passes none.
"""

import logging
import os

PLUGIN_DIR = os.path.dirname(os.path.abspath(__file__))
PLUGIN_NAME = "honcho"
DEFAULT_CONFIG = os.path.join(PLUGIN_DIR, "default_config.yaml")
GLOBAL_CONFIG = os.path.join(PLUGIN_DIR, "config.json")
# Uninstall's wait for the plugin's threads, in all: a thread whose request still hangs is signalled
# and ends with that request, and the report says it has not stopped yet (Agent Zero's page waits on
# us).
UNINSTALL_WAIT_S = 5.0
AGENT_CALLER = "agent"  # hook_context's caller when the agent itself reads or saves settings

log = logging.getLogger("honcho_hub.hooks")


def get_plugin_config(default=None, project_name=None, hook_context=None):
    """Saved settings merged over the defaults (Agent Zero hands us the first file, unmerged); the
    same for every caller."""
    try:
        from usr.plugins.honcho.honcho_hub.settings.effective import read_layers
        from usr.plugins.honcho.honcho_hub.settings.files import merged_config

        project_config = _project_config(project_name) if project_name else None
        layers = read_layers(DEFAULT_CONFIG, GLOBAL_CONFIG, project_config)
        return merged_config(layers.default_config, layers.global_config, layers.project_config)
    except Exception:
        log.exception("honcho: could not merge settings; using Agent Zero's")
        return default


def save_plugin_config(settings=None, project_name=None, hook_context=None):
    """Known settings only; never a credential; a project keeps only what it may change. Nothing
    when the agent asks (v2.x): these settings say where the API key and the memory go, and an
    agent can be talked into anything by what it reads."""
    if isinstance(hook_context, dict) and hook_context.get("caller") == AGENT_CALLER:
        log.warning("honcho: the agent asked to save the plugin's settings; refused (change them"
                    " in the settings page)")
        return None
    try:
        from usr.plugins.honcho.honcho_hub.settings import files as plugin_config

        return plugin_config.config_to_save(settings, is_project=bool(project_name))
    except Exception:
        log.exception("honcho: settings not saved")
        return None


def install():
    """Install requirements with Agent Zero's interpreter, upgrade what the Hub's honcho 1.x left,
    and create or migrate the outbox; after an update's pull (Agent Zero runs this right after it),
    delivery resumes with the code loaded."""
    report = {"requirements": "error"}
    try:
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        installed = lifecycle.install_requirements(os.path.join(PLUGIN_DIR, "requirements.txt"))
        upgraded = _upgrade_1x()
        outbox = lifecycle.migrate_outbox(_global_settings().outbox_path)
        log.info("honcho install finished: requirements %s (%s), outbox %s, %s",
                 installed.outcome, installed.installer or "no installer ran", outbox, upgraded)
        report = {"requirements": installed.outcome, "installer": installed.installer,
                  "outbox": outbox, "upgrade_1x": upgraded}
    except Exception:
        log.exception("honcho install: incomplete; the plugin stays installed and runs degraded")
    report["delivery"] = _resume_after_update()
    return report


def _upgrade_1x():
    """The Hub's honcho 1.x config files rewritten under our names (once; docs/upgrading-from-1x.md)
    as one line."""
    try:
        from usr.plugins.honcho.extensions.honcho_bridge import host

        return "; ".join(host.upgrade_1x_configs()) or "nothing to upgrade"
    except Exception:
        log.exception("honcho install: the 1.x settings not upgraded (they are still read)")
        return "error"


def pre_update():
    """Before `git pull`: drain at most 5 s, then stop this plugin's workers; none starts again
    until the install hook that follows the pull (or a reload of the plugin) ends the hold, or a
    short time passes (a failed pull runs no install)."""
    from usr.plugins.honcho.honcho_hub.delivery.lifecycle import UPDATE, UPDATE_HOLD_S

    return _stop_workers(drain_s=5.0, hold_s=UPDATE_HOLD_S, reason=UPDATE)


def uninstall():
    """Stop workers for good (the next message or job-loop tick must not start one); remote memory,
    the outbox file and shared packages are kept."""
    try:
        from usr.plugins.honcho.honcho_hub import hub

        report = hub.halt("uninstall", UNINSTALL_WAIT_S)
    except Exception:
        log.exception("honcho: the plugin's threads not stopped")
        report = {"workers": 0, "drained": 0, "stopped": 0}
    log.info("honcho uninstall: remote memory, the outbox file and installed packages were kept")
    return report


def project_deleted(project_name=None):
    """v2.x, after Agent Zero deleted a project (its folder with the plugin's settings for it):
    drop what this process cached for the project. Its memory stays in Honcho: the project's chats'
    sessions and its scope are the user's (docs/reference.md, Lifecycle and persistence)."""
    report = {"project": project_name, "dropped": 0, "memory": "kept"}
    if not isinstance(project_name, str) or not project_name:
        return report
    try:
        from usr.plugins.honcho.extensions.honcho_bridge import host

        report["dropped"] = host.forget_project(project_name)
        log.info("honcho: a project was deleted; %d cached entries dropped, its memory kept in"
                 " Honcho", report["dropped"])
    except Exception:
        log.exception("honcho: the deleted project's cached settings not dropped")
    return report


def _stop_workers(drain_s, hold_s, reason):
    try:
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        return lifecycle.stop_workers(drain_s=drain_s, hold_s=hold_s, reason=reason)
    except Exception:
        log.exception("honcho: workers not stopped")
        return {"workers": 0, "drained": 0, "stopped": 0}


def _resume_after_update():
    """What install did for delivery: "resumed" after an update's pull, "held" when another hold
    (a switch-off, an uninstall) still keeps the threads stopped, "no_update" on a first install.
    Agent Zero reloads nothing on an update: the code loaded now (the old one, or the new one where
    its file watcher reloaded the plugin) runs until Agent Zero restarts; status says when that is
    needed."""
    try:
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        if not lifecycle.end_update_hold():
            return "no_update"
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import resume_threads

        return resume_threads("update")
    except Exception:
        log.exception("honcho install: delivery not resumed; the job loop brings it back")
        return "error"


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
