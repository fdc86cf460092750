"""The Agent Zero side of the plugin: reads facts off Agent Zero's objects and calls the core.

Agent Zero never loads this package as an extension (it scans only `extensions/python/<point>/`);
the thin extension, tool and API files import it. It is the one place that imports `helpers.*`.
"""
