"""Before the Honcho plugin's capture (`_50_`) of the same `hist_add_user_message` call: when the
chat's context data asks for it (`_racing_stop`: "switch-off" or "uninstall", used once), switch
the plugin off for everyone or call its uninstall hook, as Agent Zero does, now.

Agent Zero listed this call's extensions before running the first, so the plugin's capture runs
after the stop: a capture racing the switch-off or the uninstall, made real.
"""

from helpers import plugins
from helpers.extension import Extension

ARM = "_racing_stop"


class RacingStop(Extension):
    def execute(self, data=None, **kwargs):
        stop = self.agent.context.data.pop(ARM, None)
        if stop == "switch-off":
            plugins.toggle_plugin("honcho", False, "", "")
        elif stop == "uninstall":
            plugins.call_plugin_hook("honcho", "uninstall")
