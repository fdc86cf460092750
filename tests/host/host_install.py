"""Install and discovery in a real Agent Zero v1.7: the install hook as the installer calls it, and
Agent Zero's own loaders finding the plugin's extensions, tool, API handlers and prompt — with no
file of ours named like one of Agent Zero's (its loaders merge by file name: first wins).

The install hook with an interpreter that has no pip (v2.x's image venv may lack it): Agent Zero's
interpreter here has pip, so a pip-less copy of its environment is made (a venv without pip that
holds Agent Zero's packages, pip left out) and the harness calls the hook in it, as the installer
does, with uv on PATH (from requirements-test.txt). Every requirement is already there, so uv checks
them and installs nothing; uv installing a package for real is tests/test_install_requirements.py's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import unittest
import venv

import host_kit

POINTS = {  # extension point -> the class our file there defines
    "agent_init": "HonchoStartWorker",
    "job_loop": "HonchoKeepWorker",
    "message_loop_prompts_after": "HonchoRecall",
    "tool_execute_after": "HonchoCaptureResponse",
    "_functions/agent/Agent/hist_add_user_message/end": "HonchoCaptureUser",
}

world: host_kit.HostWorld
first_install: object = None


def setUpModule() -> None:
    global world, first_install
    world = host_kit.HostWorld()
    first_install = world.host.hook("honcho", "install")  # before any chat: no outbox yet


def source_of(cls: type) -> str:
    """The file a class was loaded from (Agent Zero loads extensions by path, outside
    sys.modules)."""
    return cls.execute.__code__.co_filename


def ours(path: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(world.plugin_dir) + os.sep)


def others_files(kind: str) -> set[str]:
    """Base names of files under any `<kind>` folder of the tree outside our plugin (core and
    plugins)."""
    names: set[str] = set()
    for root, dirs, files in os.walk(world.tree):
        dirs[:] = [d for d in dirs
                   if not ours(os.path.join(root, d)) and d not in ("tmp", "node_modules")]
        if f"{os.sep}{kind}" in root + os.sep:
            names.update(files)
    return names


class InstallHookTest(unittest.TestCase):
    def test_install_by_the_installer_reports_pip_ran_and_creates_the_outbox(self) -> None:
        # Agent Zero's interpreter here has pip (v1.7's image too): pip is used, not uv.
        self.assertEqual(first_install, {"requirements": "ok", "installer": "pip",
                                         "outbox": "created", "upgrade_1x": "nothing to upgrade",
                                         "delivery": "no_update"})

    def test_install_again_after_capture_migrates_the_existing_outbox(self) -> None:
        world.host.script("Hello.")
        world.host.turn(world.host.new_chat(), "Hello there.")
        self.assertTrue(os.path.exists(world.outbox_path))
        self.assertEqual(world.host.hook("honcho", "install"),
                         {"requirements": "ok", "installer": "pip", "outbox": "migrated",
                          "upgrade_1x": "nothing to upgrade",
                          "delivery": "no_update"})


class InstallWithoutPipTest(unittest.TestCase):
    def test_install_by_the_installer_with_no_pip_runs_uv(self) -> None:
        folder = tempfile.mkdtemp(prefix="honcho-no-pip-")
        self.addCleanup(shutil.rmtree, folder, True)
        python = pipless_copy_of_this_environment(folder)
        self.assertNotEqual(subprocess.run([python, "-m", "pip", "--version"], capture_output=True,
                                           check=False, timeout=60).returncode, 0)
        uv = find_uv()
        env = {**os.environ, "PATH": os.pathsep.join([os.path.dirname(uv), os.environ["PATH"]]),
               # No index is asked: every requirement is in the environment already.
               "UV_OFFLINE": "1", "UV_CACHE_DIR": os.path.join(folder, "uv-cache")}
        harness = os.path.join(host_kit.required_env("A0_HARNESS"), "a0host.py")
        done = subprocess.run([python, harness, "hook", world.tree, "honcho", "install"],
                              capture_output=True, text=True, env=env, check=False, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertEqual(answer, {"requirements": "ok", "installer": "uv", "outbox": "migrated",
                                  "upgrade_1x": "nothing to upgrade",
                                  "delivery": "no_update"})


def pipless_copy_of_this_environment(folder: str) -> str:
    """A venv without pip holding this interpreter's packages (linked; their metadata copied, as
    uv does not read linked metadata), pip left out; its interpreter."""
    env_dir = os.path.join(folder, "venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    ours = sysconfig.get_paths()["purelib"]
    theirs = sysconfig.get_paths(vars={"base": env_dir, "platbase": env_dir})["purelib"]
    for entry in sorted(os.listdir(ours)):
        if entry == "pip" or entry.startswith("pip-"):
            continue
        source, target = os.path.join(ours, entry), os.path.join(theirs, entry)
        if entry.endswith(".dist-info"):
            shutil.copytree(source, target)
        else:
            os.symlink(source, target)
    return os.path.join(env_dir, "bin", "python")


def find_uv() -> str:
    """uv from requirements-test.txt: on PATH, or in this checkout's .venv (as CI makes it)."""
    beside = os.path.join(host_kit.ROOT, ".venv", "bin", "uv")
    found = shutil.which("uv") or (beside if os.path.isfile(beside) else None)
    if found is None:
        raise AssertionError("uv is not installed: put it on PATH (pip install -r"
                             " requirements-test.txt)")
    return found


class DiscoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.ctx = world.host.new_chat()
        cls.agent = cls.ctx.get_agent()

    def test_agent_zero_loads_our_extension_at_each_point(self) -> None:
        from helpers.extension import _get_extension_classes

        for point, class_name in POINTS.items():
            with self.subTest(point=point):
                agent = None if point == "job_loop" else self.agent
                found = [c for c in _get_extension_classes(point, agent=agent)
                         if ours(source_of(c))]
                self.assertEqual([c.__name__ for c in found], [class_name])

    def test_no_extension_file_of_ours_is_named_like_another(self) -> None:
        mine = {name for point in POINTS
                for name in os.listdir(os.path.join(world.plugin_dir, "extensions", "python",
                                                    point))}
        self.assertTrue(mine and all(name.startswith("_") and "honcho" in name for name in mine),
                        mine)
        self.assertEqual(mine & others_files(os.path.join("extensions", "python")), set())

    def test_agent_zero_finds_the_tool_and_only_ours(self) -> None:
        from helpers import subagents

        tool = self.agent.get_tool(name="honcho_memory", method=None, args={}, message="",
                                   loop_data=None)
        self.assertEqual(type(tool).__name__, "HonchoMemory")
        self.assertTrue(ours(source_of(type(tool))))
        paths = subagents.get_paths(self.agent, "tools", "honcho_memory.py")
        self.assertEqual([ours(p) for p in paths], [True])

    def test_agent_zero_routes_both_api_handlers_to_ours(self) -> None:
        for handler in ("honcho_status", "honcho_action"):
            with self.subTest(handler=handler):
                self.assertFalse(os.path.exists(os.path.join(world.tree, "api", f"{handler}.py")))
                body = {"action": "wake"} if handler == "honcho_action" else {}
                response = world.host.api(f"plugins/honcho/{handler}", body)
                self.assertEqual(response.status_code, 200, response.get_data(as_text=True)[:300])
                self.assertIs(response.get_json()["ok"], True)

    def test_the_tool_prompt_is_read_by_agent_zero_and_is_in_the_system_prompt(self) -> None:
        world.host.script("Hi.")
        ctx = world.host.new_chat()
        world.host.turn(ctx, "Hi.")
        system = str(world.host.model_calls(ctx)[0]["messages"][0])
        self.assertIn("### honcho_memory", system)
        self.assertNotIn("honcho_tool_offered", system)  # the prompt's conditions were evaluated
        # As Agent Zero's tools prompt reads it: with the kwargs our system-prompt extension left.
        agent = ctx.get_agent()
        kwargs = agent.get_data("_tool_prompt_kwargs")["agent.system.tool.honcho_memory.md"]
        text = agent.read_prompt("agent.system.tool.honcho_memory.md", **kwargs)
        self.assertTrue(text.strip().startswith("### honcho_memory"), text[:80])

    def test_no_prompt_file_of_ours_is_named_like_another(self) -> None:
        mine = set(os.listdir(os.path.join(world.plugin_dir, "prompts")))
        self.assertEqual(mine, {"agent.system.tool.honcho_memory.md", "honcho.recall_block.md"})
        self.assertEqual(mine & others_files("prompts"), set())

    def test_no_tool_or_api_file_of_ours_is_named_like_another(self) -> None:
        for kind in ("tools", "api"):
            with self.subTest(kind=kind):
                mine = {n for n in os.listdir(os.path.join(world.plugin_dir, kind))
                        if n.endswith(".py")}
                self.assertTrue(mine)
                self.assertEqual(mine & others_files(kind), set())


if __name__ == "__main__":
    unittest.main()
