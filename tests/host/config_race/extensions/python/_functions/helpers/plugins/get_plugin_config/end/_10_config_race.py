"""Test device: a settings-page save landing right after "This is me" read the plugin's settings
(`race.AFTER_READ`)."""

from helpers.extension import Extension
from usr.plugins.config_race import race


class ConfigRace(Extension):
    def execute(self, data=None, **kwargs):
        if not race.AFTER_READ or not isinstance(data, dict):
            return
        args, named = tuple(data.get("args") or ()), dict(data.get("kwargs") or {})
        plugin = args[0] if args else named.get("plugin_name")
        project = args[2] if len(args) > 2 else named.get("project_name")
        if plugin == race.PLUGIN and not project and race.within_reader():
            race.AFTER_READ.pop()(data.get("result"))
