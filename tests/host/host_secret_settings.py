"""Connection settings kept in Agent Zero's secrets, in the real Agent Zero v1.7 against the real
Honcho: the honcho_memory tool's status, as Agent Zero adds it to the chat's history (after its own
masker replaced every secret's value with `§§secret(NAME)`), names where each setting is kept and
never echoes a value Agent Zero masks.

HONCHO_API_URL and HONCHO_WORKSPACE_ID are in the tree's `usr/secrets.env` (Settings → Secrets) and
not in the environment, as for a user who followed an older README that put every HONCHO_* there.
"""

from __future__ import annotations

import os
import unittest

import host_kit

IN_SECRETS = ("HONCHO_API_URL", "HONCHO_WORKSPACE_ID")

world: host_kit.HostWorld


def keep_in_secrets(w: host_kit.HostWorld) -> None:
    """The URL and workspace as Settings → Secrets stores them, before Agent Zero starts."""
    with open(os.path.join(w.tree, "usr", "secrets.env"), "a", encoding="utf-8") as secrets:
        secrets.write(f"HONCHO_API_URL={w.honcho_url}\nHONCHO_WORKSPACE_ID={w.workspace_id}\n")


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld(unset=IN_SECRETS, prepare=keep_in_secrets)


class StatusOfSettingsInSecretsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        ctx = world.host.new_chat()
        final, cls.text = world.host.run_tool(ctx, "honcho_memory", action="status")
        assert final is None and isinstance(cls.text, str), (final, cls.text)

    def test_the_settings_are_read_from_the_secrets(self) -> None:
        from helpers.secrets import get_default_secrets_manager

        kept = get_default_secrets_manager().load_secrets()
        self.assertEqual({name: kept.get(name) for name in IN_SECRETS},
                         {"HONCHO_API_URL": world.honcho_url,
                          "HONCHO_WORKSPACE_ID": world.workspace_id})
        self.assertTrue(all(name not in os.environ for name in IN_SECRETS))
        self.assertTrue(self.text.startswith("Honcho memory: "), self.text)

    def test_status_echoes_no_value_agent_zero_masks(self) -> None:
        self.assertNotIn("§§secret(", self.text)

    def test_status_says_where_the_masked_settings_are_kept(self) -> None:
        self.assertIn("API URL set in secrets (self-hosted) · workspace set in secrets", self.text)

    def test_status_still_names_the_settings_kept_elsewhere(self) -> None:
        self.assertIn("user user · agent agent-zero", self.text)


if __name__ == "__main__":
    unittest.main()
