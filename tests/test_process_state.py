"""The process state outlives a re-import of the plugin's modules: what an older module
generation made — a ProcessState of its own (older) class, or the module attributes used before
ProcessState — is what the newer generation uses, completed with the fields it lacked."""

import sys
import threading
import types
import unittest
from dataclasses import dataclass, field

from honcho_hub import runtime
from honcho_hub.capture import kept
from honcho_hub.capture.service import Counters


@dataclass(eq=False)
class OlderProcessState:
    """What an older generation's ProcessState could look like: fewer fields."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    journal: object = None


class ProcessStateTest(unittest.TestCase):
    def setUp(self) -> None:
        # Each test stands for a fresh process; the suite's own state comes back afterwards.
        outer = sys.modules.pop(runtime.STATE_MODULE, None)
        self.addCleanup(self._restore, outer)

    @staticmethod
    def _restore(outer: types.ModuleType | None) -> None:
        sys.modules.pop(runtime.STATE_MODULE, None)
        if outer is not None:
            sys.modules[runtime.STATE_MODULE] = outer

    def test_every_call_returns_the_state_registered_outside_the_plugins_modules(self) -> None:
        state = runtime.process_state()
        self.assertIs(runtime.process_state(), state)
        self.assertIs(vars(sys.modules[runtime.STATE_MODULE])["state"], state)
        self.assertIsInstance(state, runtime.ProcessState)

    def test_an_older_generations_state_is_kept_and_gains_the_fields_it_lacked(self) -> None:
        journal = object()
        older = OlderProcessState(journal=journal)
        registry = types.ModuleType(runtime.STATE_MODULE)
        registry.state = older
        sys.modules[runtime.STATE_MODULE] = registry
        state = runtime.process_state()
        self.assertIs(state, older)
        self.assertIs(kept.JOURNAL.of(state), journal)
        self.assertEqual((state.warned, state.api_checks, state.debug_saved_levels),
                         (set(), {}, {}))
        self.assertIsNone(state.restart_hold)
        counters = kept.COUNTERS.of(state)  # made on first use, then kept on the older state
        self.assertIsInstance(counters, Counters)
        self.assertIs(kept.COUNTERS.of(runtime.process_state()), counters)

    def test_the_module_attributes_of_a_generation_before_process_state_are_adopted(self) -> None:
        lock, journal = threading.RLock(), object()
        registry = types.ModuleType(runtime.STATE_MODULE)
        registry.lock, registry.journal, registry.warned = lock, journal, {"sdk_missing"}
        sys.modules[runtime.STATE_MODULE] = registry
        state = runtime.process_state()
        self.assertIs(state.lock, lock)
        # the journal holds the file lock: never a second one
        self.assertIs(kept.JOURNAL.of(state), journal)
        self.assertEqual(state.warned, {"sdk_missing"})
        self.assertIsNone(kept.WRITER.of(state))

    def test_a_kept_value_is_made_once_and_found_by_a_later_generations_kept_by_name(self) -> None:
        made = []
        first = runtime.Kept("journal", lambda: made.append(1) or len(made))
        state = runtime.process_state()
        self.assertEqual((first.of(state), first.of(state)), (1, 1))
        first.put(state, 7)
        # a newer module generation's
        later = runtime.Kept("journal", lambda: made.append(1) or len(made))
        self.assertEqual((later.of(runtime.process_state()), made), (7, [1]))


if __name__ == "__main__":
    unittest.main()
