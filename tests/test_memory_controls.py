"""Memory controls: the agent's self-model and the dialectic note in the pack, recall modes, context cadence,
and their independence from each other."""

from __future__ import annotations

import unittest

import hub_testkit  # noqa: F401  (imported for its effect: the checkout on sys.path)

from honcho_hub.recall.pack import AGENT_TITLE, NOTE_TITLE, ContextData, build_pack, estimate_tokens


def used_tokens(pack) -> int:
    return sum(estimate_tokens(title) + estimate_tokens(text) + 2 for title, text in pack.sections)


class PackSectionsTest(unittest.TestCase):
    USER = ContextData(representation="\n".join(f"The user likes thing number {i}." for i in range(200)),
                       card=["Name: Ada"], summary="They talked about tea.")

    def with_agent(self, **kw) -> ContextData:
        return ContextData(**{**self.USER.__dict__, "agent_representation": "\n".join(
            f"The agent tends to do habit number {i}." for i in range(200)), "agent_card": ["Role: helper"], **kw})

    def test_the_self_model_gets_its_share_and_the_user_sections_the_rest(self):
        for budget, share in ((500, 0.25), (1000, 0.5), (400, 0.1)):
            with self.subTest(budget=budget, share=share):
                pack = build_pack(self.with_agent(), budget, agent_share=share)
                agent = [s for s in pack.sections if s[0] == AGENT_TITLE]
                self.assertEqual(len(agent), 1)
                self.assertLessEqual(estimate_tokens(agent[0][0]) + estimate_tokens(agent[0][1]) + 2,
                                     int(budget * share))
                self.assertGreater(estimate_tokens(agent[0][1]), int(budget * share) * 0.7)  # the share is used
                self.assertLessEqual(used_tokens(pack), budget)
                user_only = [s for s in pack.sections if s[0] != AGENT_TITLE]
                self.assertLessEqual(sum(estimate_tokens(t) + estimate_tokens(x) + 2 for t, x in user_only),
                                     budget - int(budget * share))

    def test_without_a_self_model_or_a_share_the_pack_is_what_it_was(self):
        before = build_pack(self.USER, 500)
        self.assertEqual(build_pack(self.USER, 500, agent_share=0.5), before)  # nothing to show: no budget kept
        self.assertEqual(build_pack(self.with_agent(), 500, agent_share=0.0), before)

    def test_the_self_model_holds_its_card_after_its_representation(self):
        data = ContextData(agent_representation="Tends to answer briefly.", agent_card=["Role: helper"])
        pack = build_pack(data, 500, agent_share=0.25)
        self.assertEqual(pack.sections, ((AGENT_TITLE, "Tends to answer briefly.\n\n- Role: helper"),))

    def test_the_note_comes_first_and_counts_against_the_budget(self):
        pack = build_pack(self.USER, 300, note="The user is planning a winter trip; keep answers short.")
        self.assertEqual(pack.sections[0], (NOTE_TITLE, "The user is planning a winter trip; keep answers short."))
        self.assertLessEqual(used_tokens(pack), 300)
        self.assertEqual(build_pack(self.USER, 300, note="  "), build_pack(self.USER, 300))


if __name__ == "__main__":
    unittest.main()
