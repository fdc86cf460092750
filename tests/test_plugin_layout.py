"""The plugin folder as Agent Zero sees it: manifest, files, discovery by path, no shadowed
names."""

import ast
import html
import json
import os
import re
import unittest

import yaml
from hub_testkit import (
    ROOT,
    StubApiHandler,
    StubExtension,
    StubTool,
    checkout_text,
    classes_in,
    import_by_path,
    stub_agent_zero,
)

import honcho_hub
from honcho_hub.settings.spec import FIELDS, FIELDS_BY_NAME, PROJECT_GROUPS, defaults

CORE_NAMES = json.loads(checkout_text("tests", "fixtures", "agent_zero_v1_7_names.json"))


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return handle.read()


def reference_table(heading):
    """The rows (lists of cells, header excluded) of the table that follows the line `heading` of
    the reference, `docs/reference.md`."""
    lines = read("docs", "reference.md").splitlines()
    rows = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, f"no table under {heading!r}: every check of it would pass"
    return rows[2:]  # past the header and its separator


def reference_value(cell):
    """A default as the reference's settings table writes it, as a value to compare with the
    spec's."""
    text = cell.strip("`")
    if text in ("true", "false"):
        return text == "true"
    if text == "(empty)":
        return ""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text


def plugin_files(folder, suffix=".py"):
    """The folder's files with that suffix; never empty, so a loop over them always asserts
    something."""
    base = os.path.join(ROOT, folder)
    found = [os.path.join(dirpath, name) for dirpath, _, names in os.walk(base)
             for name in sorted(names) if name.endswith(suffix)]
    assert found, (f"no {suffix} file under {folder}: a moved folder would make every check here"
                   " pass")
    return found


class ManifestTest(unittest.TestCase):
    def test_manifest(self):
        meta = yaml.safe_load(read("plugin.yaml"))
        self.assertEqual(meta["name"], "honcho")
        self.assertRegex(meta["name"], r"^[a-z0-9_]+$")
        self.assertEqual(meta["title"], "Honcho Memory Hub")
        self.assertEqual(meta["version"], honcho_hub.__version__)
        self.assertEqual(meta["settings_sections"], ["agent"])
        self.assertIs(meta["per_project_config"], True)
        self.assertTrue(meta["description"].strip())

    def test_top_level_layout(self):
        for entry in ["plugin.yaml", "hooks.py", "default_config.yaml", "extensions", "tools",
                      "api", "webui", "honcho_hub", "tests", "README.md", "LICENSE",
                      "requirements.txt", "requirements-test.txt", ".gitignore", ".ci/run",
                      "webui/config.html"]:
            with self.subTest(entry=entry):
                self.assertTrue(os.path.exists(os.path.join(ROOT, entry)))
        self.assertFalse(os.path.exists(os.path.join(ROOT, "execute.py")))
        self.assertIn("MIT License", read("LICENSE"))

    def test_gitignore_lists_what_agent_zero_writes(self):
        lines = read(".gitignore").splitlines()
        for pattern in ["config.json", ".toggle-*", "execute_record.json", "__pycache__/"]:
            self.assertIn(pattern, lines)

    def test_requirements(self):
        runtime = [line.strip() for line in read("requirements.txt").splitlines()
                   if line.strip() and not line.startswith("#")]
        names = [re.split(r"[<>=!~ ]", line)[0].lower() for line in runtime]
        self.assertEqual(sorted(names), ["honcho-ai", "httpx", "pyyaml", "tenacity"])
        self.assertIn("honcho-ai>=2.4,<3", runtime)
        self.assertIn("pytest", read("requirements-test.txt"))


def markdown_files():
    """The README, the changelog and every page under docs/."""
    docs = sorted(os.listdir(os.path.join(ROOT, "docs")))
    pages = ["README.md", "CHANGELOG.md"] + [os.path.join("docs", name) for name in docs
                                             if name.endswith(".md")]
    assert len(pages) > 3, "no page under docs/: every link check would pass"
    return pages


def heading_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(page):
    return {heading_anchor(line.lstrip("#")) for line in read(page).splitlines()
            if re.match(r"#{1,6} ", line)}


class ReleaseTest(unittest.TestCase):
    def test_the_version_is_the_changelogs_newest_release(self):
        # An "Unreleased" heading may stand above it: what landed since.
        releases = re.findall(r"^## \[(\d[^\]]*)\]", read("CHANGELOG.md"), re.MULTILINE)
        self.assertTrue(releases, "the changelog names no release")
        self.assertEqual(releases[0], honcho_hub.__version__)
        self.assertEqual(yaml.safe_load(read("plugin.yaml"))["version"], honcho_hub.__version__)
        self.assertRegex(honcho_hub.__version__, r"^\d+\.\d+\.\d+$")  # a release, not a pre-release

    def test_the_readme_is_read_in_five_minutes(self):
        self.assertLessEqual(len(read("README.md").splitlines()), 250)

    def test_every_link_between_our_pages_resolves(self):
        for page in markdown_files():
            links = re.findall(r"\]\(([^)\s]+)\)", read(page))
            for link in links:
                if re.match(r"[a-z]+:", link):
                    continue  # another site's
                with self.subTest(page=page, link=link):
                    target, _, anchor = link.partition("#")
                    target_page = (os.path.normpath(os.path.join(os.path.dirname(page), target))
                                   if target else page)
                    self.assertTrue(os.path.exists(os.path.join(ROOT, target_page)))
                    if anchor and target_page.endswith(".md"):
                        self.assertIn(anchor, anchors_of(target_page))

    def test_every_picture_in_docs_is_shown_named_by_its_theme_and_the_readme_shows_one(self):
        shown = {os.path.normpath(os.path.join(os.path.dirname(page), link))
                 for page in markdown_files()
                 for link in re.findall(r"\]\(([^)\s#]+\.png)\)", read(page))}
        pictures = {os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                    if name.endswith(".png")}
        self.assertEqual(pictures - shown, set(), "pictures no page shows or links")
        self.assertEqual([p for p in sorted(pictures) if not re.search(r"-(dark|light)\.png$", p)],
                         [], "pictures whose name does not say dark or light")
        self.assertEqual(len(re.findall(r"!\[[^\]]*\]\([^)]+\.png\)", read("README.md"))), 1)


class SettingsSurfacesTest(unittest.TestCase):
    def test_default_config_is_exactly_the_spec_defaults(self):
        self.assertEqual(yaml.safe_load(read("default_config.yaml")), defaults())

    def test_the_reference_documents_every_setting_with_default_and_bounds(self):
        rows = reference_table("### Settings")
        named = [cells[0].strip("`") for cells in rows]
        self.assertEqual(sorted(named), sorted(spec.name for spec in FIELDS), "each setting, once")
        row_of = dict(zip(named, rows, strict=True))
        for spec in FIELDS:
            with self.subTest(name=spec.name):
                group, default, accepted, variables = row_of[spec.name][1:5]
                self.assertEqual(group, spec.group + (" (project)" if spec.group in PROJECT_GROUPS
                                                      else ""))
                expected = (float(spec.default) if type(spec.default) in (int, float)
                            else spec.default)
                self.assertEqual(reference_value(default), expected)
                self.assertEqual(accepted, spec.bounds_text())
                self.assertEqual(variables, ", ".join(f"`{var}`" for var in spec.env) or "—")
                for former in spec.formerly:  # a user's saved config may still use it
                    self.assertIn(f"`{former}`", " | ".join(row_of[spec.name]))

    def test_the_reference_documents_every_variable(self):
        rows = reference_table("### Environment variables")
        named = {cells[0].strip("`"): cells[1] for cells in rows}
        expected = {"HONCHO_API_KEY": "—",
                    **{var: f"`{spec.name}`" for spec in FIELDS for var in spec.env}}
        self.assertEqual(named, expected, "the table names every variable, with its setting")
        self.assertEqual(len(rows), len(named), "each variable once")

    def test_readme_test_command_is_what_ci_runs(self):
        ci = read(".ci/run")
        self.assertIn('.venv/bin/python -m pytest -q "$@"', ci)  # run_pytest: the README's command
        self.assertIn("\nrun_pytest tests\n", ci)
        self.assertIn(".venv/bin/python -m pytest -q tests\n```", read("README.md"))

    def test_settings_page_binds_every_setting_and_has_no_key_field(self):
        page = read("webui", "config.html")
        for spec in FIELDS:
            self.assertRegex(page, rf'x-model(\.number)?="config\.{spec.name}"')
        self.assertNotRegex(page, r"config\.[a-z_]*key")
        self.assertIn("HONCHO_API_KEY", page)
        self.assertIn('<template x-if="config">', page)


    def test_each_hint_of_the_settings_page_is_the_specs(self):
        # A field's hint closes its description (a URL's value in effect may follow); its control,
        # bound to the setting, comes next.
        found = re.findall(r'<i>\(([^<]*)\)</i></div>\s*'
                           r'(?:<div class="honcho-config-in-effect"[^>]*></div>\s*)?'
                           r'</div>\s*<div class="field-control">'
                           r'[^\n]*?config\.([a-z0-9_]+)"', read("webui", "config.html"))
        hints = {name: html.unescape(hint) for hint, name in found}
        self.assertEqual(sorted(hints), sorted(spec.name for spec in FIELDS), "each field, once")
        for spec in FIELDS:
            with self.subTest(name=spec.name):
                self.assertEqual(hints[spec.name], spec.hint())


class SettingHintTest(unittest.TestCase):
    def test_a_hint_spells_its_default_as_yaml_and_its_bounds_do(self):
        for name, hint in (("capture_enabled", "true, false; default true"),
                           ("debug", "true, false; default false"),
                           ("max_queued_rows", "100–1,000,000; default 10,000"),
                           ("sdk_timeout_s", "1–120; default 10"),
                           ("agent_representation_share", "0–0.5; default 0.25"),
                           ("recall_wait_ms", "-1–60,000; default -1"),
                           ("endpoint_mode", "hosted, self_hosted; default hosted"),
                           ("api_url", "http(s) URL without credentials; empty = the"
                                       " deployment's default; default empty")):
            with self.subTest(name=name):
                self.assertEqual(FIELDS_BY_NAME[name].hint(), hint)


class WebUiTextTest(unittest.TestCase):
    """Our pages and stores, read as files: nothing of ours sets HTML, and since Agent Zero renders
    a toast's message (and its notification history) as HTML, every toast goes through the one
    helper that escapes it."""

    HELPER = "webui/honcho-toast.js"

    def ui_files(self):
        """Every page and script of our web UI: webui/ and the sidebar's extensions/webui/."""
        found = [os.path.relpath(os.path.join(dirpath, name), ROOT)
                 for folder in ("webui", "extensions/webui")
                 for dirpath, _, names in os.walk(os.path.join(ROOT, folder))
                 for name in sorted(names) if name.endswith((".html", ".js"))]
        self.assertGreaterEqual(len(found), 5)  # a moved folder would make every check here pass
        return found

    def test_no_page_or_store_of_ours_sets_html(self):
        for name in self.ui_files():
            with self.subTest(name):
                self.assertEqual(re.findall(r"x-html|innerHTML|outerHTML|insertAdjacentHTML"
                                            r"|document\.write", read(name)), [])

    def test_only_the_escaping_helper_calls_agent_zeros_toasts(self):
        stores = [name for name in self.ui_files() if name.endswith(".js") and name != self.HELPER]
        self.assertGreaterEqual(len(stores), 2)
        for name in stores:
            with self.subTest(name):
                self.assertEqual(re.findall(r"notification-store\.js|\btoastFrontend\w*"
                                            r"|notificationStore", read(name)), [])
        helper = read(self.HELPER)
        for entity in ("&amp;", "&lt;", "&gt;", "&quot;", "&#39;"):
            self.assertIn(entity, helper)


class DiscoveryTest(unittest.TestCase):
    """Load extensions, tools and API handlers by path, exactly as Agent Zero does."""

    def test_each_file_loads_with_one_class_of_the_expected_kind(self):
        kinds = [("extensions/python", StubExtension), ("tools", StubTool), ("api", StubApiHandler)]
        with stub_agent_zero() as host:
            for folder, base in kinds:
                for path in plugin_files(folder):
                    with self.subTest(path=os.path.relpath(path, ROOT)):
                        loaded = import_by_path(os.path.join(host.plugin_dir,
                                                             os.path.relpath(path, ROOT)))
                        self.assertEqual(len(classes_in(loaded, base)), 1)

    def test_no_file_shadows_a_core_agent_zero_name(self):
        core_ext = {name for names in CORE_NAMES["extensions"].values() for name in names}
        for path in plugin_files("extensions/python"):
            name = os.path.basename(path)
            with self.subTest(extension=name):
                self.assertNotIn(name, core_ext)
                self.assertRegex(name, r"^_\d\d_honcho_[a-z0-9_]+\.py$")
        for path in plugin_files("tools"):
            self.assertNotIn(os.path.basename(path)[:-3], CORE_NAMES["tools"])
        for path in plugin_files("prompts", ".md"):
            self.assertNotIn(os.path.basename(path), CORE_NAMES["prompts"])
        for path in plugin_files("api"):
            self.assertNotIn(os.path.basename(path)[:-3], CORE_NAMES["api"])

    def test_the_fixture_knows_the_core_names_it_guards(self):
        self.assertIn("_10_mask_secrets.py", CORE_NAMES["extensions"]["tool_execute_after"])
        self.assertIn("response", CORE_NAMES["tools"])


class CoreHygieneTest(unittest.TestCase):
    def imports_of(self, path):
        tree = ast.parse(read(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from (alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node.module.split(".")[0]

    def test_core_imports_no_agent_zero_and_only_the_gateway_imports_honcho(self):
        for path in plugin_files("honcho_hub"):
            rel = os.path.relpath(path, ROOT)
            found = set(self.imports_of(rel))
            with self.subTest(module=rel):
                self.assertFalse(found & {"helpers", "agent", "initialize", "usr", "models",
                                          "python"})
                if rel != os.path.join("honcho_hub", "gateway", "gateway.py"):
                    self.assertNotIn("honcho", found)


if __name__ == "__main__":
    unittest.main()
