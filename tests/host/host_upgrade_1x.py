"""Upgrading from the Plugin Hub's `honcho` 1.x in a real Agent Zero v1.7, by both paths of
docs/upgrading-from-1x.md, against the real Honcho.

(a) The 1.x folder's git remote switched to this repository, then `git fetch` and `git checkout
    -f -B main origin/main`: 1.x's untracked config.json (and its ignored leftovers) stay in
    usr/plugins/honcho, and Agent Zero calls no install hook. The 1.x checkout here is a stand-in
    written by us (its plugin.yaml, default_config.yaml and .gitignore as 1.x has them; no 1.x
    code).
(b) 1.x uninstalled (its folder and config.json gone), this plugin installed: only the HONCHO_*
    secrets in Agent Zero's secrets file name the workspace and the human's peer.

Each path needs a fresh Agent Zero, and the harness starts one per process: run as a script, this
file runs itself once per path (`UPGRADE_PATH=a|b`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unittest
import uuid

import host_kit

PATH = os.environ.get("UPGRADE_PATH", "")
USER_PEER = "dana-" + uuid.uuid4().hex[:8]
AGENT_PEER = "jarvis-" + uuid.uuid4().hex[:8]
V1_PLUGIN_YAML = """name: honcho
title: Honcho Conversational Memory
version: 1.2.0
settings_sections:
  - agent
per_project_config: true
per_agent_config: false
"""
V1_DEFAULTS = """honcho_workspace_id: "agent-zero"
honcho_user_id: "user"
honcho_agent_peer_id: "agent-zero"
honcho_cache_ttl: 120
honcho_max_context_tokens: 500
honcho_debug: false
"""
V1_GITIGNORE = "__pycache__/\n*.pyc\n*.pyo\n.toggle-0\n.toggle-1\n*.egg-info/\ndist/\nbuild/\n"

world: host_kit.HostWorld


def git(folder: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", folder, "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr[-1000:]}")
    return done.stdout


def write(path: str, content: str | bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(content.encode() if isinstance(content, str) else content)


def switch_1x_checkout_to_ours(w: host_kit.HostWorld) -> None:
    """Path (a): a 1.x checkout with its saved settings, then the commands of the upgrade doc."""
    ours = os.path.join(w.tmp, "ours")  # "this repository": a clone source made of our files
    shutil.copytree(w.plugin_dir, ours)
    git(ours, "init", "-q", "-b", "main")
    git(ours, "add", "-A")
    git(ours, "commit", "-q", "-m", "ours")
    shutil.rmtree(w.plugin_dir)
    os.makedirs(w.plugin_dir)
    for name, content in (("plugin.yaml", V1_PLUGIN_YAML), ("default_config.yaml", V1_DEFAULTS),
                          (".gitignore", V1_GITIGNORE)):
        write(os.path.join(w.plugin_dir, name), content)
    # As a clone of 1.x's repository left it, on a branch named otherwise than ours (`master`)
    # that tracks 1.x's: Agent Zero's Update pulls the current branch's name from its remote.
    git(w.plugin_dir, "init", "-q", "-b", "master")
    git(w.plugin_dir, "add", "-A")
    git(w.plugin_dir, "commit", "-q", "-m", "1.x stand-in")
    git(w.plugin_dir, "remote", "add", "origin", "https://github.com/alogotron/a0-plugin-honcho")
    git(w.plugin_dir, "config", "branch.master.remote", "origin")
    git(w.plugin_dir, "config", "branch.master.merge", "refs/heads/master")
    # What 1.x's settings page saved, and what 1.x leaves beside it (ignored by its .gitignore).
    write(os.path.join(w.plugin_dir, "config.json"), json.dumps({
        "honcho_workspace_id": w.workspace_id, "honcho_user_id": USER_PEER,
        "honcho_agent_peer_id": AGENT_PEER, "honcho_cache_ttl": 300,
        "honcho_max_context_tokens": 800, "honcho_debug": False,
        "honcho_session_prefix": "a0"}))
    write(os.path.join(w.plugin_dir, ".toggle-1"), "")
    write(os.path.join(w.plugin_dir, "helpers", "__pycache__", "honcho_helper.cpython-312.pyc"),
          b"\x00not-a-module")
    # docs/upgrading-from-1x.md, path (a)
    git(w.plugin_dir, "remote", "set-url", "origin", ours)
    git(w.plugin_dir, "fetch", "-q", "origin")
    git(w.plugin_dir, "checkout", "-q", "-f", "-B", "main", "origin/main")


def only_the_secrets_left(w: host_kit.HostWorld) -> None:
    """Path (b): uninstall deleted 1.x's folder (config.json with it); this plugin installed; the
    1.x secrets stay in Agent Zero's secrets file."""
    write(os.path.join(w.tree, "usr", "secrets.env"),
          f"HONCHO_WORKSPACE_ID={w.workspace_id}\nHONCHO_USER_ID={USER_PEER}\n")


def delivered_as(ctx, peer: str) -> list:
    messages = world.session_messages(f"chat-{ctx.id}")
    return [m for m in messages if m.peer_id == peer]


class AfterGitSwitchTest(unittest.TestCase):
    """Path (a): the first start after the switch."""

    @classmethod
    def setUpClass(cls) -> None:
        global world
        world = host_kit.HostWorld(unset=("HONCHO_WORKSPACE_ID",),
                                   prepare=switch_1x_checkout_to_ours)
        cls.ctx = world.host.new_chat()  # the first start: agent_init starts the worker
        cls.record = os.path.join(world.plugin_dir, "config.1x.json")
        host_kit.wait_for(lambda: os.path.exists(cls.record), 30, "the 1.x upgrade")

    def test_the_switch_kept_1x_config_json_and_replaced_its_files_by_ours(self) -> None:
        self.assertTrue(os.path.exists(os.path.join(world.plugin_dir, "hooks.py")))
        self.assertTrue(os.path.exists(os.path.join(world.plugin_dir, ".toggle-1")))

    def test_agent_zero_s_update_then_pulls_this_repository(self) -> None:
        from helpers import git as a0_git  # what the Hub's Update runs (pre_update, pull, install)

        a0_git.update_repo(world.plugin_dir)
        self.assertEqual(git(world.plugin_dir, "rev-parse", "--abbrev-ref", "@{upstream}").strip(),
                         "origin/main")

    def test_config_json_holds_the_1x_settings_under_our_names(self) -> None:
        with open(os.path.join(world.plugin_dir, "config.json"), encoding="utf-8") as handle:
            saved = json.load(handle)
        self.assertEqual(saved, {"workspace_id": world.workspace_id, "user_peer_id": USER_PEER,
                                 "agent_peer_id": AGENT_PEER, "cache_ttl_s": 300,
                                 "max_context_tokens": 800, "debug": False})

    def test_status_reports_the_upgrade_and_the_1x_identity(self) -> None:
        status = host_kit.honcho_status(world.host)
        self.assertEqual(status["upgrade"]["moved"],
                         ["workspace_id", "user_peer_id", "agent_peer_id", "cache_ttl_s",
                          "max_context_tokens", "debug"])
        self.assertEqual(status["upgrade"]["set_aside"], ["honcho_session_prefix"])
        self.assertEqual((status["identity"]["workspace_id"], status["identity"]["user_peer_id"],
                          status["identity"]["agent_peer_id"]),
                         (world.workspace_id, USER_PEER, AGENT_PEER))

    def test_a_turn_is_delivered_to_the_1x_workspace_and_peers_in_chat_session(self) -> None:
        world.host.script("Noted: your boat is called Wren.")
        world.host.turn(self.ctx, "My boat is called Wren.", timeout=60)
        mine = host_kit.wait_for(lambda: delivered_as(self.ctx, USER_PEER), 60,
                                 "the typed message in the 1.x workspace as the 1.x user peer")
        self.assertIn("Wren", mine[0].content)
        host_kit.wait_for(lambda: delivered_as(self.ctx, AGENT_PEER), 60,
                          "the answer as the 1.x agent peer")


class AfterReinstallTest(unittest.TestCase):
    """Path (b): the first start after uninstalling 1.x and installing this plugin."""

    @classmethod
    def setUpClass(cls) -> None:
        global world
        world = host_kit.HostWorld(unset=("HONCHO_WORKSPACE_ID",), prepare=only_the_secrets_left)
        cls.installed = world.host.hook("honcho", "install")  # as the Hub's install calls it
        cls.ctx = world.host.new_chat()

    def test_install_reports_no_1x_file_to_upgrade(self) -> None:
        self.assertEqual(self.installed["upgrade_1x"], "nothing to upgrade")

    def test_status_shows_the_identity_the_secrets_give_and_no_upgrade(self) -> None:
        status = host_kit.honcho_status(world.host)
        self.assertEqual((status["identity"]["workspace_id"], status["identity"]["user_peer_id"]),
                         (world.workspace_id, USER_PEER))
        self.assertIsNone(status["upgrade"])

    def test_a_turn_is_delivered_to_the_workspace_and_peer_the_secrets_name(self) -> None:
        world.host.script("Noted: your boat is called Wren.")
        world.host.turn(self.ctx, "My boat is called Wren.", timeout=60)
        mine = host_kit.wait_for(lambda: delivered_as(self.ctx, USER_PEER), 60,
                                 "the typed message in the secrets' workspace as their user peer")
        self.assertIn("Wren", mine[0].content)


CASES = {"a": AfterGitSwitchTest, "b": AfterReinstallTest}


if __name__ == "__main__":
    if PATH:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(CASES[PATH])
        sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
    failed = [path for path in CASES
              if subprocess.run([sys.executable, __file__], env={**os.environ,
                                                                 "UPGRADE_PATH": path}).returncode]
    if failed:
        print(f"host_upgrade_1x: path(s) {', '.join(failed)} failed", file=sys.stderr)
    sys.exit(1 if failed else 0)
