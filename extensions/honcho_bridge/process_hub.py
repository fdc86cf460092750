"""The process's Hub as Agent Zero sees it: global settings, enabled state, project secrets, how a
notice is shown, and what Agent Zero's toggle of the plugin does to the Hub's threads.

The other bridge modules ask this one for the Hub; it configures it from `host` on every ask.
"""

from __future__ import annotations

import threading
from typing import Any

from usr.plugins.honcho.honcho_hub import hub as hub_module
from usr.plugins.honcho.honcho_hub.delivery import lifecycle
from usr.plugins.honcho.honcho_hub.errors import OutboxUnavailable
from usr.plugins.honcho.honcho_hub.hub import Hub
from usr.plugins.honcho.honcho_hub.runtime import in_background
from usr.plugins.honcho.honcho_hub.settings.config import Settings
from usr.plugins.honcho.honcho_hub.storage import memory_log

from . import host, notices
from .host import PLUGIN_NAME

SWITCHED_OFF = "switch-off"  # the reason of the hold that keeps the threads stopped while off
# How long switching off waits for the threads in all (Agent Zero's toggle request waits on us): one
# still finishing a request to Honcho is signalled and ends with it.
SWITCH_OFF_WAIT_S = 2.0
# plugins.toggle_plugin's parameters, in order (Agent Zero v1.7 and v2.x)
TOGGLE_PARAMETERS = ("plugin_name", "enabled", "project_name", "agent_profile", "clear_overrides")
_upgrade_started = threading.Event()  # set once this module generation has started the upgrade
# Set while run_ui's start (init_a0) runs: Agent Zero v1.7 loads the saved chats (our agent_init)
# and starts the job loop before it registers its file watchers at init_a0's end, and a file written
# in a watched folder (the plugin's own, each project's) while a watcher is being registered can
# deadlock that start. Our extensions at init_a0's start and end set and clear it; @extensible runs
# the end whether init_a0's body raised or not. Agent Zero keys both by the module, `__main__`: a
# process not started as `python run_ui.py` (the harness, the command line, tests, run_ui imported)
# runs neither, and registers no watchers there either, so nothing waits. Not a timer: Agent Zero's
# own start and end, in order.
_ui_starting = threading.Event()


def hub() -> Hub:
    """The Hub, told where Agent Zero keeps the global settings (cheap: every adapter asks for
    it)."""
    return hub_module.current().reconfigure(settings=global_settings, enabled=plugin_enabled,
                                            replay_secrets=host.project_secrets,
                                            notify=notices.show)


def model_called() -> None:
    """Before a main model call: the passes a typed message held go now (prompt_window). Cheap, on
    the event loop: no settings, no I/O."""
    hub_module.current().prompt_window.model_called()


def keep_record(the_hub: Hub, settings: Settings, write: memory_log.MemoryWrite) -> None:
    """Keep a memory write in the local record, but not while purged: a record would create the
    purged outbox again. A remember's lifetime lives only there, so one is refused then
    (OutboxUnavailable): the tool's answer says the memory will not expire."""
    if not the_hub.purged():
        memory_log.keep(settings, write)
    elif write.lifetime_s is not None:
        raise OutboxUnavailable("memory is purged in this Agent Zero: no lifetime is kept")


def ensure_worker():
    """Idempotent and cheap: called by agent_init, job_loop and the capture adapters. The first
    call of this module generation also upgrades what the Hub's honcho 1.x left (after its folder's
    git remote was switched to this plugin, no install hook runs), unless run_ui's start is still
    under way: then its end does (ui_start_ended)."""
    the_hub = hub()
    if not _ui_starting.is_set():
        _start_upgrade(the_hub)
    return the_hub.ensure_worker()


def ui_start_began() -> None:
    """run_ui's init_a0 begins: until it ends, the upgrade from 1.x writes nothing."""
    _ui_starting.set()


def ui_start_ended() -> bool:
    """run_ui's init_a0 ends, after Agent Zero registered its file watchers: the upgrade from 1.x
    starts now unless it has already; whether it started."""
    _ui_starting.clear()
    return _start_upgrade(hub())


def _start_upgrade(the_hub: Hub) -> bool:
    """The upgrade from 1.x, once a module generation, off the caller's thread (it reads, writes
    and waits on each file's lock); not while a hold keeps the plugin's threads stopped (a
    switch-off, an update, an uninstall). Whether it started."""
    if _upgrade_started.is_set() or not the_hub.may_start():
        return False
    _upgrade_started.set()
    in_background("upgrade-1x", host.upgrade_1x_configs)
    return True


def keep_worker():
    """The job loop's tick, which Agent Zero runs only while the plugin is on for everyone: a
    switch-off's hold whose switch-on ran no extension of ours (a toggle file changed by hand) ends
    here, then the worker is brought back. Asked again, not assumed: a tick under way when the
    plugin was switched off must not lift the new hold."""
    if lifecycle.restart_held() and plugin_enabled():
        lifecycle.release_hold(SWITCHED_OFF)
    return ensure_worker()


def global_settings() -> Settings:
    """Delivery settings are global: no agent, no project (cached: see host.settings_for)."""
    return host.global_settings()


def plugin_enabled() -> bool:
    """Whether the plugin is on for everyone; the worker asks before each step (a toggle file
    written by hand calls no extension)."""
    from helpers import plugins

    return PLUGIN_NAME in plugins.get_enabled_plugins(None)


def before_toggle(data: Any) -> str:
    """At the start of Agent Zero's `toggle_plugin`, while the plugin is still on (once it is off,
    Agent Zero runs none of its extensions, the end of that same call included): switched off for
    everyone, every thread of the plugin stops now and stays stopped until it is switched on. A
    toggle for one project or agent profile stops nothing: Agent Zero then runs no extension of
    ours for that scope's chats. Returns what it did."""
    call = _toggle_call(data)
    if call is None:
        return "another_plugin"
    if _scoped(call):
        return "scoped"
    if call.get("enabled"):
        return "switching_on"
    hub_module.halt(SWITCHED_OFF, SWITCH_OFF_WAIT_S)
    return "stopped"


def after_toggle(data: Any) -> str:
    """At the end of `toggle_plugin` (v1.7 runs our extensions there only while the plugin is on
    for everyone): switched on, or a switch-off that failed, the threads start again now, off the
    caller's thread, with no wait for a message or the job loop, unless an update or an uninstall
    under way still holds them ("held"). Returns what it did."""
    call = _toggle_call(data)
    if call is None:
        return "another_plugin"
    if _scoped(call):
        return "scoped"
    if not call.get("enabled") and data.get("exception") is None:
        return "off"  # switched off (a host that runs this then): the threads stay stopped
    lifecycle.release_hold(SWITCHED_OFF)
    return "started" if resume_threads("switch-on") == "resumed" else "held"


def resume_threads(why: str) -> str:
    """A hold has just ended (`why`: a switch-on, an update's install): the worker and the capture
    writer start again now, off the caller's thread, with no wait for a message or the job loop;
    "held" when another hold still keeps them stopped, else "resumed"."""
    if lifecycle.restart_held():
        return "held"
    the_hub = hub()
    in_background(why, lambda: (the_hub.start_worker_now(), the_hub.ensure_writer()))
    return "resumed"


def _toggle_call(data: Any) -> dict[str, Any] | None:
    """toggle_plugin's arguments by name when it toggles this plugin; None otherwise."""
    call = {name: host.call_argument(data, position, name)
            for position, name in enumerate(TOGGLE_PARAMETERS)}
    return call if call["plugin_name"] == PLUGIN_NAME else None


def _scoped(call: dict[str, Any]) -> bool:
    return bool(call.get("project_name") or call.get("agent_profile"))
